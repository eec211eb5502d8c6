"""Horovod over MPI: srun starts the ranks through its PMI plugin, the image's MPI connects
them. The plugin must be one the image's MPI speaks (Debian's Open MPI: pmix only), or every
rank starts as 'rank 0 of 1'."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvd_container.launcher.checks.declarations import check
from hvd_container.launcher.checks.verdict import Verdict, fail, skip, warn
from hvd_container.launcher.controllers import _scan
from hvd_container.launcher.controllers._horovod import HorovodController
from hvd_container.launcher.plan.launch import Launch

if TYPE_CHECKING:
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.sites.model import Site

    from hvd_container.facts import ImageFacts


def _family(plugin: str) -> str:
    return "pmix" if plugin.startswith("pmix") else plugin


class Mpi(HorovodController):
    name = "mpi"
    about = "Horovod over MPI, the ranks started by srun's PMI plugin"
    default = True
    uses_host_mpi = True

    @classmethod
    def detect(cls, script: _scan.Script, facts: ImageFacts | None) -> str | None:
        """A script that imports horovod (and not Lightning, which has its own controller)."""
        if script.shows(_scan.HOROVOD) and not script.shows(_scan.LIGHTNING):
            return ""
        return None

    def mpi_plugin(
        self, site: Site, request: LaunchRequest, facts: ImageFacts | None, single_task: bool
    ) -> tuple[str | None, str | None]:
        """The site's default plugin, or, when the image's MPI speaks another PMI only (and no
        --mpi was given), the one it speaks."""
        default = site.mpi
        if request.mpi or default is None or single_task or facts is None or not facts.mpi_pmi:
            return request.mpi or default, None
        if _family(default) in facts.mpi_pmi:
            return default, None
        chosen = facts.mpi_pmi[0]
        return chosen, (
            f"site {site.name} launches with --mpi={default}, but {facts.source} speaks "
            f"{', '.join(facts.mpi_pmi)} only: using --mpi={chosen} (pass --mpi to choose)"
        )

    def missing_in_image(self, launch: Launch) -> Verdict | None:
        """The image must have MPI, and Horovod's MPI controller, for more than one rank."""
        facts = launch.facts
        if (
            facts is None
            or launch.single_task
            or facts.mpi_pmi is None
            or facts.controllers is None
        ):
            return None
        if facts.mpi_pmi == ():
            fix = (
                "pass --controller gloo"
                if "gloo" in facts.controllers
                else "add `mpi:` to the recipe and rebuild"
            )
            return fail(
                f"{facts.source} has no MPI: under srun every rank would be an independent size-1 Horovod job; {fix}"
            )
        if self.built(facts) is False:
            return fail(
                f"{facts.source} builds Horovod without the MPI controller: pass --controller gloo"
            )
        return None


@check("mpi-plugin", "srun's --mpi plugin is one the image's MPI speaks", needs=("facts",))
def plugin_matches_the_image(launch: Launch) -> Verdict | None:
    facts = launch.facts
    assert facts is not None
    if launch.single_task:
        return skip("one task: a size-1 job under any plugin")
    if not facts.mpi_pmi or not launch.runtime.runs_image:
        return skip(
            "the image's MPI and its PMI are not known"
            if facts.mpi_pmi is None
            else "the image has no MPI"
        )
    _plugin, note = launch.controller.mpi_plugin(
        launch.site, launch.request, facts, launch.single_task
    )
    if note:
        return warn(note)
    if launch.mpi is None or _family(launch.mpi) in facts.mpi_pmi:
        return None
    wanted = ", ".join(facts.mpi_pmi)
    return fail(
        f"srun --mpi={launch.mpi} does not match the image's MPI ({facts.source} speaks {wanted}): ranks would each be 'rank 0 of 1'; pass --mpi {facts.mpi_pmi[0]}"
    )

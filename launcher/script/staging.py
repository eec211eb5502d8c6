"""--stage: the image file copied to node-local storage on every node of the allocation before
the step, with sbcast (Slurm's own tree broadcast: a few reads of the shared file system instead
of one per rank), and the step run with the copy (launcher/programs/stage_image.sh)."""

from __future__ import annotations

from hvd_container.launcher.plan.launch import Launch
from hvd_container.launcher.runtimes import is_file_ref

from hvd_container.core.errors import UserError
from hvd_container.core.programs import program_text

STAGE = program_text("hvd_container.launcher", "stage_image.sh")


def _names(word: str, image: str) -> bool:
    return word == image or word.endswith("=" + image)


def staged_step(launch: Launch, image: str | None, step: list[str]) -> list[str]:
    """The step with the image staged first; a one-line error where there is no image file
    on the srun line to stage."""
    named, at = stage_point(launch, image, step)
    return [*stage_command(launch, named), str(at), *step]


def stage_command(launch: Launch, named: str) -> list[str]:
    """The words that copy the image to the nodes; alone, they print the copy's path (a batch
    script names it on its srun line), followed by AT and the step they run the step."""
    return ["sh", "-c", STAGE, "hvd-stage", launch.site.images.stage_dir, named]


def stage_point(launch: Launch, image: str | None, step: list[str]) -> tuple[str, int]:
    """The image as the step names it, and the index of the step's word that names it (for the
    runtime: the script's own arguments are never rewritten); a one-line error where there is
    no image file on the srun line to stage."""
    given, kind = launch.image, launch.runtime.kind
    if not given or not is_file_ref(given) or not launch.runtime.image_files:
        what = f"{given!r} is a registry reference, which" if given else "there is no image: "
        raise UserError(
            f"--stage copies an image file to the nodes; {what} runtime {kind} fetches "
            "itself: leave --stage out"
        )
    # the first word that names the image is the runtime's: the script's own arguments come
    # after the program, and a word there that happens to name the image stays as given
    at, named = next(
        (
            (i, n)
            for i, w in enumerate(step)
            for n in (image, launch.runtime.image_ref(image or ""))
            if n and _names(w, n)
        ),
        (None, None),
    )
    if named is None or at is None:
        raise UserError(
            f"--stage: runtime {kind} does not run {given} from the srun line (Charliecloud runs "
            "a SIF from its unpacked copy, the Container Engine from its EDF), so no copy would "
            "be used: leave --stage out (Charliecloud: a SquashFS image, .sqfs, runs where it "
            "lies and can be staged; or put images.cache_dir on node-local storage)"
        )
    return named, at

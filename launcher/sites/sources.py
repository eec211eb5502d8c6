"""The sources of a site profile's facts as `sites show SITE --sources` prints them: what each
says, where it comes from, when it was checked, whether it is confirmed, the keys it backs, and
how to confirm an unconfirmed one. A check that rests on an unconfirmed fact only warns, in one
line that points here (launcher/checks/registry.py's refuse)."""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hvd_container.launcher.sites.model import Site

# How each profile fact a check may rest on is confirmed (fnmatch patterns of dotted keys; the
# first that fits is said)
HOW_TO_CONFIRM = {
    "scheduler.partitions.*.available_until": "`showque` or `sinfo -p PARTITION` on the site's login node says whether the partition runs jobs",
    "scheduler.partitions.*.cpus_per_gpu": "`scontrol show partition PARTITION` on the site's login node (MaxCPUsPerNode, or the site's job_submit rule in its guide)",
    "scheduler.gpu_jobs_only": "the site's guide, or `sbatch -p PARTITION --wrap true` without a GPU on its login node",
    "gpu_driver": "`hvd-container sites probe --nodes` on the site's login node reads nvidia-smi on a node",
    "runtime.injects_glibc": "`hvd-container sites probe --nodes` on the site's login node reads `ldd --version` on a node",
    "scheduler.partitions": "`hvd-container sites probe` on the site's login node reads the partitions",
    "scheduler.qos_max_time": "`sacctmgr show qos format=name,maxwall` on the site's login node",
    "cluster_names": "`scontrol show config | grep ClusterName` on the site's login node",
    "scheduler.account_required": "`sbatch --wrap true` without --account on the site's login node says whether it takes a job without one",
    "scheduler.comment.reserved": "the site's user guide or its support says whether jobs may set --comment",
}

UNKNOWN_HOW = "check it on the site and mark the source confirmed in the profile"


def how_to_confirm(key: str) -> str:
    """How the fact at `key` (dotted) is confirmed on the site."""
    return next(
        (
            how
            for pattern, how in HOW_TO_CONFIRM.items()
            if key == pattern or key.startswith(pattern + ".") or fnmatch.fnmatchcase(key, pattern)
        ),
        UNKNOWN_HOW,
    )


def source_rows(site: Site) -> list[dict[str, object]]:
    """Each source of the profile: what it says, where, when, confirmed or not, the keys it
    backs, and for an unconfirmed one how to confirm each of them."""
    rows: list[dict[str, object]] = []
    for source in site.sources:
        confirm = {} if source.confirmed else {key: how_to_confirm(key) for key in source.keys}
        rows.append(
            {
                "about": source.about,
                "where": source.where,
                "checked": source.checked,
                "confirmed": source.confirmed,
                "keys": list(source.keys),
                "confirm": confirm,
            }
        )
    return rows


def source_lines(site: Site) -> list[str]:
    """source_rows as text, a source a paragraph."""
    lines: list[str] = []
    for row in source_rows(site):
        state = "confirmed" if row["confirmed"] else "UNCONFIRMED"
        lines.append(f"{state}, checked {row['checked']}: {row['about']}")
        lines.append(f"  from: {row['where']}")
        keys = row["keys"]
        assert isinstance(keys, list)
        if keys:
            lines.append(f"  backs: {', '.join(keys)}")
        confirm = row["confirm"]
        assert isinstance(confirm, dict)
        for key, how in confirm.items():
            lines.append(f"  to confirm {key}: {how}")
    return lines

# hvd-container's stack watcher (`run --hang-after`), written as `sitecustomize.py` into the
# working directory's .hvd-container/stacks/, which the launch puts first on the ranks'
# PYTHONPATH (HVD_CONTAINER_STACKS names that folder). Every Python process of the job then
# starts a thread that looks once a second at the folder's `ask-<job id>` (and `ask`); when `run` sees
# no output for the given time it touches that file, and each process writes its threads'
# Python stacks to its stderr with faulthandler (Python's own, which also reads a thread
# stuck in C). A file, not a signal: a signal would also reach the shells and runtimes of the
# step, whose default for SIGUSR1 is to die. The image's own sitecustomize, which this file
# hides, is loaded after it. No annotations: an image's Python may be older than this tool's.
import os
import sys


def _who():
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        value = os.environ.get(name, "")
        if value.isdigit():
            return f"rank {value}"
    task = os.environ.get("SLURM_PROCID", "")
    return f"task {task}" if task.isdigit() else "process"


def _watch(paths):
    import faulthandler
    import socket
    import time

    def changed():
        found = []
        for path in paths:
            try:
                found.append(os.stat(path).st_mtime_ns)
            except OSError:
                found.append(None)
        return found

    seen = changed()
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    while True:
        time.sleep(1)
        now = changed()
        if now == seen:
            continue
        seen = now
        err = sys.__stderr__
        if err is None:
            continue
        try:
            err.flush()
            err.write(
                f"hvd-container stacks: {_who()}, pid {os.getpid()} on "
                f"{socket.gethostname()} ({program})\n"
            )
            err.flush()
            faulthandler.dump_traceback(file=err, all_threads=True)
            err.flush()
        except (OSError, ValueError):
            pass


def _start():
    folder = os.environ.get("HVD_CONTAINER_STACKS", "")
    if not folder:
        return
    import threading

    job = os.environ.get("SLURM_JOB_ID", "")
    # the job's own file, and the one `run` touches when it does not know the job (salloc)
    paths = [os.path.join(folder, "ask")]
    if job.isdigit():
        paths.insert(0, os.path.join(folder, "ask-" + job))
    threading.Thread(target=_watch, args=(paths,), name="hvd-container-stacks", daemon=True).start()


def _chain():
    """The image's own sitecustomize, found on the path without this file's folder."""
    from importlib import machinery, util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # site.py's own words for a broken sitecustomize
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{exc!r}", file=sys.stderr)


_start()
_chain()

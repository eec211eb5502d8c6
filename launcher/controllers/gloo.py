"""Horovod over Gloo under srun, without horovodrun and without MPI.

Every task runs a small POSIX sh wrapper (inside the container, before the program): each
node's first task publishes the node's name under its SLURM_NODEID, so that the server learns
the nodes in the step's order without expanding a Slurm hostlist (whose grammar, `n[1-2]-ib`,
`a[01-02,05]b`, no hand-written parser in the image gets right); task 0 starts Horovod's own
`RendezvousServer` in the background with the image's python and publishes "ADDR PORT" in a
file in the shared working directory; every task then exports the HOROVOD_* variables
horovodrun would set (rank, sizes, rendezvous address, interface) from Slurm's per-task
variables and runs the program, whatever it is (a Python script, `python -m pytest`, a shell
script). Should the server die before it publishes its address, task 0 writes "failed CODE"
in that file instead, so the other tasks stop at once rather than after the 120 s wait. srun
starts no MPI (`--mpi=none`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from hvd_container.launcher.checks import Launch, Verdict, check, fail, skip
from hvd_container.launcher.controllers._horovod import HorovodController
from hvd_container.launcher.runtimes import working_directory

from hvd_container.core.files import untrusted_because

if TYPE_CHECKING:
    from hvd_container.launcher.request import LaunchRequest
    from hvd_container.launcher.sites import Site

    from hvd_container.facts import ImageFacts

# Runs in the image's python on task 0's node: start the server, publish its address.
SERVER_CODE = r"""
import os, signal, socket, sys, time
import psutil
from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
from horovod.runner.http.http_server import RendezvousServer

def node_names(folder, count):
    # each node's first task writes its name in NODEID (SLURM_NODEID: the nodelist's order)
    deadline = time.monotonic() + 120
    while True:
        try:
            names = [open(os.path.join(folder, str(i))).read().strip() for i in range(count)]
            if all(names):
                return names
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            sys.exit(f"hvd-container gloo: not every node published its name in {folder} within 120 s")
        time.sleep(0.1)

def per_node(spec, count):
    out = []
    for part in spec.split(","):
        n, _, rep = part.partition("(x")
        out += [int(n)] * int(rep.rstrip(")") or 1)
    return out[:count]

iface = os.environ["HVD_GLOO_IFACE"]
addrs = [a.address for a in psutil.net_if_addrs().get(iface, []) if a.family == socket.AF_INET]
if not addrs:
    sys.exit(f"hvd-container gloo: no IPv4 address on interface {iface!r}")
nodes = node_names(os.environ["HVD_GLOO_FILE"] + ".nodes", int(os.environ["SLURM_STEP_NUM_NODES"]))
slots = per_node(os.environ["SLURM_STEP_TASKS_PER_NODE"], len(nodes))
np_ = int(os.environ["SLURM_STEP_NUM_TASKS"])
server = RendezvousServer(verbose=0)
port = server.start()
server.init(get_host_assignments(parse_hosts(",".join(f"{h}:{s}" for h, s in zip(nodes, slots))), np_, np_))
target = os.environ["HVD_GLOO_FILE"]
with open(target + ".tmp", "w") as fh:
    fh.write(f"{addrs[0]} {port}\n")
os.replace(target + ".tmp", target)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    time.sleep(3600)
"""

# Runs in the image's python on every task when HOROVOD_GLOO_IFACE is unset: the interface
# that holds the node's own address (what its Slurm name resolves to), else the first NIC
# that is up and not a local container engine's bridge. /sys/class/net would not do: nodes
# in network namespaces may see the host's sysfs.
IFACE_CODE = r"""
import os, socket, psutil
up = {n for n, s in psutil.net_if_stats().items() if s.isup}
v4 = {}
for nic, addrs in psutil.net_if_addrs().items():
    ips = {a.address for a in addrs if a.family == socket.AF_INET and not a.address.startswith("127.")}
    if ips and nic in up:
        v4[nic] = ips
try:
    mine = set(socket.gethostbyname_ex(os.environ.get("SLURMD_NODENAME") or socket.gethostname())[2])
except OSError:
    mine = set()
named = [n for n in sorted(v4) if v4[n] & mine]
other = [n for n in sorted(v4) if not n.startswith(("docker", "virbr", "br-", "veth", "cni", "podman"))]
print((named or other or sorted(v4) or [""])[0])
"""

# $1 = the server code, $2 = the interface code, $3 = the image's python (it runs Horovod's
# rendezvous server); the rest = the program and its arguments, any program.
WRAPPER = r"""
server_code=$1
iface_code=$2
py=$3
shift 3
dir=${HVD_GLOO_DIR:-$PWD/.hvd-container}
file=$dir/gloo-${SLURM_JOB_ID}.${SLURM_STEP_ID}
iface=${HOROVOD_GLOO_IFACE:-}
if [ -z "$iface" ]; then
    iface=$("$py" -c "$iface_code")
fi
if [ -z "$iface" ]; then
    echo "hvd-container gloo: no network interface with an IPv4 address; set HOROVOD_GLOO_IFACE" >&2
    exit 1
fi
host=${SLURMD_NODENAME:-$(hostname)}
# the folder is the user's own, 0700, never a link: the address is read back from it
(umask 077; mkdir -p "$dir")
if [ -L "$dir" ] || [ ! -O "$dir" ]; then
    echo "hvd-container gloo: $dir is a link or another user's folder; remove it" >&2
    exit 1
fi
chmod 700 "$dir"
if [ "$SLURM_LOCALID" = 0 ]; then
    # the node's name for the rendezvous server, by its index in the step: no hostlist to parse
    (umask 077; mkdir -p "$file.nodes")
    printf '%s\n' "$host" >"$file.nodes/.$SLURM_NODEID.$$" && mv -f "$file.nodes/.$SLURM_NODEID.$$" "$file.nodes/$SLURM_NODEID"
fi
server=
if [ "$SLURM_PROCID" = 0 ]; then
    rm -f "$file"
    HVD_GLOO_IFACE=$iface HVD_GLOO_FILE=$file "$py" -c "$server_code" &
    server=$!
fi
i=0
while [ ! -s "$file" ]; do
    if [ -n "$server" ] && ! kill -0 "$server" 2>/dev/null; then
        # the server died before publishing: say so in the file, or every task waits 120 s
        wait "$server"
        echo "failed $?" >"$file.$$" && mv -f "$file.$$" "$file"
        break
    fi
    i=$((i + 1))
    if [ "$i" -gt 1200 ]; then
        echo "hvd-container gloo: no rendezvous address in $file after 120 s" >&2
        exit 1
    fi
    sleep 0.1
done
read -r addr port <"$file"
if [ "$addr" = failed ]; then
    echo "hvd-container gloo: Horovod's rendezvous server on task 0 exited with code $port before it started; see task 0's error" >&2
    exit 1
fi
export HOROVOD_GLOO_RENDEZVOUS_ADDR="$addr" HOROVOD_GLOO_RENDEZVOUS_PORT="$port"
export HOROVOD_CONTROLLER=gloo HOROVOD_CPU_OPERATIONS=gloo HOROVOD_GLOO_IFACE="$iface"
export HOROVOD_RANK="$SLURM_PROCID" HOROVOD_SIZE="$SLURM_STEP_NUM_TASKS"
export HOROVOD_LOCAL_RANK="$SLURM_LOCALID" HOROVOD_LOCAL_SIZE="${SLURM_STEP_TASKS_PER_NODE%%(*}"
export HOROVOD_CROSS_RANK="$SLURM_NODEID" HOROVOD_CROSS_SIZE="$SLURM_STEP_NUM_NODES"
export HOROVOD_HOSTNAME="$host"
if [ -z "$server" ]; then
    exec "$@"
fi
"$@"
rc=$?
kill "$server" 2>/dev/null
rm -rf "$file" "$file.nodes"
exit $rc
"""


class Gloo(HorovodController):
    name = "gloo"
    about = "Horovod over Gloo: a rendezvous the launch starts in task 0, no MPI"

    def mpi_plugin(
        self, site: Site, request: LaunchRequest, facts: ImageFacts | None, single_task: bool
    ) -> tuple[str | None, str | None]:
        return request.mpi or "none", None

    def program(self, python: str, script: str, args: list[str]) -> list[str]:
        inner = super().program(python, script, args)
        return ["/bin/sh", "-c", WRAPPER, "hvd-gloo", SERVER_CODE, IFACE_CODE, python, *inner]

    def missing_in_image(self, launch: Launch) -> Verdict | None:
        facts = launch.facts
        if facts is None or self.built(facts) is not False:
            return None
        has = ", ".join(facts.controllers or ()) or "none"
        return fail(
            f"{facts.source} builds Horovod without the Gloo controller (it has {has}): pass --controller mpi, or add gloo to horovod.controllers and rebuild"
        )


def layout_problem(
    ntasks: int | None, nodes: int | None, ntasks_per_node: int | None
) -> str | None:
    """Gloo ranks take their local size from Slurm: the layout must be uniform."""
    if ntasks is not None and ntasks_per_node is None and (nodes or 1) > 1:
        return "--controller gloo needs the same number of ranks on every node: use -N and --ntasks-per-node instead of -n"
    if ntasks is not None and ntasks_per_node is not None and ntasks % ntasks_per_node:
        # Slurm would fill nodes up to --ntasks-per-node and leave the last one short
        return f"--controller gloo needs the same number of ranks on every node: -n {ntasks} is not a multiple of --ntasks-per-node {ntasks_per_node}"
    return None


@check("gloo-layout", "the same number of ranks on every node (Gloo reads it from Slurm)")
def even_layout(launch: Launch) -> Verdict | None:
    request = launch.request
    problem = layout_problem(request.ntasks, request.nodes, request.ntasks_per_node)
    return fail(problem) if problem else None


@check("gloo-folder", "the rendezvous folder's path can be written by you (and root) only")
def private_rendezvous(launch: Launch) -> Verdict | None:
    """Task 0 publishes the rendezvous address in the working directory's .hvd-container and
    every task reads it back: another user who can write on that path could swap the folder
    and send every rank to an address of theirs."""
    if os.environ.get("HVD_GLOO_DIR"):
        return None  # the user named the folder
    cwd = working_directory()
    if not os.path.isdir(cwd):
        return skip(f"{cwd} cannot be read here, so who can write on its path is not known")
    why = untrusted_because(cwd)
    if why is None:
        return None
    return fail(
        f"{cwd}: {why}: the Gloo rendezvous address would be read back from there, where "
        "another user could swap it; launch from a folder only you (or root) can write, or "
        "set HVD_GLOO_DIR to such a folder"
    )

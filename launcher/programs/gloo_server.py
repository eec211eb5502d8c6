# Horovod over Gloo (launcher/controllers/gloo.py): runs in the image's Python on task 0's node,
# started by gloo_wrapper.sh: Horovod's rendezvous server, its address published in a file.
import os
import signal
import socket
import sys
import time

import psutil
from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
from horovod.runner.http.http_server import RendezvousServer


def node_names(folder, count):
    # each node's first task writes its name in NODEID (SLURM_NODEID: the nodelist's order)
    deadline = time.monotonic() + 120
    while True:
        names = []
        for i in range(count):
            try:
                with open(os.path.join(folder, str(i))) as fh:
                    names.append(fh.read().strip())
            except FileNotFoundError:
                break
        if len(names) == count and all(names):
            return names
        if time.monotonic() > deadline:
            sys.exit(
                f"hvd-container gloo: not every node published its name in {folder} within 120 s"
            )
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
server.init(
    get_host_assignments(parse_hosts(",".join(f"{h}:{s}" for h, s in zip(nodes, slots))), np_, np_)
)
target = os.environ["HVD_GLOO_FILE"]
with open(target + ".tmp", "w") as fh:
    fh.write(f"{addrs[0]} {port}\n")
os.replace(target + ".tmp", target)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    time.sleep(3600)

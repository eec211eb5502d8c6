# Horovod over Gloo: runs in the image's Python on every task when HOROVOD_GLOO_IFACE is unset
# and prints the interface that holds the node's own address (what its Slurm name resolves
# to), else the first NIC that is up and not a local container engine's bridge. /sys/class/net
# would not do: nodes in network namespaces may see the host's sysfs.
import os
import socket

import psutil

up = {n for n, s in psutil.net_if_stats().items() if s.isup}
v4 = {}
for nic, addrs in psutil.net_if_addrs().items():
    ips = {
        a.address for a in addrs if a.family == socket.AF_INET and not a.address.startswith("127.")
    }
    if ips and nic in up:
        v4[nic] = ips
try:
    mine = set(
        socket.gethostbyname_ex(os.environ.get("SLURMD_NODENAME") or socket.gethostname())[2]
    )
except OSError:
    mine = set()
named = [n for n in sorted(v4) if v4[n] & mine]
other = [
    n for n in sorted(v4) if not n.startswith(("docker", "virbr", "br-", "veth", "cni", "podman"))
]
print((named or other or sorted(v4) or [""])[0])

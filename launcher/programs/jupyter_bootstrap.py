# Run as `python -c TEXT INTERFACE JUPYTER-ARGS...` in the container on the node. The runtime
# files (they hold the token) go to a new directory only the user can read: under
# $XDG_RUNTIME_DIR where the node has one, else the temporary directory (mkdtemp: mode 0700, a
# name nobody can guess or plant). Jupyter listens on INTERFACE's address, or everywhere ("").
import fcntl
import os
import socket
import struct
import sys
import tempfile

interface, args = sys.argv[1], sys.argv[2:]
ip = "0.0.0.0"
if interface:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", interface[:15].encode()))
        ip = socket.inet_ntoa(packed[20:24])
    except OSError as exc:
        sys.exit(f"hvd-container: interface {interface} has no IPv4 address on this node: {exc}")
base = os.environ.get("XDG_RUNTIME_DIR")
if not (base and os.path.isdir(base) and os.access(base, os.W_OK)):
    base = None
os.environ["JUPYTER_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="hvd-container-jupyter-", dir=base)
os.execv(sys.executable, [sys.executable, "-m", "jupyterlab", "--ip=" + ip, *args])

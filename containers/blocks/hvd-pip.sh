#!/bin/sh
# hvd-pip: `python3 -m pip "$@"` with a pip configuration fetched for this one command.
#
# When HVD_PIP_CONFIG_URL is set (a Docker build arg), pip.conf and ca.pem are downloaded from
# that URL into a temporary directory, used through PIP_CONFIG_FILE/PIP_CERT and removed before
# this script returns, so no index credentials or CA files end up in an image layer.
set -eu

if [ -z "${HVD_PIP_CONFIG_URL:-}" ]; then
    exec python3 -m pip "$@"
fi

hvd_pip_dir=$(mktemp -d)
trap 'rm -rf "$hvd_pip_dir"' EXIT
trap 'exit 130' INT TERM HUP

# python3's urllib rather than curl/wget: minimal base images have python but no downloader.
python3 - "$HVD_PIP_CONFIG_URL" "$hvd_pip_dir" <<'PY'
import sys
import urllib.error
import urllib.request

base, target = sys.argv[1].rstrip("/"), sys.argv[2]
for name, required in (("pip.conf", True), ("ca.pem", False)):
    try:
        with urllib.request.urlopen(f"{base}/{name}", timeout=60) as response:
            data = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404 and not required:
            continue
        sys.exit(f"hvd-pip: cannot fetch {base}/{name}: HTTP {exc.code}")
    except OSError as exc:
        sys.exit(f"hvd-pip: cannot fetch {base}/{name}: {exc}")
    with open(f"{target}/{name}", "wb") as out:
        out.write(data)
PY

PIP_CONFIG_FILE="$hvd_pip_dir/pip.conf"
export PIP_CONFIG_FILE
if [ -f "$hvd_pip_dir/ca.pem" ]; then
    PIP_CERT="$hvd_pip_dir/ca.pem"
    export PIP_CERT
fi
# Not exec: the EXIT trap must run to remove the directory.
python3 -m pip "$@"

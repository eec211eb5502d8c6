#!/bin/sh
# Charliecloud's ch-run plus squashfuse, for running images on the test cluster's nodes.
#
#   testbed/charliecloud.sh up       install charliecloud-runtime and squashfuse when absent
#   testbed/charliecloud.sh status   print versions; exit 0 only when both are usable
#   testbed/charliecloud.sh down     nothing to stop (no daemon); kept for a uniform interface
set -eu

log() { echo "charliecloud.sh: $*" >&2; }

cmd_up() {
    missing=""
    command -v ch-run >/dev/null 2>&1 || missing="$missing charliecloud-runtime"
    command -v squashfuse >/dev/null 2>&1 || missing="$missing squashfuse"
    command -v fusermount3 >/dev/null 2>&1 || command -v fusermount >/dev/null 2>&1 ||
        missing="$missing fuse3"
    if [ -n "$missing" ]; then
        [ "$(id -u)" = 0 ] || { log "error: must run as root to install:$missing"; exit 1; }
        log "installing:$missing"
        apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
            --no-install-recommends $missing >/dev/null
    fi
    cmd_status
}

cmd_status() {
    command -v ch-run >/dev/null 2>&1 || { echo "ch-run: missing"; return 3; }
    command -v squashfuse >/dev/null 2>&1 || { echo "squashfuse: missing"; return 3; }
    echo "ch-run: $(USER="${USER:-$(id -un)}" ch-run --version 2>&1)"
    echo "squashfuse: $(command -v squashfuse)"
}

case "${1:-up}" in
up) cmd_up ;;
status) cmd_status ;;
down) : ;;
*)
    echo "usage: $0 up|status|down" >&2
    exit 2
    ;;
esac

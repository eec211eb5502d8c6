#!/bin/sh
# Charliecloud's ch-run plus squashfuse, for running images on the test cluster's nodes.
#
#   testbed/charliecloud.sh up       install charliecloud-runtime and squashfuse when absent
#   testbed/charliecloud.sh status   print versions; exit 0 only when both are usable
#   testbed/charliecloud.sh down     nothing to stop (no daemon); kept for a uniform interface
set -eu

. "$(dirname "$0")/_lib.sh"

cmd_up() {
    tb_apt_install charliecloud-runtime squashfuse fuse3
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

#!/bin/sh
# SIF tools for the conversion tests: siftool (Sylabs' reference SIF tool), squashfs-tools
# (mksquashfs/unsquashfs), squashfs-tools-ng (tar2sqfs) and squashfuse.
#   testbed/sif-tools.sh up      install what is missing
#   testbed/sif-tools.sh status  list the tools; exit 1 if one is missing
#   testbed/sif-tools.sh down    nothing runs in the background: no-op
set -eu
. "$(dirname "$0")/_lib.sh"

TOOLS="siftool mksquashfs unsquashfs tar2sqfs squashfuse"

missing() {
    for tool in $TOOLS; do
        command -v "$tool" >/dev/null 2>&1 || echo "$tool"
    done
}

case "${1:-up}" in
up)
    [ -z "$(missing)" ] || tb_apt_install siftool squashfs-tools squashfs-tools-ng squashfuse
    still=$(missing)
    [ -z "$still" ] || tb_die "still missing after install: $still"
    tb_log "ready"
    ;;
status)
    for tool in $TOOLS; do
        printf '%s: %s\n' "$tool" "$(command -v "$tool" || echo missing)"
    done
    [ -z "$(missing)" ]
    ;;
down)
    tb_log "nothing to stop"
    ;;
*)
    echo "usage: $0 up|status|down" >&2
    exit 2
    ;;
esac

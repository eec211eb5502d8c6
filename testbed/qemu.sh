#!/bin/sh
# arm64 programs on this amd64 machine: Debian's qemu-user-static, registered with the kernel's
# binfmt_misc, for arm64 images (Grace Hopper's architecture) built, verified and run here.
#
#   testbed/qemu.sh up       install qemu-user-static, register qemu-aarch64 (idempotent)
#   testbed/qemu.sh status   exit 0 only when an arm64 program runs (under emulation)
#   testbed/qemu.sh down     unregister qemu-aarch64
#
# Registered from the package's own entry (/usr/lib/binfmt.d/qemu-aarch64.conf), whose flags
# hold F (fix-binary): the kernel opens the interpreter once, at registration, so an arm64
# program runs in a container, a chroot or a mount namespace that has no qemu of its own
# (a build step, `docker run --platform linux/arm64`, ch-run on a node, debootstrap's second
# stage). No systemd here to read binfmt.d at boot: this script writes the entry itself.
set -eu

. "$(dirname "$0")/_lib.sh"
log() { tb_log "$@"; }
die() { tb_die "$@"; }

BINFMT=/proc/sys/fs/binfmt_misc
ENTRY=$BINFMT/qemu-aarch64
CONF=/usr/lib/binfmt.d/qemu-aarch64.conf

[ "$(id -u)" = 0 ] || die "must run as root (it installs a package and registers with the kernel)"

cmd_up() {
    tb_apt_install qemu-user-static
    [ -f "$CONF" ] || die "$CONF is missing: qemu-user-static did not install its binfmt entry"
    if [ ! -e "$BINFMT/register" ]; then
        mount -t binfmt_misc binfmt_misc "$BINFMT" ||
            die "cannot mount binfmt_misc on $BINFMT (a container needs it from its host)"
    fi
    if [ -e "$ENTRY" ] && ! grep -q '^flags: .*F' "$ENTRY"; then
        echo -1 >"$ENTRY" # registered by someone else without F: containers could not use it
    fi
    if [ ! -e "$ENTRY" ]; then
        cat "$CONF" >"$BINFMT/register" || die "registering qemu-aarch64 with binfmt_misc failed"
        log "registered qemu-aarch64 (fix-binary)"
    fi
    cmd_status
}

cmd_status() {
    [ -e "$ENTRY" ] || { echo "qemu-aarch64: not registered"; return 3; }
    grep -q '^enabled' "$ENTRY" || { echo "qemu-aarch64: disabled"; return 3; }
    grep -q '^flags: .*F' "$ENTRY" || { echo "qemu-aarch64: registered without fix-binary"; return 3; }
    echo "qemu-aarch64: $(sed -n 's/^interpreter //p' "$ENTRY") ($(qemu-aarch64-static --version | head -1))"
}

cmd_down() {
    [ ! -e "$ENTRY" ] || echo -1 >"$ENTRY"
}

case "${1:-up}" in
up) cmd_up ;;
status) cmd_status ;;
down) cmd_down ;;
*)
    echo "usage: $0 up|status|down" >&2
    exit 2
    ;;
esac

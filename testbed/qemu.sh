#!/bin/sh
# arm64 programs on this amd64 machine: Debian's qemu-user-static, registered with the kernel's
# binfmt_misc, for arm64 images (Grace Hopper's architecture) built, verified and run here.
# QEMU 10 at least: on Debian bookworm from bookworm-backports (10.0), because bookworm's own 7.2
# crashes in `import torch` of PyPI's aarch64 torch 2.14.1 (`uncaught target signal 11` after
# oneDNN's CPU probe), the Grace Hopper image's; 10.0 runs it.
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
BACKPORTS=/etc/apt/sources.list.d/hvd-testbed-bookworm-backports.sources
# the qemu the entry was registered with: with fix-binary the kernel keeps the file it opened
# then, so after an upgrade the entry must be registered again to run the new one
REGISTERED=$HVD_TESTBED_DIR/qemu-registered

[ "$(id -u)" = 0 ] || die "must run as root (it installs a package and registers with the kernel)"

qemu_major() {
    qemu-aarch64-static --version 2>/dev/null | sed -n '1s/.* version \([0-9]*\).*/\1/p'
}

install_qemu() {
    [ "$(qemu_major)" -ge 10 ] 2>/dev/null && return 0
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    if [ "$codename" != bookworm ]; then
        tb_apt_install qemu-user-static # trixie and later have 10 or newer
        return 0
    fi
    if [ ! -f "$BACKPORTS" ]; then
        printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" \
            "Suites: bookworm-backports" "Components: main" \
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" >"$BACKPORTS"
    fi
    log "qemu-user-static from bookworm-backports (bookworm's 7.2 crashes in torch)"
    tb_apt_update force # the backports source may be new to apt's lists
    tb_apt_get_install -t bookworm-backports qemu-user-static
    [ "$(qemu_major)" -ge 10 ] 2>/dev/null ||
        die "qemu-aarch64-static is $(qemu_major) after the install, 10 or newer is needed"
}

cmd_up() {
    install_qemu
    [ -f "$CONF" ] || die "$CONF is missing: qemu-user-static did not install its binfmt entry"
    if [ ! -e "$BINFMT/register" ]; then
        mount -t binfmt_misc binfmt_misc "$BINFMT" ||
            die "cannot mount binfmt_misc on $BINFMT (a container needs it from its host)"
    fi
    if [ -e "$ENTRY" ] && ! grep -q '^flags: .*F' "$ENTRY"; then
        echo -1 >"$ENTRY" # registered by someone else without F: containers could not use it
    fi
    version=$(qemu-aarch64-static --version | head -n 1)
    if [ -e "$ENTRY" ] && [ "$(cat "$REGISTERED" 2>/dev/null)" != "$version" ]; then
        echo -1 >"$ENTRY" # registered with another qemu (an older one, or not by this script)
    fi
    if [ ! -e "$ENTRY" ]; then
        cat "$CONF" >"$BINFMT/register" || die "registering qemu-aarch64 with binfmt_misc failed"
        mkdir -p "$HVD_TESTBED_DIR"
        echo "$version" >"$REGISTERED"
        log "registered qemu-aarch64 (fix-binary): $version"
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

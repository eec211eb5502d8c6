#!/bin/sh
# Rootless podman on this machine: an unprivileged user who builds images as a login node's
# user would (no root, no Docker socket), for `--engine podman`.
#
#   testbed/podman-rootless.sh up              the user, its subordinate ids, its storage
#   testbed/podman-rootless.sh load-base SUITE copy hvd-base/debian:SUITE from the Docker engine
#                                              into the user's podman store
#   testbed/podman-rootless.sh status          exit 0 only when the user's podman works
#   testbed/podman-rootless.sh down            nothing to stop (no daemon)
#
# What it sets up, and why:
#   - podman and the system's containers.conf come from testbed/podman-hpc.sh (runc and
#     cgroupfs: this machine's hybrid cgroups, which crun refuses).
#   - the user $HVD_ROOTLESS_USER (default hvdbuild) with 65536 subordinate uids and gids
#     (/etc/subuid, /etc/subgid): rootless podman maps the image's users onto them.
#   - its storage.conf: the overlay driver (the kernel's native rootless overlay); podman's
#     default on a fresh user is vfs, which copies every layer whole.
#   - no slirp4netns: hvd-container's podman engine gives build steps and checks the host's
#     network (this machine's /dev/net/tun is root's alone).
# debootstrap needs root, so the Debian base is made in the Docker engine (base-image.sh) and
# copied into the user's store (load-base), as a user would `podman load` a base given to them.
set -eu

. "$(dirname "$0")/_lib.sh"
log() { tb_log "$@"; }
die() { tb_die "$@"; }

USER_NAME=${HVD_ROOTLESS_USER:-hvdbuild}
FIRST_SUBID=${HVD_ROOTLESS_SUBID:-100000}

[ "$(id -u)" = 0 ] || die "must run as root (it adds a user and writes /etc/subuid)"

as_user() { # run a shell line as the user, in its home, without root's environment
    su - "$USER_NAME" -c "$1"
}

add_subids() { # $1 = /etc/subuid or /etc/subgid
    touch "$1"
    grep -q "^$USER_NAME:" "$1" || echo "$USER_NAME:$FIRST_SUBID:65536" >>"$1"
}

cmd_up() {
    sh "$(dirname "$0")/podman-hpc.sh" up >/dev/null
    id "$USER_NAME" >/dev/null 2>&1 || useradd -m -s /bin/sh "$USER_NAME"
    add_subids /etc/subuid
    add_subids /etc/subgid
    as_user 'mkdir -p ~/.config/containers && printf "[storage]\ndriver = \"overlay\"\n" > ~/.config/containers/storage.conf.tmp && mv -f ~/.config/containers/storage.conf.tmp ~/.config/containers/storage.conf'
    # podman reads the subordinate ids once, when its store is first made
    as_user 'podman system migrate' >/dev/null 2>&1 || true
    cmd_status
}

cmd_load_base() { # $1 = suite
    image="hvd-base/debian:${1:-bookworm}"
    docker image inspect "$image" >/dev/null 2>&1 ||
        die "$image is not in the Docker engine (testbed/base-image.sh ${1:-bookworm})"
    want=$(docker image inspect --format '{{.Id}}' "$image")
    have=$(as_user "podman image inspect --format '{{.Id}}' $image" 2>/dev/null || true)
    if [ "sha256:$have" = "$want" ] || [ "$have" = "$want" ]; then
        log "$image is in $USER_NAME's store"
        return 0
    fi
    docker save "$image" | as_user 'podman load -q' >/dev/null || die "podman load of $image failed"
    log "copied $image into $USER_NAME's podman store"
}

cmd_status() {
    id "$USER_NAME" >/dev/null 2>&1 || { echo "$USER_NAME: no such user"; return 3; }
    info=$(as_user "podman info --format '{{.Host.Security.Rootless}} {{.Store.GraphDriverName}}'" 2>/dev/null) ||
        { echo "podman does not work for $USER_NAME"; return 3; }
    [ "$info" = "true overlay" ] || { echo "$USER_NAME's podman: rootless/driver $info"; return 3; }
    echo "$USER_NAME: rootless podman $(podman --version | sed 's/.* //'), overlay storage"
}

case "${1:-up}" in
up) cmd_up ;;
load-base) cmd_load_base "${2:-bookworm}" ;;
status) cmd_status ;;
down) : ;;
*)
    echo "usage: $0 up|load-base SUITE|status|down" >&2
    exit 2
    ;;
esac

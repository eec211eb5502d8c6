#!/bin/sh
# Offline base image: a minimal Debian root filesystem from a Debian mirror (debootstrap
# --variant=minbase), imported into the local Docker engine. Used when no registry with
# `debian:<suite>` is reachable; recipes say `base: debootstrap:<suite>`.
#   testbed/base-image.sh [SUITE]        default bookworm -> image hvd-base/debian:SUITE
#   testbed/base-image.sh --force [SUITE]   rebuild even if the image exists
#   testbed/base-image.sh --arch arm64 [SUITE]  an arm64 root -> hvd-base/debian:SUITE-arm64
# Environment: HVD_DEBIAN_MIRROR (default http://deb.debian.org/debian).
# Needs a running engine (testbed/docker.sh up). Skipped when the image already exists.
# Another architecture's root is bootstrapped whole: debootstrap's second stage runs its
# programs under qemu (testbed/qemu.sh up), and the image is imported with its platform, under
# a name of its own (one name holds one image, and a build's FROM --platform checks it).
set -eu
. "$(dirname "$0")/_lib.sh"

FORCE=0
ARCH=amd64
while [ $# -gt 0 ]; do
    case "$1" in
    --force) FORCE=1 ;;
    --arch)
        [ $# -ge 2 ] || tb_die "--arch needs a value (amd64, arm64)"
        ARCH=$2
        shift
        ;;
    -*) tb_die "unknown option $1 (allowed: --force, --arch amd64|arm64)" ;;
    *) break ;;
    esac
    shift
done
case "$ARCH" in
amd64 | arm64) ;;
*) tb_die "--arch $ARCH: not built here (allowed: amd64, arm64)" ;;
esac
SUITE="${1:-bookworm}"
IMAGE="hvd-base/debian:$SUITE"
[ "$ARCH" = amd64 ] || IMAGE="$IMAGE-$ARCH"
MIRROR="${HVD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER=docker

mkdir -p "$HVD_TESTBED_DIR"
exec 9>"$HVD_TESTBED_DIR/base-image-$SUITE-$ARCH.lock"
flock 9

"$DOCKER" version >/dev/null 2>&1 || tb_die "the Docker engine does not answer; run testbed/docker.sh up"
if [ $FORCE = 0 ] && "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
    tb_log "$IMAGE exists; skipping (use --force to rebuild)"
    exit 0
fi
command -v debootstrap >/dev/null 2>&1 || tb_apt_install debootstrap
# Debian's release keys: on other distributions (Ubuntu CI runners) debootstrap needs them.
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || tb_apt_install debian-archive-keyring
if [ "$ARCH" = arm64 ] && ! grep -qs '^enabled' /proc/sys/fs/binfmt_misc/qemu-aarch64; then
    tb_die "arm64 programs do not run here: register qemu first (testbed/qemu.sh up)"
fi

ROOT=$(mktemp -d "$HVD_TESTBED_DIR/rootfs-$SUITE.XXXXXX")
# Imported under a temporary tag first: $IMAGE appears only once the whole root filesystem is
# in, so a failed or interrupted run never leaves a truncated image that later runs skip.
PARTIAL="$IMAGE-partial-$$"
cleanup() {
    rm -rf "$ROOT" "$ROOT.log" "$ROOT.tar-ok" "$ROOT.image"
    "$DOCKER" image rm "$PARTIAL" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
tb_log "debootstrap --variant=minbase --arch=$ARCH $SUITE from $MIRROR"
debootstrap --variant=minbase --arch="$ARCH" "$SUITE" "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 \
    || { tail -n 20 "$ROOT.log" >&2; rm -f "$ROOT.log"; tb_die "debootstrap failed"; }
rm -f "$ROOT.log"
# Same apt source as the mirror used, and no cached package lists in the image.
echo "deb $MIRROR $SUITE main" >"$ROOT/etc/apt/sources.list"
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/archives/*.deb
PATH_ENV=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
MESSAGE="debootstrap --variant=minbase --arch=$ARCH $SUITE $MIRROR"

load_foreign() { # another architecture: `docker import` keeps the daemon's own, whatever
    # --platform says, so the image is loaded from an archive whose config names $ARCH
    work="$ROOT.image"
    mkdir -p "$work"
    tar -C "$ROOT" -cf "$work/layer.tar" . || return 1
    layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
    now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    printf '{"architecture":"%s","os":"linux","created":"%s","config":{"Env":["PATH=%s"],"Cmd":["bash"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"%s"}]}' \
        "$ARCH" "$now" "$PATH_ENV" "$layer" "$now" "$MESSAGE" >"$work/config.json"
    config=$(sha256sum "$work/config.json" | cut -d' ' -f1)
    mv "$work/config.json" "$work/$config.json"
    printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' \
        "$config" "$PARTIAL" >"$work/manifest.json"
    tar -C "$work" -c manifest.json "$config.json" layer.tar | "$DOCKER" load -q >/dev/null
}

tb_log "importing as $IMAGE"
if [ "$ARCH" = amd64 ]; then
    # sh has no pipefail: tar leaves a marker file only if it succeeded, checked after the import.
    { tar -C "$ROOT" -c . && : >"$ROOT.tar-ok"; } | "$DOCKER" import \
        --change "ENV PATH=$PATH_ENV" \
        --change 'CMD ["bash"]' \
        --message "$MESSAGE" - "$PARTIAL" >/dev/null \
        || tb_die "docker import failed; $IMAGE left as it was"
    [ -f "$ROOT.tar-ok" ] || tb_die "tar of the root filesystem failed; $IMAGE left as it was"
else
    load_foreign || tb_die "docker load of the $ARCH root failed; $IMAGE left as it was"
fi
"$DOCKER" tag "$PARTIAL" "$IMAGE"
tb_log "$IMAGE ready ($("$DOCKER" image inspect -f '{{.Architecture}}, {{.Size}}' "$IMAGE") bytes)"

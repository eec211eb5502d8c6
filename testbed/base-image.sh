#!/bin/sh
# Offline base image: a minimal Debian root filesystem from a Debian mirror (debootstrap
# --variant=minbase), imported into the local Docker engine. Used when no registry with
# `debian:<suite>` is reachable; recipes say `base: debootstrap:<suite>`.
#   testbed/base-image.sh [SUITE]        default bookworm -> image hvd-base/debian:SUITE
#   testbed/base-image.sh --force [SUITE]   rebuild even if the image exists
# Environment: HVD_DEBIAN_MIRROR (default http://deb.debian.org/debian).
# Needs a running engine (testbed/docker.sh up). Skipped when the image already exists.
set -eu
. "$(dirname "$0")/_lib.sh"

FORCE=0
if [ "${1:-}" = "--force" ]; then FORCE=1; shift; fi
SUITE="${1:-bookworm}"
IMAGE="hvd-base/debian:$SUITE"
MIRROR="${HVD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER=docker

mkdir -p "$HVD_TESTBED_DIR"
exec 9>"$HVD_TESTBED_DIR/base-image-$SUITE.lock"
flock 9

"$DOCKER" version >/dev/null 2>&1 || tb_die "the Docker engine does not answer; run testbed/docker.sh up"
if [ $FORCE = 0 ] && "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
    tb_log "$IMAGE exists; skipping (use --force to rebuild)"
    exit 0
fi
command -v debootstrap >/dev/null 2>&1 || tb_apt_install debootstrap
# Debian's release keys: on other distributions (Ubuntu CI runners) debootstrap needs them.
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || tb_apt_install debian-archive-keyring

ROOT=$(mktemp -d "$HVD_TESTBED_DIR/rootfs-$SUITE.XXXXXX")
# Imported under a temporary tag first: $IMAGE appears only once the whole root filesystem is
# in, so a failed or interrupted run never leaves a truncated image that later runs skip.
PARTIAL="hvd-base/debian:$SUITE-partial-$$"
cleanup() {
    rm -rf "$ROOT" "$ROOT.log" "$ROOT.tar-ok"
    "$DOCKER" image rm "$PARTIAL" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
tb_log "debootstrap --variant=minbase $SUITE from $MIRROR"
debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 \
    || { tail -n 20 "$ROOT.log" >&2; rm -f "$ROOT.log"; tb_die "debootstrap failed"; }
rm -f "$ROOT.log"
# Same apt source as the mirror used, and no cached package lists in the image.
echo "deb $MIRROR $SUITE main" >"$ROOT/etc/apt/sources.list"
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/archives/*.deb
tb_log "importing as $IMAGE"
# sh has no pipefail: tar leaves a marker file only if it succeeded, checked after the import.
{ tar -C "$ROOT" -c . && : >"$ROOT.tar-ok"; } | "$DOCKER" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --message "debootstrap --variant=minbase $SUITE $MIRROR" - "$PARTIAL" >/dev/null \
    || tb_die "docker import failed; $IMAGE left as it was"
[ -f "$ROOT.tar-ok" ] || tb_die "tar of the root filesystem failed; $IMAGE left as it was"
"$DOCKER" tag "$PARTIAL" "$IMAGE"
tb_log "$IMAGE ready ($("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE") bytes)"

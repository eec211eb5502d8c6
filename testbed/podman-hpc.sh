#!/bin/sh
# podman and NERSC's podman-hpc on this machine, for the local cluster's nodes.
#
#   testbed/podman-hpc.sh up              install and configure them (idempotent)
#   testbed/podman-hpc.sh load-base SUITE copy hvd-base/debian:SUITE from the Docker engine into
#                                         podman-hpc's store (for `build --engine podman-hpc`)
#   testbed/podman-hpc.sh status          print versions; exit 0 only when `podman-hpc` is usable
#   testbed/podman-hpc.sh down            nothing to stop (no daemon); kept for a uniform interface
#
# What it sets up, and why:
#   - Debian's podman, runc, fuse-overlayfs, squashfuse and inotify-tools (podman-hpc's mount
#     wrapper needs the last three), and podman-hpc from PyPI (pinned) for $PYTHON.
#   - mksquashfs.static: podman-hpc's migrate runs a *static* mksquashfs inside the image, with
#     an option of squashfs-tools 4.6 (-xattrs-exclude); Debian bookworm ships 4.5.1, dynamic.
#     It is built here from Debian's 4.6.1 source (checked against its sha256), gzip and lz4
#     only (podman-hpc squashes with lz4).
#   - /etc/containers/containers.conf: cgroupfs and runc (this machine has hybrid cgroups, which
#     crun refuses), and container ulimits at or below this machine's hard limits (podman's
#     default raises them, which the sandbox forbids).
#   - 127.0.0.1:5000 (testbed/registry.sh) as an insecure registry, and podman-hpc's config.
set -eu

. "$(dirname "$0")/_lib.sh"
log() { tb_log "$@"; }
die() { tb_die "$@"; }

PYTHON=${PYTHON:-python3}
PODMAN_HPC_VERSION=1.2.2
SQFS_VERSION=4.6.1
SQFS_SHA256=94201754b36121a9f022a190c75f718441df15402df32c2b520ca331a107511c
SQFS_URL=http://deb.debian.org/debian/pool/main/s/squashfs-tools/squashfs-tools_${SQFS_VERSION}.orig.tar.gz
LIBDIR=/usr/local/lib/hvd-testbed
MKSQ=$LIBDIR/mksquashfs.static
MARK="# managed by hvd-container testbed/podman-hpc.sh"

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and writes /etc/containers)"

build_mksquashfs() {
    if [ -x "$MKSQ" ] && "$MKSQ" -version 2>/dev/null | grep -q "version $SQFS_VERSION"; then
        return 0
    fi
    tb_apt_install gcc make zlib1g-dev liblz4-dev curl ca-certificates
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    curl -fsSL -o "$work/src.tar.gz" "$SQFS_URL" || die "cannot download $SQFS_URL"
    echo "$SQFS_SHA256  $work/src.tar.gz" | sha256sum -c --quiet - || die "$SQFS_URL: sha256 mismatch"
    tar -xzf "$work/src.tar.gz" -C "$work"
    make -s -C "$work/squashfs-tools-$SQFS_VERSION/squashfs-tools" -j2 \
        GZIP_SUPPORT=1 LZ4_SUPPORT=1 XZ_SUPPORT=0 LZO_SUPPORT=0 ZSTD_SUPPORT=0 \
        LZMA_XZ_SUPPORT=0 XATTR_SUPPORT=1 EXTRA_LDFLAGS=-static mksquashfs >"$work/build.log" 2>&1 ||
        { tail -20 "$work/build.log" >&2; die "building mksquashfs failed"; }
    mkdir -p "$LIBDIR"
    install -m 0755 "$work/squashfs-tools-$SQFS_VERSION/squashfs-tools/mksquashfs" "$MKSQ.tmp"
    mv -f "$MKSQ.tmp" "$MKSQ"
    rm -rf "$work"
    trap - EXIT
    log "built $MKSQ (squashfs-tools $SQFS_VERSION, static)"
}

write_file() { # $1 = path; content on stdin; an existing file not written here is kept
    # (an empty one is what a full disk left of an earlier write, and is replaced)
    if [ -s "$1" ] && ! grep -qF "$MARK" "$1"; then
        die "$1 exists and was not written by this script; move it away first"
    fi
    mkdir -p "$(dirname "$1")"
    tmp=$(mktemp "$1.XXXXXX")
    if ! { echo "$MARK" && cat; } >"$tmp"; then
        rm -f "$tmp"
        die "cannot write $1 (is the disk full? df -h $(dirname "$1"))"
    fi
    chmod 0644 "$tmp"
    mv -f "$tmp" "$1"
}

configure() {
    nofile=$(ulimit -Hn)
    [ "$nofile" = unlimited ] && nofile=1048576
    write_file /etc/containers/containers.conf <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=4096:4096"]
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
EOF
    write_file /etc/containers/registries.conf.d/hvd-testbed.conf <<'EOF'
[[registry]]
location = "127.0.0.1:5000"
insecure = true
EOF
    prefix=$("$PYTHON" -c 'import sys; print(sys.prefix)')
    mkdir -p /etc/podman_hpc/modules.d
    write_file /etc/podman_hpc/podman_hpc.yaml <<EOF
podman_bin: "/usr/bin/podman"
mount_program: "$prefix/bin/fuse-overlayfs-wrap"
modules_dir: "/etc/podman_hpc/modules.d"
mksquashfs_bin: "$MKSQ"
shared_run_exec_args: ["-e", "SLURM_*", "-e", "PALS_*", "-e", "PMI_*"]
shared_run_command: ["sleep", "infinity"]
localid_var: "SLURM_LOCALID"
tasks_per_node_var: "SLURM_STEP_TASKS_PER_NODE"
ntasks_pattern: "[0-9]+"
graph_root_template: "/tmp/{{ uid }}_hpc/storage"
run_root_template: "/tmp/{{ uid }}_hpc"
config_home_template: "/tmp/{{ uid }}_hpc/config"
EOF
}

cmd_up() {
    tb_apt_install podman runc fuse-overlayfs squashfuse inotify-tools uidmap
    build_mksquashfs
    if ! "$PYTHON" -m pip show podman-hpc 2>/dev/null | grep -q "^Version: $PODMAN_HPC_VERSION$"; then
        "$PYTHON" -m pip install -q --disable-pip-version-check "podman-hpc==$PODMAN_HPC_VERSION" ||
            die "pip install podman-hpc==$PODMAN_HPC_VERSION failed"
    fi
    configure
    cmd_status
}

cmd_load_base() { # $1 = suite; as testbed/podman-rootless.sh's, into podman-hpc's own store
    image="hvd-base/debian:${1:-bookworm}"
    docker image inspect "$image" >/dev/null 2>&1 ||
        die "$image is not in the Docker engine (testbed/base-image.sh ${1:-bookworm})"
    want=$(docker image inspect --format '{{.Id}}' "$image")
    # podman-hpc takes the user from the login, else $USER: a batch job or CI has neither
    have=$(USER=$(id -un) podman-hpc image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
    if [ "sha256:$have" = "$want" ] || [ "$have" = "$want" ]; then
        log "$image is in podman-hpc's store"
        return 0
    fi
    docker save "$image" | USER=$(id -un) podman-hpc load -q >/dev/null ||
        die "podman-hpc load of $image failed"
    log "copied $image into podman-hpc's store"
}

cmd_status() {
    command -v podman >/dev/null 2>&1 || { echo "podman: missing"; return 3; }
    command -v podman-hpc >/dev/null 2>&1 || { echo "podman-hpc: missing"; return 3; }
    [ -x "$MKSQ" ] || { echo "mksquashfs.static: missing"; return 3; }
    echo "podman: $(podman --version)"
    echo "podman-hpc: $("$PYTHON" -m pip show podman-hpc 2>/dev/null | sed -n 's/^Version: //p')"
    echo "mksquashfs.static: $("$MKSQ" -version | head -1)"
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

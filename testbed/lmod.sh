#!/bin/sh
# Environment modules as sites have them: Debian's Lmod, with the modulefiles of a GPU site that
# `hvd-container sites probe` looks for (a container runtime, CUDA, NCCL's network plugin).
#
#   testbed/lmod.sh up       install lmod when absent, write the modulefiles
#   testbed/lmod.sh status   print Lmod's version and the module tree; exit 0 only when usable
#   testbed/lmod.sh env      print LMOD_CMD=... and MODULEPATH=... for a shell or a test
#   testbed/lmod.sh down     nothing to stop (no daemon); kept for a uniform interface
#
# Settings (environment):
#   HVD_LMOD_TREE   where the modulefiles go (default /var/lib/hvd-testbed/modulefiles)
set -eu

. "$(dirname "$0")/_lib.sh"

TREE=${HVD_LMOD_TREE:-/var/lib/hvd-testbed/modulefiles}
LMOD_CMD=/usr/share/lmod/lmod/libexec/lmod

# name/version -> what it sets; the module names the probe must find
write_module() { # $1 = path under the tree (no .lua), $2 = body
    mkdir -p "$(dirname "$TREE/$1")"
    printf -- '-- written by hvd-container testbed/lmod.sh\n%s\n' "$2" >"$TREE/$1.lua.tmp"
    mv "$TREE/$1.lua.tmp" "$TREE/$1.lua"
}

cmd_up() {
    tb_apt_install lmod
    write_module singularity/4.3.4 'whatis("Singularity 4.3.4 (the testbed has no singularity binary)")
setenv("SINGULARITY_VERSION", "4.3.4")'
    write_module cuda/13.0 'whatis("CUDA 13.0 (the testbed has no CUDA)")
setenv("CUDA_VERSION", "13.0")'
    write_module nccl-plugin 'whatis("NCCL network plugin (the testbed has none)")
setenv("NCCL_NET", "Socket")'
    cmd_status
}

cmd_env() {
    echo "LMOD_CMD=$LMOD_CMD"
    echo "MODULEPATH=$TREE"
}

cmd_status() {
    [ -x "$LMOD_CMD" ] || { echo "lmod: missing"; return 3; }
    [ -d "$TREE" ] || { echo "modulefiles: missing ($TREE)"; return 3; }
    echo "lmod: $("$LMOD_CMD" --version 2>&1 | sed -n 's/.*Version \([0-9.]*\).*/\1/p' | head -n 1)"
    echo "modules: $(MODULEPATH=$TREE "$LMOD_CMD" bash -t avail 2>&1 >/dev/null | grep -v ':$' | tr '\n' ' ')"
}

case "${1:-up}" in
up) cmd_up ;;
status) cmd_status ;;
env) cmd_env ;;
down) : ;;
*)
    echo "usage: $0 up|status|env|down" >&2
    exit 2
    ;;
esac

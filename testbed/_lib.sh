# Shared helpers for the testbed scripts (sourced, not run).
# State (pid files, logs, storage) lives under $HVD_TESTBED_DIR.

HVD_TESTBED_DIR="${HVD_TESTBED_DIR:-/var/tmp/hvd-testbed}"

tb_log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
tb_die() { tb_log "error: $*"; exit 1; }

# `tb_apt_update hourly`: `apt-get update` at most once an hour; `tb_apt_update force`: now
# (after a new source was added).
tb_apt_update() {
    stamp="$HVD_TESTBED_DIR/apt-updated"
    mkdir -p "$HVD_TESTBED_DIR"
    if [ "$1" = force ] || [ -z "$(find "$stamp" -mmin -60 2>/dev/null)" ]; then
        tb_log "apt-get update"
        apt-get -o DPkg::Lock::Timeout=600 update -qq >>"$HVD_TESTBED_DIR/apt.log" 2>&1 \
            || { tail -n 20 "$HVD_TESTBED_DIR/apt.log" >&2; tb_die "apt-get update failed"; }
        touch "$stamp"
    fi
}

# apt-get install ARGS (packages, and options such as `-t RELEASE`), waiting on the dpkg lock
# because other testbed scripts may install at the same time.
tb_apt_get_install() {
    tb_log "installing: $*"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends "$@" >>"$HVD_TESTBED_DIR/apt.log" 2>&1 \
        || { tail -n 20 "$HVD_TESTBED_DIR/apt.log" >&2; tb_die "apt-get install $* failed"; }
}

# apt-get install only what is missing (any version of a package counts as installed).
tb_apt_install() {
    missing=""
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
            || missing="$missing $pkg"
    done
    [ -z "$missing" ] && return 0
    [ "$(id -u)" = 0 ] || tb_die "need root to install:$missing"
    tb_apt_update hourly
    # shellcheck disable=SC2086
    tb_apt_get_install $missing
}

# True if the pid in FILE is alive and its command line contains NAME.
tb_pid_alive() {
    [ -s "$1" ] || return 1
    pid=$(cat "$1")
    [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$2"
}

# Whether the process recorded in FILE, started in the background just now, still runs: until
# the forked shell has exec'ed the program its command line is still the shell's, so a wait
# loop that matched the name (tb_pid_alive) would give up on a daemon that is starting. A
# process that exited (a zombie until the shell reaps it) does not count.
tb_pid_running() {
    [ -s "$1" ] || return 1
    state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$(cat "$1")/status" 2>/dev/null)
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# Stop the process recorded in FILE (only if it is still NAME), wait up to 30 s.
# Stop the processes of several pid files at once (FILE NAME pairs): each is sent SIGTERM,
# then all are waited for together (slurmd takes seconds to go: eight one after the other were
# most of a cluster's restart), SIGKILL after 30 s; the files are removed.
tb_stop_pids() {
    tb_pids=""
    while [ $# -ge 2 ]; do
        if tb_pid_alive "$1" "$2"; then
            tb_pid=$(cat "$1")
            kill "$tb_pid" 2>/dev/null && tb_pids="$tb_pids $tb_pid"
            tb_log "stopping $2 (pid $tb_pid)"
        fi
        rm -f "$1"
        shift 2
    done
    tb_waited=0
    for tb_pid in $tb_pids; do
        while kill -0 "$tb_pid" 2>/dev/null && [ $tb_waited -lt 300 ]; do
            sleep 0.1
            tb_waited=$((tb_waited + 1))
        done
        kill -0 "$tb_pid" 2>/dev/null && kill -9 "$tb_pid"
    done
    return 0
}

tb_stop_pid() {
    if tb_pid_alive "$1" "$2"; then
        pid=$(cat "$1")
        kill "$pid"
        # (a name of its own: sh variables are global, and callers count nodes in `i`)
        tb_waited=0
        while kill -0 "$pid" 2>/dev/null && [ $tb_waited -lt 60 ]; do
            sleep 0.5
            tb_waited=$((tb_waited + 1))
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
        tb_log "stopped $2 (pid $pid)"
    else
        tb_log "$2 was not started by this script; leaving it alone"
    fi
    rm -f "$1"
}

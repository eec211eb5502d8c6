#!/bin/sh
# Docker engine for tests and CI: Debian's docker.io, dockerd started in the background.
#   testbed/docker.sh up      install docker.io if dockerd is absent, start it, wait for the socket
#   testbed/docker.sh down    stop dockerd only if `up` started it
#   testbed/docker.sh status  exit 0 if the engine answers
# Idempotent; concurrent callers are serialised with a lock.
set -eu
. "$(dirname "$0")/_lib.sh"

STATE="$HVD_TESTBED_DIR/docker"
PIDFILE="$STATE/dockerd.pid"
LOG="$STATE/dockerd.log"
SOCK="${DOCKER_SOCK:-/var/run/docker.sock}"
# Debian's client can use the daemon's built-in BuildKit; a preinstalled newer client may not.
CLIENT=/usr/bin/docker

engine_answers() {
    [ -S "$SOCK" ] && "$CLIENT" -H "unix://$SOCK" version >/dev/null 2>&1
}

up() {
    mkdir -p "$STATE"
    exec 9>"$STATE/lock"
    flock 9
    if [ -x "$CLIENT" ] && engine_answers; then
        tb_log "dockerd already running ($SOCK)"
        return 0
    fi
    if ! command -v dockerd >/dev/null 2>&1 || [ ! -x "$CLIENT" ]; then
        tb_apt_install docker.io iptables ca-certificates
    fi
    if tb_pid_alive "$PIDFILE" dockerd; then
        tb_log "dockerd (pid $(cat "$PIDFILE")) started earlier is still coming up"
    else
        tb_log "starting dockerd (log: $LOG)"
        # setsid: the daemon must outlive the shell (and test session) that started it.
        setsid dockerd --host "unix://$SOCK" >>"$LOG" 2>&1 </dev/null 9>&- &
        echo $! >"$PIDFILE"
    fi
    i=0
    until engine_answers; do
        i=$((i + 1))
        if [ $i -gt 120 ] || ! tb_pid_running "$PIDFILE"; then
            tail -n 20 "$LOG" >&2 || true
            tb_die "dockerd did not come up within 60 s (log: $LOG)"
        fi
        sleep 0.5
    done
    tb_log "dockerd ready ($("$CLIENT" -H "unix://$SOCK" version -f '{{.Server.Version}}' 2>/dev/null))"
}

down() {
    mkdir -p "$STATE"
    exec 9>"$STATE/lock"
    flock 9
    tb_stop_pid "$PIDFILE" dockerd
}

status() {
    if [ -x "$CLIENT" ] && engine_answers; then
        echo "dockerd: running ($SOCK)"
    else
        echo "dockerd: not running"
        return 1
    fi
}

case "${1:-up}" in
up) up ;;
down) down ;;
status) status ;;
*) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac

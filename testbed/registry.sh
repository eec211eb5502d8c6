#!/bin/sh
# A local Docker registry (v2) for tests and CI: Debian's docker-registry on 127.0.0.1:5000
# with its own small config and storage directory (the packaged service is not used).
#   testbed/registry.sh up      install docker-registry if absent, start it, wait for /v2/
#   testbed/registry.sh down    stop it only if `up` started it
#   testbed/registry.sh status  exit 0 if the registry answers
# HVD_REGISTRY_ADDR overrides the listen address (default 127.0.0.1:5000).
set -eu
. "$(dirname "$0")/_lib.sh"

ADDR="${HVD_REGISTRY_ADDR:-127.0.0.1:5000}"
STATE="$HVD_TESTBED_DIR/registry"
PIDFILE="$STATE/registry.pid"
LOG="$STATE/registry.log"
CONFIG="$STATE/config.yml"

answers() {
    python3 - "$ADDR" <<'PY' >/dev/null 2>&1
import sys, urllib.request
with urllib.request.urlopen(f"http://{sys.argv[1]}/v2/", timeout=2) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
}

write_config() {
    mkdir -p "$STATE/storage"
    cat >"$CONFIG" <<YAML
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $STATE/storage
  delete:
    enabled: true
http:
  addr: $ADDR
  headers:
    X-Content-Type-Options: [nosniff]
YAML
}

up() {
    mkdir -p "$STATE"
    exec 9>"$STATE/lock"
    flock 9
    if answers; then
        tb_log "registry already answering on $ADDR"
        return 0
    fi
    command -v docker-registry >/dev/null 2>&1 || tb_apt_install docker-registry
    if ! tb_pid_alive "$PIDFILE" docker-registry; then
        write_config
        tb_log "starting docker-registry on $ADDR (log: $LOG)"
        setsid docker-registry serve "$CONFIG" >>"$LOG" 2>&1 </dev/null 9>&- &
        echo $! >"$PIDFILE"
    fi
    i=0
    until answers; do
        i=$((i + 1))
        if [ $i -gt 60 ] || ! tb_pid_running "$PIDFILE"; then
            tail -n 20 "$LOG" >&2 || true
            tb_die "docker-registry did not answer on $ADDR within 30 s (log: $LOG)"
        fi
        sleep 0.5
    done
    tb_log "registry ready on $ADDR"
}

down() {
    mkdir -p "$STATE"
    exec 9>"$STATE/lock"
    flock 9
    tb_stop_pid "$PIDFILE" docker-registry
}

status() {
    if answers; then
        echo "registry: running ($ADDR)"
    else
        echo "registry: not running ($ADDR)"
        return 1
    fi
}

case "${1:-up}" in
up) up ;;
down) down ;;
status) status ;;
*) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac

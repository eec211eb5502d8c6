#!/bin/sh
# The outside verifier of SIF signatures: testbed/sif-integrity/main.go built against Sylabs'
# own sif library (pkg/integrity, what Apptainer's `sign` and `verify` call), from Debian's
# golang-github-sylabs-sif-dev, with Debian's Go. No network beyond apt.
#   testbed/sif-integrity.sh up      install Go and the library if missing, build the tool
#   testbed/sif-integrity.sh status  print the tool's path; exit 1 if it is not built
#   testbed/sif-integrity.sh down    nothing runs in the background: no-op
set -eu
. "$(dirname "$0")/_lib.sh"

SOURCE="$(cd "$(dirname "$0")" && pwd)/sif-integrity/main.go"
WORK="$HVD_TESTBED_DIR/sif-integrity"
TOOL="$WORK/sif-integrity"

case "${1:-up}" in
up)
    tb_apt_install golang-go golang-github-sylabs-sif-dev
    if [ ! -x "$TOOL" ] || [ "$SOURCE" -nt "$TOOL" ]; then
        # Debian installs the module github.com/sylabs/sif/v2 without its /v2 folder: a GOPATH
        # of our own links it under the name the code imports
        mkdir -p "$WORK/gopath/src/github.com/sylabs/sif" "$WORK/gopath/src/sif-integrity"
        ln -sfn /usr/share/gocode/src/github.com/sylabs/sif "$WORK/gopath/src/github.com/sylabs/sif/v2"
        cp "$SOURCE" "$WORK/gopath/src/sif-integrity/main.go"
        tb_log "building sif-integrity"
        (cd "$WORK/gopath/src/sif-integrity" \
            && GO111MODULE=off GOPATH="$WORK/gopath:/usr/share/gocode" GOCACHE="$WORK/cache" \
               GOFLAGS= go build -o "$TOOL.new" .) || tb_die "go build failed"
        mv "$TOOL.new" "$TOOL"
    fi
    tb_log "ready: $TOOL"
    ;;
status)
    if [ -x "$TOOL" ]; then echo "$TOOL"; else echo "sif-integrity: not built" >&2; exit 1; fi
    ;;
down)
    tb_log "nothing to stop"
    ;;
*)
    echo "usage: $0 up|status|down" >&2
    exit 2
    ;;
esac

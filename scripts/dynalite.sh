#!/usr/bin/env bash
# dynalite, a local DynamoDB endpoint (in memory), for the DynamoDB store tests.
#
#   bash scripts/dynalite.sh start [PORT]   # default 4567; waits until it answers
#   bash scripts/dynalite.sh stop [PORT]
#
# Installed from scripts/dynalite/package-lock.json (npm ci) on first use.
# Tables are created at once; nothing is kept on disk. server.js keeps the
# server up when a client dies in the middle of sending a request.
set -euo pipefail
cd "$(dirname "$0")/dynalite"
cmd="${1:-}"
port="${2:-4567}"
pidfile="${TMPDIR:-/tmp}/intentkey-dynalite-$port.pid"

case "$cmd" in
start)
    bash "$0" stop "$port" >/dev/null 2>&1 || true
    [ -x node_modules/.bin/dynalite ] || npm ci --ignore-scripts --no-audit --no-fund >/dev/null
    node server.js "$port" \
        >"${TMPDIR:-/tmp}/intentkey-dynalite-$port.log" 2>&1 &
    echo $! >"$pidfile"
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "dynalite: a local DynamoDB endpoint on 127.0.0.1:$port"
            exit 0
        fi
        sleep 0.1
    done
    echo "dynalite: did not start on $port; its log:" >&2
    cat "${TMPDIR:-/tmp}/intentkey-dynalite-$port.log" >&2 || true
    exit 1
    ;;
stop)
    if [ -f "$pidfile" ]; then
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    fi
    ;;
*)
    echo "usage: $0 start|stop [PORT]" >&2
    exit 2
    ;;
esac

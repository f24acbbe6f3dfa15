#!/usr/bin/env bash
# A real Redis Cluster on this machine for the tests: six redis-server
# processes (3 masters, 3 replicas) on ports BASE..BASE+5 (default 7000),
# created with `redis-cli --cluster create`, and torn down again.
#
#   bash scripts/redis-cluster.sh start [BASE]    # waits until every slot is served
#   bash scripts/redis-cluster.sh stop [BASE]     # shuts the nodes down, removes their files
#   bash scripts/redis-cluster.sh restart-node PORT [BASE]   # starts one node again (after a SIGKILL)
#
# Each node's files (redis.conf, nodes.conf, log) are in
# ${TMPDIR:-/tmp}/intentkey-redis-cluster-BASE/PORT. Nothing is persisted
# (no RDB, no AOF): a restarted node rejoins as a replica and resyncs.
set -euo pipefail

cmd="${1:-}"
base="${2:-7000}"
if [ "$cmd" = restart-node ]; then
    port="${2:?restart-node PORT [BASE]}"
    base="${3:-7000}"
fi
dir="${TMPDIR:-/tmp}/intentkey-redis-cluster-$base"
ports=()
for i in 0 1 2 3 4 5; do ports+=("$((base + i))"); done

need() {
    command -v redis-server >/dev/null && command -v redis-cli >/dev/null || {
        echo "redis-cluster: redis-server and redis-cli are needed (Debian: apt-get install redis-server)" >&2
        exit 1
    }
}

start_node() {
    local p="$1"
    redis-server "$dir/$p/redis.conf"
    for _ in $(seq 100); do
        redis-cli -p "$p" ping >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "redis-cluster: node $p did not start; its log:" >&2
    tail -20 "$dir/$p/log" >&2 || true
    return 1
}

case "$cmd" in
start)
    need
    bash "$0" stop "$base" >/dev/null 2>&1 || true
    for p in "${ports[@]}"; do
        mkdir -p "$dir/$p"
        cat >"$dir/$p/redis.conf" <<EOF
port $p
bind 127.0.0.1
daemonize yes
pidfile $dir/$p/pid
logfile $dir/$p/log
dir $dir/$p
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 1500
cluster-replica-validity-factor 0
save ""
appendonly no
repl-diskless-sync-delay 0
EOF
        start_node "$p"
    done
    hosts=()
    for p in "${ports[@]}"; do hosts+=("127.0.0.1:$p"); done
    redis-cli --cluster create "${hosts[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 || {
        cat "$dir/create.log" >&2
        exit 1
    }
    # Until every node agrees that every slot is served (and each master has its replica).
    for _ in $(seq 200); do
        ok=0
        for p in "${ports[@]}"; do
            redis-cli -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && ok=$((ok + 1))
        done
        # A replica counts once its link to its master is up (its first sync done).
        replicas=0
        for p in "${ports[@]}"; do
            redis-cli -p "$p" info replication 2>/dev/null | grep -q '^master_link_status:up' && replicas=$((replicas + 1))
        done
        # And every node's view of the cluster names the 3 replicas (gossip lags behind).
        views=0
        for p in "${ports[@]}"; do
            [ "$(redis-cli -p "$p" cluster nodes 2>/dev/null | awk '$3 ~ /slave/' | wc -l)" = 3 ] && views=$((views + 1))
        done
        if [ "$ok" = 6 ] && [ "$replicas" = 3 ] && [ "$views" = 6 ]; then
            echo "redis-cluster: 3 masters and 3 replicas on 127.0.0.1:${ports[0]}-${ports[5]} ($dir)"
            exit 0
        fi
        sleep 0.1
    done
    echo "redis-cluster: the cluster did not reach cluster_state:ok with 3 replicas in sync" >&2
    redis-cli -p "$base" cluster nodes >&2 || true
    exit 1
    ;;
restart-node)
    need
    start_node "$port"
    ;;
stop)
    for p in "${ports[@]}"; do
        redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
    done
    for p in "${ports[@]}"; do
        if [ -f "$dir/$p/pid" ]; then kill -9 "$(cat "$dir/$p/pid")" 2>/dev/null || true; fi
    done
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 start|stop [BASE] | restart-node PORT [BASE]" >&2
    exit 2
    ;;
esac

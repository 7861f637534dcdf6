#!/usr/bin/env bash
# A local Redis Cluster for tests: 6 redis-server processes on loopback
# (3 primaries, 3 replicas), AOF on, a short cluster-node-timeout.
#
#   redis-cluster.sh start DIR [BASEPORT]  start nodes on BASEPORT..BASEPORT+5
#                                          (default 17000; cluster bus ports
#                                          are those plus 10000), create the
#                                          cluster, wait until every node says
#                                          cluster_state:ok, print the
#                                          addresses comma-separated (also in
#                                          DIR/addrs). On any failure it stops
#                                          what it started and exits 1.
#   redis-cluster.sh node DIR PORT         start node PORT of DIR again (after
#                                          a kill), from its own config: it
#                                          rejoins the cluster it was part of.
#   redis-cluster.sh wait DIR              wait until every running node of
#                                          DIR says cluster_state:ok.
#   redis-cluster.sh stop DIR              kill the nodes of DIR (by their pid
#                                          files only) and remove DIR.
#
# NODE_TIMEOUT (milliseconds, default 1000) sets cluster-node-timeout.
set -Eeuo pipefail

usage() { echo "usage: $0 start DIR [BASEPORT] | node DIR PORT | wait DIR | stop DIR" >&2; exit 2; }

NODE_TIMEOUT=${NODE_TIMEOUT:-1000}
WAIT_TRIES=${WAIT_TRIES:-200} # x 0.1 s

ports_of() { cat "$1/ports"; }

# start_node DIR PORT: start one node from DIR/PORT/redis.conf, daemonized,
# and wait until it answers PING.
start_node() {
  local dir=$1 port=$2
  local p
  for p in "$port" $((port + 10000)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "redis-cluster: something already listens on port $p" >&2
      return 1
    fi
  done
  redis-server "$dir/$port/redis.conf"
  for _ in $(seq 1 "$WAIT_TRIES"); do
    if alive "$dir" "$port" && redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "redis-cluster: node $port did not answer PING; its log:" >&2
  tail -n 20 "$dir/$port/redis.log" >&2 || true
  return 1
}

# wait_ok DIR: every node whose pid file names a live process says
# cluster_state:ok and knows all 6 nodes, and every replica among them has
# its link to its primary up (so that WAIT can be acknowledged) and every
# node sees 3 replicas (clients that ask it for the map see them too).
wait_ok() {
  local dir=$1 port pending info repl nodes
  for _ in $(seq 1 "$WAIT_TRIES"); do
    pending=0
    for port in $(ports_of "$dir"); do
      alive "$dir" "$port" || continue
      info=$(redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null || true)
      repl=$(redis-cli -h 127.0.0.1 -p "$port" info replication 2>/dev/null || true)
      nodes=$(redis-cli -h 127.0.0.1 -p "$port" cluster nodes 2>/dev/null || true)
      if ! grep -q '^cluster_state:ok' <<<"$info" || ! grep -q '^cluster_known_nodes:6' <<<"$info" ||
        { grep -q '^role:slave' <<<"$repl" && ! grep -q '^master_link_status:up' <<<"$repl"; } ||
        [ "$(grep -v fail <<<"$nodes" | grep -c slave)" != 3 ]; then
        pending=1
        break
      fi
    done
    if [ "$pending" = 0 ]; then return 0; fi
    sleep 0.1
  done
  echo "redis-cluster: cluster_state did not become ok on every node" >&2
  return 1
}

alive() { # DIR PORT
  local pid
  pid=$(cat "$1/$2/redis.pid" 2>/dev/null) || return 1
  kill -0 "$pid" 2>/dev/null
}

stop() {
  local dir=$1 port pid
  [ -f "$dir/ports" ] || { rm -rf "$dir"; return 0; }
  for port in $(ports_of "$dir"); do
    pid=$(cat "$dir/$port/redis.pid" 2>/dev/null) || continue
    kill -9 "$pid" 2>/dev/null || true
  done
  for port in $(ports_of "$dir"); do
    pid=$(cat "$dir/$port/redis.pid" 2>/dev/null) || continue
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  rm -rf "$dir"
}

start() {
  local dir=$1 base=$2 port addrs=() i
  command -v redis-server >/dev/null || { echo "redis-cluster: redis-server is not on PATH" >&2; return 1; }
  command -v redis-cli >/dev/null || { echo "redis-cluster: redis-cli is not on PATH" >&2; return 1; }
  if [ -e "$dir/ports" ]; then echo "redis-cluster: $dir already holds a cluster" >&2; return 1; fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  for i in 0 1 2 3 4 5; do echo $((base + i)); done >"$dir/ports"
  # From here on, any failure stops what was started.
  trap 'stop "$dir"' ERR
  for port in $(ports_of "$dir"); do
    mkdir -p "$dir/$port"
    cat >"$dir/$port/redis.conf" <<EOF
port $port
bind 127.0.0.1
dir $dir/$port
daemonize yes
pidfile $dir/$port/redis.pid
logfile $dir/$port/redis.log
cluster-enabled yes
cluster-config-file $dir/$port/nodes.conf
cluster-node-timeout $NODE_TIMEOUT
appendonly yes
appendfsync everysec
save ""
maxmemory-policy noeviction
# No 5 s wait for more replicas before a full sync, and replication
# offsets that move within a second (CLUSTER SLOTS lists a replica only
# once its offset is not 0).
repl-diskless-sync-delay 0
repl-ping-replica-period 1
EOF
    start_node "$dir" "$port"
    addrs+=("127.0.0.1:$port")
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
    { cat "$dir/create.log" >&2; false; }
  wait_ok "$dir"
  trap - ERR
  (IFS=,; echo "${addrs[*]}") | tee "$dir/addrs"
}

[ $# -ge 2 ] || usage
cmd=$1 dir=$2
case $cmd in
  start) [ $# -le 3 ] || usage; start "$dir" "${3:-17000}" ;;
  node) [ $# -eq 3 ] || usage; start_node "$dir" "$3" ;;
  wait) [ $# -eq 2 ] || usage; wait_ok "$dir" ;;
  stop) [ $# -eq 2 ] || usage; stop "$dir" ;;
  *) usage ;;
esac

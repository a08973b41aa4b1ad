#!/bin/bash
# A three-node cluster against a single node of the same build, alternating in one run: for
# each round and scenario, the bench against one server, then against the primary (node 0,
# view 0) of three cluster processes on this machine; fresh data for every run. Prints each
# run's MB/s and latency percentiles and, per setup, the median and its ratio to the single
# node. The cluster's nodes share the machine's cores with each other and with the client.
# Usage: bash bench/cluster.sh <iggy binary> [rounds] [total bytes]
# SCENARIOS (one scenario and its options per line) replaces the default two.
set -u
BINARY=$1
ROUNDS=${2:-5}
TOTAL=${3:-512MiB}
CLIENT=target/release/iggy
DATA=target/bench-cluster
SECRET=bench-cluster-shared-secret-of-32-bytes-or-more
PIDS=()
OFF="IGGY_QUIC_ENABLED=false IGGY_HTTP_ENABLED=false IGGY_WEBSOCKET_ENABLED=false"
start_single() {
  rm -rf "$DATA"
  mkdir -p "$DATA"
  # shellcheck disable=SC2086 # the variables are words
  env $OFF IGGY_SYSTEM_PATH="$DATA/single" IGGY_TCP_ADDRESS=127.0.0.1:18490 "$BINARY" \
    --with-default-root-credentials >"$DATA/single.log" 2>&1 </dev/null &
  PIDS=($!)
  ADDRESS=127.0.0.1:18490
  sleep 1
}
start_cluster() {
  rm -rf "$DATA"
  mkdir -p "$DATA"
  local roster="" id
  for id in 0 1 2; do
    roster+="[[cluster.nodes]]
name = \"node-$id\"
ip = \"127.0.0.1\"
replica_id = $id
ports = { tcp = 1850$id, tcp_replica = 1851$id }
"
  done
  cat >"$DATA/cluster.toml" <<EOF
[quic]
enabled = false
[http]
enabled = false
[websocket]
enabled = false
[cluster]
enabled = true
name = "bench-cluster"
[cluster.auth]
enabled = true
shared_secret = "$SECRET"
$roster
EOF
  PIDS=()
  for id in 0 1 2; do
    env IGGY_SYSTEM_PATH="$DATA/node-$id" IGGY_TCP_ADDRESS="127.0.0.1:1850$id" "$BINARY" \
      --config "$DATA/cluster.toml" --replica-id "$id" --with-default-root-credentials \
      >"$DATA/node-$id.log" 2>&1 </dev/null &
    PIDS+=($!)
  done
  ADDRESS=127.0.0.1:18500
  # The primary creates the root user once a quorum has formed view 0.
  for _ in $(seq 50); do
    grep -q "created the root user" "$DATA/node-0.log" 2>/dev/null && break
    sleep 0.2
  done
}
stop() {
  kill "${PIDS[@]}" 2>/dev/null
  wait "${PIDS[@]}" 2>/dev/null
}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
SCENARIOS=${SCENARIOS:-"pinned-producer
pinned-consumer"}
while read -r scenario options; do
  for setup in single cluster; do : >"$DATA-$setup.txt"; done
  for round in $(seq "$ROUNDS"); do
    for setup in single cluster; do
      "start_$setup"
      out="$DATA-out-$setup"
      # shellcheck disable=SC2086 # the options are words
      $CLIENT bench "$scenario" $options --address "$ADDRESS" --total-bytes "$TOTAL" \
        --output "$out" >"$DATA-bench-$setup.log" 2>&1 </dev/null
      stop
      read -r rate p50 p99 <<<"$(figures "$out/$scenario.json")"
      echo "$scenario $options round $round $setup: $rate MB/s, p50 $p50 p99 $p99 µs"
      echo "$rate $p50 $p99" >>"$DATA-$setup.txt"
    done
  done
  single_rate=$(cut -d' ' -f1 <"$DATA-single.txt" | median)
  single_p99=$(cut -d' ' -f3 <"$DATA-single.txt" | median)
  for setup in single cluster; do
    rate=$(cut -d' ' -f1 <"$DATA-$setup.txt" | median)
    p50=$(cut -d' ' -f2 <"$DATA-$setup.txt" | median)
    p99=$(cut -d' ' -f3 <"$DATA-$setup.txt" | median)
    ratio=$(python3 -c "print(round($rate / $single_rate, 3))")
    p99_ratio=$(python3 -c "print(round($p99 / $single_p99, 2))")
    echo "$scenario $options median $setup: $rate MB/s (x$ratio of single), p50 $p50 p99 $p99 µs (x$p99_ratio)"
  done
done <<<"$SCENARIOS"

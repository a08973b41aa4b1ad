#!/bin/bash
# One shard against two on this machine: each scenario runs against a fresh 1-shard server and
# then a fresh 2-shard server, back to back, so each pair shares the machine's state.
# Usage: bash bench/sharding.sh [output directory]   (from the repository root, after
# `cargo build --release --bin iggy --features full`)
set -u
B=target/release/iggy
O=${1:-bench/results/sharding}
ADDRESS=127.0.0.1:18096
DATA=target/bench-sharding
start() {
  rm -rf "$DATA"
  IGGY_SYSTEM_SHARDING_CPU_ALLOCATION=$1 IGGY_SYSTEM_PATH=$DATA IGGY_TCP_ADDRESS=$ADDRESS \
    $B --with-default-root-credentials >"$DATA.log" 2>&1 &
  PID=$!
  sleep 1
}
stop() { kill "$PID"; wait "$PID"; }
while read -r name args; do
  for shards in 1 2; do
    start $shards
    echo "=== $name, $shards shard(s)"
    $B bench $args --address $ADDRESS --output "$O/$name-$shards" 2>&1 | tr '\r' '\n' \
      | grep -A3 '^actor'
    stop
  done
done <<LIST
producer pinned-producer --total-bytes 1GiB
consumer pinned-consumer --total-bytes 1GiB
producer-and-consumer pinned-producer-and-consumer --total-bytes 1GiB
8-producers pinned-producer --producers 8 --total-bytes 1GiB
8-producers-8-partitions balanced-producer --producers 8 --partitions 8 --total-bytes 1GiB
consumer-group balanced-consumer-group --total-bytes 1GiB
end-to-end end-to-end-producing-consumer --total-bytes 1GiB
LIST
rm -rf "$DATA" "$DATA.log"

#!/bin/bash
# The file backends of one server build side by side, in one run: for each round and
# scenario, the server with `[system] io_backend = "compio"` then "io_uring", alternating,
# fresh data for every run. Prints each run's MB/s and latency percentiles and, per backend,
# the median and its ratio to compio.
# Usage: bash bench/backends.sh <iggy binary built with io-uring> [rounds] [total bytes]
# SCENARIOS (one scenario and its options per line) replaces the default two.
set -u
BINARY=$1
ROUNDS=${2:-7}
TOTAL=${3:-1GiB}
CLIENT=target/release/iggy
DATA=target/bench-backends
TCP=127.0.0.1:18590
start() {
  rm -rf "$DATA"
  env IGGY_SYSTEM_IO_BACKEND="$1" IGGY_SYSTEM_PATH=$DATA IGGY_TCP_ADDRESS=$TCP \
    IGGY_WEBSOCKET_ENABLED=false IGGY_QUIC_ENABLED=false IGGY_HTTP_ENABLED=false \
    "$BINARY" --with-default-root-credentials >"$DATA.log" 2>&1 </dev/null &
  PID=$!
  sleep 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null; }
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
SCENARIOS=${SCENARIOS:-"pinned-producer
pinned-consumer"}
BACKENDS="compio io_uring"
while read -r scenario options; do
  for backend in $BACKENDS; do : >"$DATA-$backend.txt"; done
  for round in $(seq "$ROUNDS"); do
    for backend in $BACKENDS; do
      start "$backend"
      out="$DATA-out-$backend"
      # shellcheck disable=SC2086 # the options are words
      $CLIENT bench "$scenario" $options --address "$TCP" --total-bytes "$TOTAL" \
        --output "$out" >/dev/null 2>&1 </dev/null
      stop
      read -r rate p50 p99 <<<"$(figures "$out/$scenario.json")"
      echo "$scenario $options round $round $backend: $rate MB/s, p50 $p50 p99 $p99 µs"
      echo "$rate $p50 $p99" >>"$DATA-$backend.txt"
    done
  done
  base=$(cut -d' ' -f1 <"$DATA-compio.txt" | median)
  for backend in $BACKENDS; do
    rate=$(cut -d' ' -f1 <"$DATA-$backend.txt" | median)
    p50=$(cut -d' ' -f2 <"$DATA-$backend.txt" | median)
    p99=$(cut -d' ' -f3 <"$DATA-$backend.txt" | median)
    ratio=$(python3 -c "print(round($rate / $base, 3))")
    echo "$scenario $options median $backend: $rate MB/s (x$ratio of compio), p50 $p50 p99 $p99 µs"
  done
done <<<"$SCENARIOS"

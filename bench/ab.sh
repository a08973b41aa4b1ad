#!/bin/bash
# A/B of two server builds on this machine: for each scenario, ROUNDS pairs, the two servers
# alternating (fresh data each run), the same bench client (this tree's build) for both.
# Prints every run's aggregate MB/s and p50 latency, and the medians of both.
# Usage: bash bench/ab.sh <previous iggy binary> <new iggy binary> [rounds] [total bytes]
set -u
OLD=$1
NEW=$2
ROUNDS=${3:-5}
TOTAL=${4:-1GiB}
CLIENT=target/release/iggy
ADDRESS=127.0.0.1:18097
DATA=target/bench-ab
start() {
  rm -rf "$DATA"
  IGGY_SYSTEM_PATH=$DATA IGGY_TCP_ADDRESS=$ADDRESS "$1" --with-default-root-credentials \
    >"$DATA.log" 2>&1 </dev/null &
  PID=$!
  sleep 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null; }
# The aggregate throughput (MB/s) and p50 latency (µs) of one run, from the bench's JSON.
figures() {
  python3 -c 'import json,sys; a=next(iter(json.load(open(sys.argv[1]))["aggregate"].values())); print(a["megabytes_per_second"], a["latency_us"]["p50"])' "$1"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# Each line: a scenario and its options. The group scenario runs two consumers on two
# partitions so that, with two shards, a member is served on a shard other than the
# metadata sequencer's.
SCENARIOS="pinned-producer
pinned-consumer
balanced-consumer-group --consumers 2 --partitions 2"
while read -r scenario options; do
  : >"$DATA-old.txt"
  : >"$DATA-new.txt"
  for round in $(seq "$ROUNDS"); do
    for side in old new; do
      binary=$OLD
      [ "$side" = new ] && binary=$NEW
      start "$binary"
      out="$DATA-out-$side"
      # shellcheck disable=SC2086 # the options are words
      $CLIENT bench "$scenario" $options --address $ADDRESS --total-bytes "$TOTAL" \
        --output "$out" >/dev/null 2>&1 </dev/null
      stop
      read -r rate p50 <<<"$(figures "$out/$scenario.json")"
      echo "$scenario round $round $side: $rate MB/s, p50 $p50 µs"
      echo "$rate $p50" >>"$DATA-$side.txt"
    done
  done
  old=$(cut -d' ' -f1 <"$DATA-old.txt" | median)
  new=$(cut -d' ' -f1 <"$DATA-new.txt" | median)
  old_p50=$(cut -d' ' -f2 <"$DATA-old.txt" | median)
  new_p50=$(cut -d' ' -f2 <"$DATA-new.txt" | median)
  echo "$scenario median: previous $old MB/s p50 $old_p50 µs, this build $new MB/s p50 $new_p50 µs," \
    "ratio $(python3 -c "print(round($new/$old, 3))"), p50 ratio $(python3 -c "print(round($new_p50/$old_p50, 3))")"
done <<<"$SCENARIOS"
rm -rf "$DATA" "$DATA.log" "$DATA"-*.txt "$DATA"-out-*

#!/bin/bash
# A/B of two server builds on this machine: for each scenario, ROUNDS pairs, the two servers
# alternating (fresh data each run), the same bench client (this tree's build) for both.
# Prints every run's aggregate MB/s, msg/s and latency percentiles, and their medians.
# Usage: bash bench/ab.sh <previous iggy binary> <new iggy binary> [rounds] [total bytes]
# SCENARIOS (one scenario and its bench options per line) replaces the default three, e.g.
# SCENARIOS='pinned-producer --message-size 100 --messages-per-batch 1' for small messages.
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
# The aggregate MB/s, msg/s and p50, p99, p9999 latency (µs) of one run, from the bench's JSON.
figures() {
  python3 -c 'import json,sys; a=next(iter(json.load(open(sys.argv[1]))["aggregate"].values())); l=a["latency_us"]; print(a["megabytes_per_second"], round(a["messages_per_second"]), l["p50"], l["p99"], l["p9999"])' "$1"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# Each line: a scenario and its options. The group scenario runs two consumers on two
# partitions so that, with two shards, a member is served on a shard other than the
# metadata sequencer's.
SCENARIOS=${SCENARIOS:-"pinned-producer
pinned-consumer
balanced-consumer-group --consumers 2 --partitions 2"}
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
      read -r rate messages p50 p99 p9999 <<<"$(figures "$out/$scenario.json")"
      echo "$scenario $options round $round $side: $rate MB/s, $messages msg/s," \
        "p50 $p50 p99 $p99 p9999 $p9999 µs"
      echo "$rate $messages $p50 $p99 $p9999" >>"$DATA-$side.txt"
    done
  done
  for side in old new; do
    read -r rate messages p50 p99 p9999 <<<"$(for column in 1 2 3 4 5; do
      cut -d' ' -f$column <"$DATA-$side.txt" | median
    done | tr '\n' ' ')"
    eval "${side}_figures=(\$rate \$messages \$p50 \$p99 \$p9999)"
  done
  # shellcheck disable=SC2154 # set by the eval above
  echo "$scenario $options median: previous ${old_figures[0]} MB/s ${old_figures[1]} msg/s" \
    "p50/p99/p9999 ${old_figures[2]}/${old_figures[3]}/${old_figures[4]} µs; this build" \
    "${new_figures[0]} MB/s ${new_figures[1]} msg/s p50/p99/p9999" \
    "${new_figures[2]}/${new_figures[3]}/${new_figures[4]} µs; ratio" \
    "$(python3 -c "print(round(${new_figures[0]}/${old_figures[0]}, 3))"), p50 ratio" \
    "$(python3 -c "print(round(${new_figures[2]}/${old_figures[2]}, 3))")"
done <<<"$SCENARIOS"
rm -rf "$DATA" "$DATA.log" "$DATA"-*.txt "$DATA"-out-*

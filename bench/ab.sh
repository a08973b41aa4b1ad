#!/bin/bash
# A/B of two server builds on this machine: for each scenario, ROUNDS pairs, the two servers
# alternating (fresh data each run), the same bench client (this tree's build) for both.
# Prints every run's aggregate MB/s and the medians.
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
    >"$DATA.log" 2>&1 &
  PID=$!
  sleep 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null; }
# The aggregate throughput (MB/s) of one run, from the bench's JSON report.
throughput() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(next(iter(d["aggregate"].values()))["megabytes_per_second"])' "$1"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for scenario in pinned-producer pinned-consumer; do
  : >"$DATA-old.txt"
  : >"$DATA-new.txt"
  for round in $(seq "$ROUNDS"); do
    for side in old new; do
      binary=$OLD
      [ "$side" = new ] && binary=$NEW
      start "$binary"
      out="$DATA-out-$side"
      $CLIENT bench "$scenario" --address $ADDRESS --total-bytes "$TOTAL" --output "$out" \
        >/dev/null 2>&1
      stop
      value=$(throughput "$out/$scenario.json")
      echo "$scenario round $round $side: $value MB/s"
      echo "$value" >>"$DATA-$side.txt"
    done
  done
  old=$(median <"$DATA-old.txt")
  new=$(median <"$DATA-new.txt")
  echo "$scenario median: previous $old MB/s, this build $new MB/s, ratio $(python3 -c "print(round($new/$old, 3))")"
done
rm -rf "$DATA" "$DATA.log" "$DATA"-*.txt "$DATA"-out-*

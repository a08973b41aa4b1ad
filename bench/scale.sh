#!/bin/bash
# Scale curves for small messages and many clients, each point against a fresh server:
# producers (1-64, pinned, 100-byte messages in batches of 100 and of 1), partitions (1-1,000,
# balanced over one topic) and connections (10-9,990 idle ones held beside one producer).
# Prints one tab-separated line per point (also written to $O/scale.tsv): sweep, value,
# batch, msg/s, MB/s, p50, p99, p9999 (ms), server memory start/after targets/after idle
# (MiB), KiB per partition, KiB per idle connection.
# Usage: bash bench/scale.sh [output directory]   (from the repository root, after
# `cargo build --release --bin iggy --features full`); then
# `python3 bench/scale_charts.py <output directory>` draws the charts.
set -u
B=target/release/iggy
O=${1:-bench/results/scale}
ADDRESS=127.0.0.1:18095
DATA=target/bench-scale
mkdir -p "$O"
: >"$O/scale.tsv"
start() {
  rm -rf "$DATA"
  IGGY_SYSTEM_PATH=$DATA IGGY_TCP_ADDRESS=$ADDRESS $B --with-default-root-credentials \
    >"$DATA.log" 2>&1 </dev/null &
  PID=$!
  sleep 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null; }
# point <sweep> <value> <batch> <bench arguments...>
point() {
  local sweep=$1 value=$2 batch=$3
  shift 3
  local out="$O/$sweep-$value-b$batch"
  start
  $B bench "$@" --message-size 100 --messages-per-batch "$batch" --address $ADDRESS \
    --output "$out" >/dev/null 2>&1
  stop
  local json
  json=$(ls "$out"/*.json 2>/dev/null | head -1)
  if [ -z "$json" ]; then
    echo -e "$sweep\t$value\t$batch\tfailed" | tee -a "$O/scale.tsv"
    return
  fi
  python3 - "$json" "$sweep" "$value" "$batch" <<'PY' | tee -a "$O/scale.tsv"
import json, sys
d = json.load(open(sys.argv[1]))
a = next(iter(d["aggregate"].values()))
s = d["server"]
o = d["options"]
mib = lambda b: "" if b is None else f"{b / 2**20:.1f}"
def per(a_, b_, n):
    return "" if a_ is None or b_ is None or n == 0 else f"{(b_ - a_) / n / 1024:.1f}"
l = a["latency_us"]
print("\t".join([sys.argv[2], sys.argv[3], sys.argv[4], f'{a["messages_per_second"]:.0f}',
    f'{a["megabytes_per_second"]:.2f}', f'{l["p50"] / 1000:.3f}', f'{l["p99"] / 1000:.3f}',
    f'{l["p9999"] / 1000:.3f}', mib(s["memory_start_bytes"]), mib(s["memory_after_targets_bytes"]),
    mib(s["memory_after_idle_bytes"]),
    per(s["memory_start_bytes"], s["memory_after_targets_bytes"], o["streams"] * o["partitions"]),
    per(s["memory_after_targets_bytes"], s["memory_after_idle_bytes"], s["idle_connections"])]))
PY
}
for batch in 100 1; do
  # Batches of 1 move 100x fewer bytes per request: smaller totals keep each point short.
  total=64MiB
  [ "$batch" = 1 ] && total=2MiB
  for producers in 1 4 16 64; do
    point producers "$producers" "$batch" pinned-producer --producers "$producers" --total-bytes $total
  done
  for partitions in 1 10 100 1000; do
    point partitions "$partitions" "$batch" balanced-producer --producers 4 \
      --partitions "$partitions" --total-bytes $total
  done
  for idle in 10 100 1000 9990; do
    point connections "$idle" "$batch" pinned-producer --idle-connections "$idle" --total-bytes $total
  done
done

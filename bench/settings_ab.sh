#!/bin/bash
# A/B of two settings of one server build on this machine: ROUNDS pairs per scenario, the
# two settings alternating (fresh data each run), the same bench client for both. Reports
# each run's MB/s, p99 and the server's CPU time per GB moved (user + system, from
# /proc/<pid>/stat, between the server's start-up and the end of the bench), and medians.
# Usage: bash bench/settings_ab.sh "<A: VAR=value ...>" "<B: VAR=value ...>" [rounds] [bytes]
# e.g. metrics off against on:
#   bash bench/settings_ab.sh IGGY_HTTP_METRICS_ENABLED=false IGGY_HTTP_METRICS_ENABLED=true 7
set -u
. "$(dirname "$0")/lib.sh"
A=$1
B=$2
ROUNDS=${3:-7}
TOTAL=${4:-1GiB}
SERVER=target/release/iggy
ADDRESS=127.0.0.1:18098
DATA=target/bench-settings
TICKS=$(getconf CLK_TCK)
SCENARIOS=${SCENARIOS:-"pinned-producer
pinned-consumer"}
start() {
  rm -rf "$DATA"
  # shellcheck disable=SC2086 # the settings are words
  env $1 IGGY_SYSTEM_PATH=$DATA IGGY_TCP_ADDRESS=$ADDRESS "$SERVER" \
    --with-default-root-credentials >"$DATA.log" 2>&1 </dev/null &
  PID=$!
  sleep 1
}
# The server's CPU seconds so far (fields 14 and 15 of its stat line, after the name).
cpu_seconds() {
  awk -v ticks="$TICKS" '{sub(/.*\) /, ""); print ($12 + $13) / ticks}' "/proc/$PID/stat"
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null; }
# `1GiB`, `512MiB`, `1GB` in bytes.
bytes() {
  python3 -c 'import re,sys; n,u=re.fullmatch(r"([\d.]+)\s*([a-z]*)",sys.argv[1].lower()).groups(); print(float(n)*{"":1,"b":1,"kib":2**10,"mib":2**20,"gib":2**30,"kb":1e3,"mb":1e6,"gb":1e9}[u])' "$1"
}
while read -r scenario options; do
  : >"$DATA-A.txt"
  : >"$DATA-B.txt"
  for round in $(seq "$ROUNDS"); do
    for side in A B; do
      settings=$A
      [ "$side" = B ] && settings=$B
      start "$settings"
      out="$DATA-out-$side"
      started=$(cpu_seconds)
      # shellcheck disable=SC2086 # the options are words
      $SERVER bench "$scenario" $options --address $ADDRESS --total-bytes "$TOTAL" \
        --output "$out" >/dev/null 2>&1 </dev/null
      cpu=$(python3 -c "print(round($(cpu_seconds) - $started, 3))")
      stop
      read -r rate p50 p99 <<<"$(figures "$out/$scenario.json")"
      per_gb=$(python3 -c "print(round($cpu / ($(bytes "$TOTAL") / 1e9), 3))")
      echo "$scenario $options round $round $side ($settings): $rate MB/s, p50 $p50 p99 $p99 µs," \
        "server CPU $cpu s = $per_gb s/GB"
      echo "$rate $p99 $per_gb" >>"$DATA-$side.txt"
    done
  done
  for side in A B; do
    read -r rate p99 per_gb <<<"$(for column in 1 2 3; do
      cut -d' ' -f$column <"$DATA-$side.txt" | median
    done | tr '\n' ' ')"
    eval "${side}_figures=(\$rate \$p99 \$per_gb)"
  done
  # shellcheck disable=SC2154 # set by the eval above
  echo "$scenario $options median: A ${A_figures[0]} MB/s p99 ${A_figures[1]} µs" \
    "${A_figures[2]} CPU s/GB; B ${B_figures[0]} MB/s p99 ${B_figures[1]} µs" \
    "${B_figures[2]} CPU s/GB; B/A throughput" \
    "$(python3 -c "print(round(${B_figures[0]}/${A_figures[0]}, 3))"), CPU per GB" \
    "$(python3 -c "print(round(${B_figures[2]}/${A_figures[2]}, 3))")"
done <<<"$SCENARIOS"
rm -rf "$DATA" "$DATA.log" "$DATA"-*.txt "$DATA"-out-*

#!/bin/bash
# The same bench over every transport of one server build, in one run: for each round and
# scenario, plain TCP, WebSocket, QUIC and HTTP against a server with its defaults, then TCP
# with TLS, WSS and HTTPS against the same build with [tcp.tls], [websocket.tls] and
# [http.tls] on (self-signed certificates); fresh data for every run. Prints each run's MB/s and latency percentiles and,
# per transport, the median and its ratio to plain TCP.
# Usage: bash bench/transports.sh <iggy binary> [rounds] [total bytes]
# SCENARIOS (one scenario and its options per line) replaces the default two.
set -u
BINARY=$1
ROUNDS=${2:-5}
TOTAL=${3:-1GiB}
CLIENT=target/release/iggy
DATA=target/bench-transports
TCP=127.0.0.1:18390
WS=127.0.0.1:18392
QUIC=127.0.0.1:18380
HTTP=127.0.0.1:18300
start() {
  rm -rf "$DATA"
  env "$@" IGGY_SYSTEM_PATH=$DATA IGGY_TCP_ADDRESS=$TCP IGGY_WEBSOCKET_ADDRESS=$WS \
    IGGY_QUIC_ADDRESS=$QUIC IGGY_HTTP_ADDRESS=$HTTP "$BINARY" --with-default-root-credentials \
    >"$DATA.log" 2>&1 </dev/null &
  PID=$!
  sleep 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null; }
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
SCENARIOS=${SCENARIOS:-"pinned-producer
pinned-consumer"}
TRANSPORTS=${TRANSPORTS:-"tcp ws quic tcp-tls wss http https"}
while read -r scenario options; do
  for transport in $TRANSPORTS; do : >"$DATA-$transport.txt"; done
  for round in $(seq "$ROUNDS"); do
    for transport in $TRANSPORTS; do
      case $transport in
        tcp) address=$TCP; tls=() ;;
        ws) address=$WS; tls=() ;;
        quic) address=$QUIC; tls=() ;;
        tcp-tls) address=$TCP; tls=(IGGY_TCP_TLS_ENABLED=true) ;;
        wss) address=$WS; tls=(IGGY_WEBSOCKET_TLS_ENABLED=true) ;;
        http) address=$HTTP; tls=() ;;
        https) address=$HTTP; tls=(IGGY_HTTP_TLS_ENABLED=true) ;;
      esac
      start "${tls[@]}"
      out="$DATA-out-$transport"
      # shellcheck disable=SC2086 # the options are words
      $CLIENT bench "$scenario" $options --transport "$transport" --address "$address" \
        --total-bytes "$TOTAL" --output "$out" >/dev/null 2>&1 </dev/null
      stop
      read -r rate p50 p99 <<<"$(figures "$out/$scenario.json")"
      echo "$scenario $options round $round $transport: $rate MB/s, p50 $p50 p99 $p99 µs"
      echo "$rate $p50 $p99" >>"$DATA-$transport.txt"
    done
  done
  tcp_rate=$(cut -d' ' -f1 <"$DATA-tcp.txt" | median)
  for transport in $TRANSPORTS; do
    rate=$(cut -d' ' -f1 <"$DATA-$transport.txt" | median)
    p50=$(cut -d' ' -f2 <"$DATA-$transport.txt" | median)
    p99=$(cut -d' ' -f3 <"$DATA-$transport.txt" | median)
    ratio=$(python3 -c "print(round($rate / $tcp_rate, 3))")
    echo "$scenario $options median $transport: $rate MB/s (x$ratio of tcp), p50 $p50 p99 $p99 µs"
  done
done <<<"$SCENARIOS"

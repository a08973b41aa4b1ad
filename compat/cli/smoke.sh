#!/usr/bin/env bash
# The real CLI (`iggy-cli` 0.14.1-edge.7, dialect 0.12.2) against the real server binary: ping,
# create a stream and a topic, send messages with a header, poll them back, read stats.
#
# The server binary is IGGY_SERVER_BIN, else target/release/iggy, else target/debug/iggy. The
# CLI is IGGY_CLI_BIN, else ~/.cargo/bin/iggy; install it with
#   cargo install iggy-cli --version 0.14.1-edge.7 --locked
# (both binaries are named `iggy`, hence the explicit paths). The server listens on a free
# loopback port with a temporary data directory, and is stopped on exit. Every step is bounded.
set -euo pipefail

repository="$(cd "$(dirname "$0")/../.." && pwd)"
cli_version="0.14.1-edge.7"

server="${IGGY_SERVER_BIN:-}"
if [ -z "$server" ]; then
    for candidate in "$repository/target/release/iggy" "$repository/target/debug/iggy"; do
        if [ -x "$candidate" ]; then server="$candidate"; break; fi
    done
fi
if [ -z "$server" ] || [ ! -x "$server" ]; then
    echo "no server binary: set IGGY_SERVER_BIN or run 'cargo build --release --bin iggy'" >&2
    exit 1
fi
cli="${IGGY_CLI_BIN:-$HOME/.cargo/bin/iggy}"
if [ ! -x "$cli" ] || ! "$cli" --version 2>/dev/null | grep -q "$cli_version"; then
    echo "no iggy-cli $cli_version at $cli: set IGGY_CLI_BIN or run" >&2
    echo "  cargo install iggy-cli --version $cli_version --locked" >&2
    exit 1
fi

work="$(mktemp -d -t iggy-cli-smoke-XXXXXX)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
address="127.0.0.1:$port"
server_pid=""
cleanup() {
    status=$?
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    if [ "$status" -ne 0 ]; then
        echo "--- server log ---" >&2
        tail -n 40 "$work/server.log" >&2 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

IGGY_TCP_ADDRESS="$address" IGGY_SYSTEM_PATH="$work/data" \
    "$server" --fresh --with-default-root-credentials >"$work/server.log" 2>&1 &
server_pid=$!
for attempt in $(seq 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    if ! kill -0 "$server_pid" 2>/dev/null; then echo "server exited during start-up" >&2; exit 1; fi
    if [ "$attempt" -eq 200 ]; then echo "server did not accept within 10 s" >&2; exit 1; fi
    sleep 0.05
done

# The CLI keeps contexts and sessions under IGGY_HOME; keep them out of the user's home.
export IGGY_HOME="$work/cli-home"
iggy() {
    timeout 30 "$cli" --tcp-server-address "$address" --username iggy --password iggy "$@"
}
expect() {
    local pattern="$1" output="$2"
    if ! grep -q -- "$pattern" <<<"$output"; then
        echo "expected '$pattern' in:" >&2
        echo "$output" >&2
        exit 1
    fi
}

iggy ping
iggy me
iggy stream create cli-stream
expect "cli-stream" "$(iggy stream list)"
iggy topic create cli-stream cli-topic 2 none
expect "cli-topic" "$(iggy topic list cli-stream)"
iggy message send --partition-id 1 -H "origin:string:cli" cli-stream cli-topic one two three
polled="$(iggy message poll --offset 0 --message-count 3 --show-headers cli-stream cli-topic 1)"
for payload in one two three; do expect "$payload" "$polled"; done
expect "origin" "$polled"
next="$(iggy message poll --next --auto-commit --message-count 2 --consumer cli-reader cli-stream cli-topic 1)"
expect "one" "$next"
next="$(iggy message poll --next --auto-commit --message-count 2 --consumer cli-reader cli-stream cli-topic 1)"
expect "three" "$next"
expect "cli-stream" "$(iggy stream get cli-stream)"
iggy stats >/dev/null
iggy topic delete cli-stream cli-topic
iggy stream delete cli-stream
echo "iggy-cli $cli_version: stream, topic, send and poll work against $server"

"""The Python SDK `apache-iggy==0.9.0` (protocol 0.11.0) against the real `iggy` server binary.

Starts the server on free loopback ports with a temporary data directory and
`--with-default-root-credentials`, then, over TCP, WebSocket and QUIC in turn, logs in, creates a
stream and a topic, sends 1000 messages and polls them back. The server binary is
`IGGY_SERVER_BIN`, else the repository's `target/release/iggy`, else `target/debug/iggy`. Run
it with `compat/python/run.sh`, which makes the virtual environment under `.venv`.
"""

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from apache_iggy import IggyClient, PollingStrategy, QuicConfig, SendMessage, WebSocketConfig
from apache_iggy import Consumer

REPOSITORY = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 10
STOP_TIMEOUT_S = 10
TEST_TIMEOUT_S = 120
MESSAGES = 1000
STREAM = "python-stream"
TOPIC = "python-topic"


def server_binary() -> Path:
    explicit = os.environ.get("IGGY_SERVER_BIN")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            sys.exit(f"IGGY_SERVER_BIN={path} is not a file")
        return path
    candidates = [REPOSITORY / "target/release/iggy", REPOSITORY / "target/debug/iggy"]
    for path in candidates:
        if path.is_file():
            return path
    sys.exit(
        "no server binary: set IGGY_SERVER_BIN or build it with "
        f"`cargo build --release --bin iggy` (tried {[str(p) for p in candidates]})"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_accepting(process: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"server exited during start-up with {process.returncode}\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.025)
    process.kill()
    sys.exit(f"server did not accept on port {port} within {START_TIMEOUT_S} s\n{log.read_text()}")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def exercise(client: IggyClient) -> None:
    await client.connect()
    await client.ping()
    await client.login_user("iggy", "iggy")

    await client.create_stream(STREAM)
    stream = await client.get_stream(STREAM)
    assert stream is not None, "the stream exists"
    await client.create_topic(STREAM, TOPIC, partitions_count=2)
    topic = await client.get_topic(STREAM, TOPIC)
    assert topic is not None, "the topic exists"
    assert topic.partitions_count == 2, topic.partitions_count

    for start in range(0, MESSAGES, 100):
        batch = [SendMessage(f"message-{index}") for index in range(start, start + 100)]
        await client.send_messages(STREAM, TOPIC, 1, batch)

    received = []
    consumer = Consumer.Single("python-consumer")
    for _ in range(100):
        if len(received) >= MESSAGES:
            break
        polled = await client.poll_messages(
            STREAM,
            TOPIC,
            consumer=consumer,
            polling_strategy=PollingStrategy.Offset(len(received)),
            count=300,
            auto_commit=False,
            partition_id=1,
        )
        received.extend(polled)
    assert len(received) == MESSAGES, f"polled {len(received)} of {MESSAGES}"
    for index, message in enumerate(received):
        assert message.offset() == index, (index, message.offset())
        assert message.payload() == f"message-{index}".encode(), (index, message.payload())

    # Next with auto-commit resumes after what was read.
    first = await client.poll_messages(
        STREAM, TOPIC, consumer=Consumer.Single("committer"),
        polling_strategy=PollingStrategy.Next(), count=10, auto_commit=True, partition_id=1,
    )
    second = await client.poll_messages(
        STREAM, TOPIC, consumer=Consumer.Single("committer"),
        polling_strategy=PollingStrategy.Next(), count=10, auto_commit=True, partition_id=1,
    )
    assert [m.offset() for m in first] == list(range(10)), [m.offset() for m in first]
    assert [m.offset() for m in second] == list(range(10, 20)), [m.offset() for m in second]

    await client.delete_stream(STREAM)
    assert await client.get_stream(STREAM) is None, "the stream is gone"


def main() -> None:
    binary = server_binary()
    port = free_port()
    websocket_port = free_port()
    quic_port = free_port()
    with tempfile.TemporaryDirectory(prefix="iggy-python-") as data:
        log = Path(data).with_suffix(".log")
        env = dict(
            os.environ,
            IGGY_TCP_ADDRESS=f"127.0.0.1:{port}",
            IGGY_WEBSOCKET_ADDRESS=f"127.0.0.1:{websocket_port}",
            IGGY_QUIC_ADDRESS=f"127.0.0.1:{quic_port}",
            IGGY_SYSTEM_PATH=data,
        )
        with open(log, "wb") as log_file:
            process = subprocess.Popen(
                [str(binary), "--fresh", "--with-default-root-credentials"],
                env=env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file,
            )
        try:
            wait_until_accepting(process, port, log)
            tcp = IggyClient(f"127.0.0.1:{port}")
            asyncio.run(asyncio.wait_for(exercise(tcp), TEST_TIMEOUT_S))
            websocket = IggyClient(WebSocketConfig(server_address=f"127.0.0.1:{websocket_port}"))
            asyncio.run(asyncio.wait_for(exercise(websocket), TEST_TIMEOUT_S))
            # The server's self-signed certificate: the SDK's QUIC client does not validate
            # by default.
            quic = IggyClient(QuicConfig(server_address=f"127.0.0.1:{quic_port}"))
            asyncio.run(asyncio.wait_for(exercise(quic), TEST_TIMEOUT_S))
        except BaseException:
            print(log.read_text(errors="replace")[-8000:], file=sys.stderr)
            raise
        finally:
            stop(process)
            log.unlink(missing_ok=True)
    transports = "TCP, WebSocket and QUIC"
    print(f"python apache-iggy 0.9.0: {MESSAGES} messages sent and polled back over {transports}")


if __name__ == "__main__":
    main()

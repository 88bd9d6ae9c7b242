"""Kafka stopped for longer than the session timeout: what the sidecar says meanwhile.

Issue 25 item 3. Before: 36-40 ERROR and 20-22 WARNING lines a second for as long as
the broker was away (every reconnect of every client, twice), hundreds more flushed
after it, and ``/readyz`` 200 throughout. Now, as an operator runs it (``delaybridge
run``, its log file, its HTTP port): one line when Kafka goes, a summary every 30 s,
one line when it is back; ``delaybridge_kafka_reachable`` 0 and ``/readyz`` 503 naming
Kafka meanwhile, ``/healthz`` 200 throughout.

The broker is the test's own (a LocalKafka on free ports), stopped with SIGTERM and
started again on the same data and ports: the session's shared broker never stops. The
group session (10 s) expires during the outage (35 s, so that one summary is due).
test_kafka_outage.py runs the same outage under load for what is delivered, and bounds
the log lines there too.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from delaybridge.connectors.localkafka import LocalKafka
from tests.http_client import Client
from tests.integration.sidecar.harness import SubprocessSidecar, Topics, settings_for
from tests.kafka_cluster import KafkaCluster
from tests.support import free_port, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

OUTAGE_S = 35.0
SESSION_TIMEOUT_MS = 10_000
PARTITIONS = 2
#: A log line of `delaybridge run`: time, level, logger, message.
LINE = re.compile(r"^\S+ (\S+) (\w+) ([\w.]+): (.*)$")
TRACKER = "delaybridge.connectors.reachability.tracker"
CLIENTS = "delaybridge.connectors.kafka"


def readyz(http: Client) -> tuple[int, str]:
    reply = http("GET", "/readyz")
    return reply.status, str(reply.json().get("reason", ""))


def reachable(http: Client) -> float:
    """1 when every worker process of the pod finds Kafka reachable, else 0."""
    text = http("GET", "/metrics").body.decode()
    values = re.findall(r"^delaybridge_kafka_reachable(?:\{[^}]*\})? (\S+)$", text, re.MULTILINE)
    assert values, "no delaybridge_kafka_reachable series"
    return min(float(v) for v in values)


def test_a_stopped_broker_is_one_line_a_summary_and_one_line_back(
    own_broker: KafkaCluster, tmp_path: Path
) -> None:
    broker = own_broker.handle
    assert isinstance(broker, LocalKafka)
    topics = Topics(
        delay=own_broker.create_topic("delay", partitions=PARTITIONS),
        targets=[own_broker.create_topic("orders")],
        dead_letter=own_broker.create_topic("dlt"),
        cancels=own_broker.create_topic("cancels"),
    )
    port = free_port()
    settings = settings_for(
        own_broker.bootstrap_servers,
        topics,
        tmp_path / "data",
        f"g-{topics.delay}",
        kafka={"session_timeout_ms": SESSION_TIMEOUT_MS},
        http={"port": port},
    )
    side = SubprocessSidecar(settings, tmp_path)
    side.start()
    http = Client(port)
    try:
        wait_until(lambda: side_ready(side, http), 90, "the sidecar ready", detail=side.tail)

        before = side.log.stat().st_size
        stopped = time.monotonic()
        broker.stop(timeout_s=30)
        wait_until(
            lambda: "Kafka unreachable for " in readyz(http)[1],  # each worker's reason
            20,
            "/readyz to name Kafka",
            detail=side.tail,
        )
        assert readyz(http)[0] == 503
        assert reachable(http) == 0

        def outage_over() -> bool:
            assert http("GET", "/healthz").status == 200  # liveness: the process is fine
            return time.monotonic() - stopped >= OUTAGE_S

        wait_until(outage_over, OUTAGE_S + 10, "the outage's end", interval_s=1)

        broker.start(timeout_s=120, progress=False)
        wait_until(lambda: side_ready(side, http), 60, "ready again", detail=side.tail)
        assert reachable(http) == 1
        away = log_lines(side.log, before)
    finally:
        assert side.terminate(60) == 0, side.tail()

    lines = [f"{level} {name}: {text}" for level, name, text in away]
    shown = "\n".join(lines)
    by_tracker = [text for _, name, text in away if name == TRACKER]
    states = [t for t in by_tracker if t.startswith("Kafka unreachable: ")]
    summaries = [t for t in by_tracker if t.startswith("Kafka still unreachable after ")]
    backs = [t for t in by_tracker if t.startswith("Kafka reachable again after ")]
    assert len(states) == 1 and len(backs) == 1, shown
    assert by_tracker == [states[0], *summaries, backs[0]], shown
    away_s = int(re.findall(r"again after (\d+) s", backs[0])[0])
    assert away_s >= OUTAGE_S - 5, shown
    assert 1 <= len(summaries) <= away_s // 30, shown
    # Not one client line between the state line and the one that says it is back; at
    # most a first line of a kind or two before the outage was confirmed.
    first = lines.index(f"ERROR {TRACKER}: {states[0]}")
    last = lines.index(f"INFO {TRACKER}: {backs[0]}")
    assert [line for line in lines[first:last] if f" {CLIENTS}: " in line] == [], shown
    assert sum(f" {CLIENTS}: " in line for line in lines[:first]) <= 2, shown
    # Everything else says a state once: the group session lost, partitions released
    # and assigned again (each partition at most a few times), never a line per retry.
    assert len(lines) <= len(by_tracker) + 2 + 4 * PARTITIONS, shown


def side_ready(side: SubprocessSidecar, http: Client) -> bool:
    assert side.proc is not None and side.proc.poll() is None, side.tail()
    try:
        return readyz(http)[0] == 200
    except OSError:  # not listening yet
        return False


def log_lines(log: Path, start: int) -> list[tuple[str, str, str]]:
    """(level, logger, message) of every line the sidecar logged from byte ``start`` to
    its line saying Kafka is back (included)."""
    out = []
    with log.open("rb") as f:
        f.seek(start)
        for raw in f.read().decode(errors="replace").splitlines():
            found = LINE.match(raw)
            if found is None:  # a continuation (a traceback) or a plain print
                continue
            _time, level, name, text = found.groups()
            out.append((level, name, text))
            if name == TRACKER and text.startswith("Kafka reachable again after "):
                break
    return out

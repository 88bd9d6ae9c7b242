"""The local broker for real: start it, use it, kill it, see a clear failure, restart it.

Runs its own LocalKafka on free ports in a temporary data dir (not the session
fixture), since killing the broker is the point. Jars come from the shared
cache (``$DELAYBRIDGE_CACHE_DIR`` or ~/.cache/delaybridge/jars).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from delaybridge.connectors.localkafka import (
    BrokerStartError,
    BrokerState,
    LocalKafka,
    StartOutcome,
)
from delaybridge.connectors.localkafka.probe import consume_at, ensure_topic, produce
from delaybridge.errors import KafkaError
from tests.support import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[LocalKafka]:
    kafka = LocalKafka(tmp_path / "kafka", port=free_port(), controller_port=free_port())
    try:
        yield kafka
    finally:
        kafka.stop(timeout_s=20)


def test_start_use_kill_fail_fast_restart(broker: LocalKafka) -> None:
    assert broker.start(timeout_s=120) is StartOutcome.STARTED
    status = broker.status()
    assert status.state is BrokerState.RUNNING and status.listening
    assert status.bootstrap == broker.bootstrap
    assert broker.start(timeout_s=10) is StartOutcome.ALREADY_RUNNING

    topic = f"it-local-{uuid.uuid4().hex[:8]}"
    ensure_topic(broker.bootstrap, topic, timeout_s=10)
    partition, offset = produce(broker.bootstrap, topic, b"before the crash", timeout_s=10)
    assert consume_at(broker.bootstrap, topic, partition, offset, timeout_s=10) == (
        b"before the crash"
    )

    broker.kill()
    assert broker.status().state is BrokerState.STOPPED

    started = time.monotonic()
    with pytest.raises(KafkaError) as caught:
        produce(broker.bootstrap, topic, b"into the void", timeout_s=3)
    elapsed_s = time.monotonic() - started
    assert elapsed_s < 10, f"produce to a dead broker took {elapsed_s:.1f} s to fail"
    assert caught.value.code in ("_MSG_TIMED_OUT", "_TRANSPORT", "_TIMED_OUT")
    assert topic in str(caught.value) and broker.bootstrap in str(caught.value)

    # The data dir survives a SIGKILL: the broker restarts on it and the
    # acknowledged record is still there.
    assert broker.start(timeout_s=120) is StartOutcome.STARTED
    assert consume_at(broker.bootstrap, topic, partition, offset, timeout_s=10) == (
        b"before the crash"
    )
    assert broker.stop(timeout_s=20) is True
    assert broker.status().state is BrokerState.STOPPED


def test_failed_start_quotes_the_jvm_output_and_leaves_nothing_running(tmp_path: Path) -> None:
    # -Xmx8m is below the fixed -Xms128m: the JVM refuses to start at all.
    kafka = LocalKafka(tmp_path / "kafka", port=free_port(), controller_port=free_port(), heap_mb=8)
    with pytest.raises(BrokerStartError) as caught:
        kafka.start(timeout_s=60)
    message = str(caught.value)
    assert "exited during startup" in message
    assert "stdout.log" in message and "Initial heap size" in message
    assert kafka.status().state is BrokerState.STOPPED
    assert not kafka.layout.pid_file.exists()


def test_start_timeout_kills_the_half_started_broker(tmp_path: Path) -> None:
    kafka = LocalKafka(tmp_path / "kafka", port=free_port(), controller_port=free_port())
    with pytest.raises(BrokerStartError, match=r"did not open 127\.0\.0\.1:\d+ within 0 s"):
        kafka.start(timeout_s=0.2)  # far too short for a JVM: the timeout path
    assert kafka.status().state is BrokerState.STOPPED
    assert not kafka.layout.pid_file.exists()
    assert jvms_using(kafka.layout.server_properties) == []


def jvms_using(server_properties: Path) -> list[int]:
    """Pids of live processes whose command line names ``server_properties``."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process exited while we looked: not a survivor
            continue
        if str(server_properties) in text:
            pids.append(int(cmdline.parent.name))
    return pids

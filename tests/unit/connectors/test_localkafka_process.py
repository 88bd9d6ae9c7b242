"""Process bookkeeping and the checks LocalKafka makes before it launches a JVM."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from delaybridge.connectors.localkafka import (
    BrokerState,
    LocalKafka,
    LocalKafkaError,
    PortInUseError,
    default_cache_dir,
    default_data_dir,
    process,
)
from delaybridge.connectors.localkafka.probe import port_accepts, port_free


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that some other program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def sleeper(tmp_path: Path, marker: str) -> int:
    # A real detached child whose command line carries the marker.
    code = f"import time; time.sleep(120)  # {marker}"
    return process.spawn_detached(
        [sys.executable, "-c", code], output=tmp_path / "out.log", cwd=tmp_path
    )


def test_spawned_process_is_found_by_marker_and_stopped(tmp_path: Path) -> None:
    pid = sleeper(tmp_path, "marker-123")
    assert process.is_running(pid, "marker-123")
    assert not process.is_running(pid, "some-other-data-dir"), "a reused pid must not match"
    assert process.stop(pid, timeout_s=10) is False  # SIGTERM was enough
    assert not process.is_alive(pid), "the dead child must be reaped"
    assert not process.is_running(pid, "marker-123")


def test_kill_is_immediate(tmp_path: Path) -> None:
    pid = sleeper(tmp_path, "marker-kill")
    process.kill(pid, timeout_s=10)
    assert not process.is_alive(pid)


def test_pid_file_round_trip_and_garbage(tmp_path: Path) -> None:
    pid_file = tmp_path / "kafka.pid"
    assert process.read_pid(pid_file) is None
    process.write_pid(pid_file, 4242)
    assert process.read_pid(pid_file) == 4242
    pid_file.write_text("not a pid")
    with pytest.raises(ValueError, match=r"kafka\.pid: expected a process id"):
        process.read_pid(pid_file)


def test_ports(listener: int) -> None:
    assert port_accepts("127.0.0.1", listener)
    assert not port_free("127.0.0.1", listener)


def test_port_in_use_is_refused_before_anything_else(tmp_path: Path, listener: int) -> None:
    kafka = LocalKafka(
        tmp_path / "data", port=listener, controller_port=listener, cache_dir=tmp_path / "cache"
    )
    with pytest.raises(PortInUseError, match=f"127.0.0.1:{listener} is in use.*--port"):
        kafka.start(timeout_s=5)
    assert not (tmp_path / "cache").exists(), "nothing may be fetched for a start that cannot work"


def test_stale_pid_file_reads_as_stopped(tmp_path: Path) -> None:
    kafka = LocalKafka(tmp_path)
    pid = sleeper(tmp_path, "unrelated")  # alive, but not this data dir's broker
    process.write_pid(kafka.layout.pid_file, pid)
    try:
        status = kafka.status()
        assert status.state is BrokerState.STOPPED
        assert "stopped" in status.describe()
        assert kafka.stop() is False
        assert not kafka.layout.pid_file.exists()
        with pytest.raises(LocalKafkaError, match="no broker runs from"):
            kafka.kill()
        assert process.is_running(pid, "unrelated"), "an unrelated process must not be signalled"
    finally:
        process.kill(pid, timeout_s=10)


def test_default_dirs_follow_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DELAYBRIDGE_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("DELAYBRIDGE_HOME", str(tmp_path / "h"))
    assert default_cache_dir() == tmp_path / "c"
    assert default_data_dir() == tmp_path / "h" / "kafka"
    monkeypatch.delenv("DELAYBRIDGE_CACHE_DIR")
    monkeypatch.delenv("DELAYBRIDGE_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xc"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xs"))
    assert default_cache_dir() == tmp_path / "xc" / "delaybridge" / "jars"
    assert default_data_dir() == tmp_path / "xs" / "delaybridge" / "kafka"


def test_exclusive_makes_a_second_holder_wait(tmp_path: Path) -> None:
    lock = tmp_path / "data" / "kafka.lock"
    order: list[str] = []
    second_waiting = threading.Event()

    def second() -> None:
        second_waiting.set()
        with process.exclusive(lock):
            order.append("second")

    with process.exclusive(lock):
        thread = threading.Thread(target=second)
        thread.start()
        assert second_waiting.wait(timeout=10)
        # The second holder is blocked in flock: it cannot have appended yet.
        assert not process.wait_until(lambda: bool(order), timeout_s=0.3)
        order.append("first")
    thread.join(timeout=10)
    assert order == ["first", "second"]

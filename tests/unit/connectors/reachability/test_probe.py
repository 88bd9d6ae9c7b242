"""The listener probe: a TCP connect to each bootstrap server, off the caller's thread."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from delaybridge.connectors.reachability.probe import (
    ListenerCheck,
    TcpListenerProbe,
    bootstrap_addresses,
)
from delaybridge.errors import ConfigError


@pytest.fixture
def listener() -> Iterator[int]:
    """A port something listens on (the kernel completes handshakes into the backlog)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on: bound and released, so connects are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_bootstrap_servers_as_librdkafka_takes_them() -> None:
    assert bootstrap_addresses("a:9092, b:9093,SSL://c:9094 d") == [
        ("a", 9092),
        ("b", 9093),
        ("c", 9094),
        ("d", 9092),
    ]
    assert bootstrap_addresses("[::1]:19092,[fe80::1]") == [("::1", 19092), ("fe80::1", 9092)]
    with pytest.raises(ConfigError, match="no bootstrap server"):
        bootstrap_addresses(" , ")
    with pytest.raises(ConfigError, match="port 'x' is not a number"):
        bootstrap_addresses("a:x")


def test_the_first_server_that_accepts_answers(listener: int, closed_port: int) -> None:
    probe = TcpListenerProbe(f"127.0.0.1:{closed_port},127.0.0.1:{listener}")
    found = probe.begin().result(timeout=10)
    assert found == ListenerCheck(
        f"127.0.0.1:{listener}", (f"127.0.0.1:{closed_port}: Connection refused",)
    )
    assert found.listening


def test_none_accepting_names_each_server_and_why(closed_port: int) -> None:
    probe = TcpListenerProbe(f"127.0.0.1:{closed_port},no-such-host.invalid:9092")
    found = probe.begin().result(timeout=30)
    assert not found.listening
    refused, unresolved = found.failures
    assert refused == f"127.0.0.1:{closed_port}: Connection refused"
    assert unresolved.startswith("no-such-host.invalid:9092: ")
    assert found.describe() == f"{refused}; {unresolved}"

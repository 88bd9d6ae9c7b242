"""The shared test helpers: wait_until fails naming what it waited for; free_port is free."""

from __future__ import annotations

import itertools
import socket

import pytest

from tests.support import free_port, wait_until


def test_wait_until_returns_the_first_truthy_value() -> None:
    calls = itertools.count(1)
    assert wait_until(lambda: next(calls) >= 3 and "ready", 5, "the third call") == "ready"


def test_wait_until_times_out_naming_what_and_the_detail() -> None:
    with pytest.raises(TimeoutError, match=r"waiting for a condition that never holds\nlog tail"):
        wait_until(lambda: False, 0.1, "a condition that never holds", detail=lambda: "log tail")


def test_wait_until_retries_only_the_exceptions_it_is_told_to() -> None:
    def refused() -> bool:
        raise ConnectionRefusedError("not yet")

    with pytest.raises(TimeoutError, match="last error: ConnectionRefusedError") as info:
        wait_until(refused, 0.1, "a server", retry_on=(OSError,))
    assert isinstance(info.value.__cause__, ConnectionRefusedError)
    with pytest.raises(ConnectionRefusedError):  # not retried: fails at once
        wait_until(refused, 60, "a server")


def test_free_port_can_be_bound() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))

"""Helpers every test may import: one way to wait on a condition, one way to pick a port,
one way to lay a test's settings over a base.

Tests wait on conditions, never on sleeps: :func:`wait_until` polls a condition until it
holds and fails with a :class:`TimeoutError` that says what it waited for (plus any
detail the caller adds, such as a log tail). Helpers live here rather than in a
``conftest.py`` so they are imported like any module (``from tests.support import ...``).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    timeout_s: float,
    what: str,
    *,
    interval_s: float = 0.05,
    retry_on: tuple[type[Exception], ...] = (),
    detail: Callable[[], str] | None = None,
) -> T:
    """Call ``condition`` until it returns something truthy; return that value.

    ``condition`` is called at least once, and once more after the deadline before
    this gives up. An exception of a ``retry_on`` type counts as "not yet"; any other propagates at
    once (so a condition can fail fast, e.g. when the process it waits for died).
    After ``timeout_s`` raises :class:`TimeoutError` naming ``what``, the last retried
    exception (chained) and ``detail()``, if given. ``interval_s`` is the pause
    between calls; 0 suits conditions that block on their own (a consumer poll).
    """
    deadline = time.monotonic() + timeout_s
    last_exc: Exception | None = None
    while True:
        try:
            result = condition()
            if result:
                return result
        except retry_on as exc:
            last_exc = exc
        if time.monotonic() >= deadline:
            message = f"timed out after {timeout_s:g} s waiting for {what}"
            if last_exc is not None:
                message += f" (last error: {last_exc!r})"
            if detail is not None:
                message += f"\n{detail()}"
            raise TimeoutError(message) from last_exc
        time.sleep(interval_s)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def overlay(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` laid over it, one level deep: a dict given for a section
    that is a dict in ``base`` (``store={"tick_ms": 10}``) changes only the keys it names;
    anything else replaces the value. ``base`` is left as it was."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged

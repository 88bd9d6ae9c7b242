"""Cancels are counted once: matched, or unknown, never both."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from delaybridge.bridge.cancels.ledger import CancelLedger
from delaybridge.bridge.cancels.requests import CancelRequest
from delaybridge.bridge.observe.tally import Tally
from delaybridge.timerlog import Cancel


class _Store:
    def __init__(self, pending: set[str]) -> None:
        self.pending = pending

    def cancel(self, cancels: Sequence[Cancel]) -> list[bool]:
        out = [c.id in self.pending for c in cancels]
        self.pending -= {c.id for c in cancels}
        return out


class _Part:
    origin_prefix = "delay/0/"

    def __init__(self, pending: set[str]) -> None:
        self.store = _Store(pending)


def _counts(tally: Tally) -> tuple[int, int]:
    drained = tally.drain()
    return drained.cancelled, drained.cancel_unknown


def test_matched_then_echoed_is_not_unknown() -> None:
    tally = Tally()
    ledger = CancelLedger(grace_ms=1_000, tally=tally)
    parts = cast(Any, [_Part({"a"}), _Part({"b"})])
    req = CancelRequest("a", None, "admin-api")
    assert ledger.apply(parts, [req], now_ms=0) == [True]
    assert ledger.apply(parts, [req], now_ms=10) == [False]  # the echo from the feed
    assert _counts(tally) == (1, 0)
    assert ledger.apply(parts, [CancelRequest("zz", None, "x")], now_ms=20) == [False]
    assert _counts(tally) == (0, 1)
    # After the grace period an old id is forgotten: a late echo counts as unknown.
    ledger.apply(parts, [req], now_ms=5_000)
    assert _counts(tally) == (0, 1)

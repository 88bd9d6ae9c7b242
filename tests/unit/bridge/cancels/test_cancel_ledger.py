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


class _CountingStore(_Store):
    def __init__(self, pending: set[str]) -> None:
        super().__init__(pending)
        self.asked: list[str] = []

    def cancel(self, cancels: Sequence[Cancel]) -> list[bool]:
        self.asked += [c.id for c in cancels]
        return super().cancel(cancels)


class _CountingPart:
    origin_prefix = "delay/0/"

    def __init__(self, pending: set[str]) -> None:
        self.store = _CountingStore(pending)


def test_what_was_applied_here_is_not_applied_again_when_read_back() -> None:
    # Ingest applies the cancels and replaces it publishes to this process's stores at
    # once; the feed then reads them back from the cancel topic. The stores that had them
    # are not asked again (the second pass found nothing and cost a lookup per store);
    # a store opened in between is.
    ledger = CancelLedger(grace_ms=1_000, tally=Tally())
    a, b = _CountingPart({"x"}), _CountingPart(set())
    req = CancelRequest("x", None, "delay/0/7", sent_ms=5)
    assert ledger.apply_here(cast(Any, [a]), [req], now_ms=0) == [True]
    later = _CountingPart({"x"})  # a partition that moved in before the read-back
    assert ledger.apply(cast(Any, [a, later]), [req], now_ms=10) == [True]
    assert (a.store.asked, later.store.asked, b.store.asked) == (["x"], ["x"], [])
    # Read back a second time (published again after a handover): applied as usual.
    ledger.apply(cast(Any, [a]), [req], now_ms=20)
    assert a.store.asked == ["x", "x"]


def test_a_cancel_applied_here_is_counted_once() -> None:
    # Matched nowhere here (its message is another process's): unknown once, not once
    # more when the feed reads it back.
    tally = Tally()
    ledger = CancelLedger(grace_ms=1_000, tally=tally)
    parts = cast(Any, [_Part(set())])
    req = CancelRequest("elsewhere", None, "delay/0/9", sent_ms=5)
    ledger.apply_here(parts, [req], now_ms=0)
    ledger.apply(parts, [req], now_ms=10)
    assert _counts(tally) == (0, 1)

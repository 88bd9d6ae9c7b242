"""The cancel book's waiting cancels expire without a pass over all of them.

Issue 13's shop case keeps ~42,000 cancels waiting (700 cancels/s x a 60 s grace), and
``expire`` runs on every cancel call, flush and stats read: a pass over every waiting
cancel there was 44 % of the sidecar's time (py-spy, docs/benchmarks.md).
"""

from __future__ import annotations

import time
from pathlib import Path

from delaybridge.timerlog.cancels import CancelBook
from delaybridge.timerlog.records import Cancel
from tests.unit.timerlog.support import START_MS, rec


def book(directory: Path) -> CancelBook:
    directory.mkdir()
    b = CancelBook(directory)
    b.open(0, 0, 0)
    return b


def test_expire_costs_nothing_while_nothing_expires(tmp_path: Path) -> None:
    b = book(tmp_path / "big")
    for i in range(100_000):
        b.wait(Cancel(f"id-{i}", None, START_MS), START_MS + 60_000 + i, False)
    start = time.process_time()
    for ms in range(200):
        assert b.expire(START_MS + ms) == 0
    # A pass over 100,000 waiting cancels per call took ~20-50 ms each: 4-10 s here.
    assert time.process_time() - start < 0.2
    assert b.waiting_count() == 100_000
    b.close()


def test_expire_resolves_in_time_order_and_counts_unknowns(tmp_path: Path) -> None:
    b = book(tmp_path / "b")
    b.wait(Cancel("a", None, START_MS), START_MS + 300, False)
    b.wait(Cancel("b", None, START_MS), START_MS + 100, True)
    b.wait(Cancel("a", None, START_MS + 5), START_MS + 200, False)
    b.wait(Cancel("c", None), START_MS + 150, False)  # no send time: ends at a match
    assert b.match(rec("c", START_MS, offset=1))
    assert b.waiting_count() == 3
    assert b.expire(START_MS + 99) == 0
    assert b.expire(START_MS + 200) == 1  # "b" matched, the later "a" never did
    assert set(b.waiting) == {"a"} and b.waiting_count() == 1
    assert b.expire(START_MS + 300) == 1
    assert not b.waiting and b.waiting_count() == 0
    b.close()


def test_waiting_cancels_expire_after_compaction_and_reopen(tmp_path: Path) -> None:
    b = book(tmp_path / "c")
    b.wait(Cancel("a", None, START_MS), START_MS + 100, False)
    b.wait(Cancel("b", None, START_MS), START_MS + 200, False)
    b.sync()
    b.compact()
    b.drop_old()
    assert b.expire(START_MS + 100) == 1
    b.sync()
    generation, end = b.generation, b.end
    b.close()
    again = CancelBook(tmp_path / "c")
    again.open(generation, end, 0)
    assert again.waiting_count() == 1
    assert again.expire(START_MS + 200) == 1 and again.waiting_count() == 0
    again.close()

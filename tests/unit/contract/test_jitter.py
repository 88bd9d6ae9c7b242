"""``delay-jitter`` (contract/jitter.py): later by a hash of the id, never earlier, the
same on every replay, uniform over the window, refused where it cannot apply."""

from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Message
from hypothesis import given
from hypothesis import strategies as st

from delaybridge.contract.classify import (
    Rejected,
    Schedule,
    SourceRecord,
    classify,
    ingest_batch,
)
from delaybridge.contract.jitter import MAX_JITTER_MS, spread_ms
from delaybridge.contract.reasons import Reason
from delaybridge.contract.rules import HeaderRules
from delaybridge.settings import DEFAULT_DELAY_LEVELS

# Once per implementation of the hot path: pure Python, and compiled where built.
pytestmark = pytest.mark.usefixtures("hot_impl")

TS = 1_700_000_000_000
RULES = HeaderRules.from_strings(
    DEFAULT_DELAY_LEVELS, max_delay_ms=365 * 86_400_000, delay_topics=("delay",)
)
TARGET = ("delay-target-topic", "orders")


def decide(*headers: tuple[str, str], offset: int = 42) -> Schedule | Rejected:
    hs = tuple((n, v.encode()) for n, v in headers)
    decision = classify(SourceRecord("delay", 0, offset, TS, b"k", b"v", hs), RULES)
    assert isinstance(decision, Schedule | Rejected), decision
    return decision


def due_of(*headers: tuple[str, str], offset: int = 42) -> int:
    decision = decide(*headers, offset=offset)
    assert isinstance(decision, Schedule), decision
    return decision.due_ms


@given(
    id=st.text(min_size=1, max_size=60).filter(lambda s: s.strip() == s and s.strip()),
    delay_ms=st.integers(min_value=0, max_value=10**9),
    jitter_ms=st.integers(min_value=1, max_value=MAX_JITTER_MS),
)
def test_never_early_never_past_the_window_and_the_same_for_the_same_id(
    id: str, delay_ms: int, jitter_ms: int
) -> None:
    headers = (TARGET, ("delay-ms", str(delay_ms)), ("delay-id", id))
    plain = due_of(*headers)
    jittered = due_of(*headers, ("delay-jitter", str(jitter_ms)))
    assert plain <= jittered < plain + jitter_ms
    # a replay (another offset, the same id) and a standby's restore compute the same
    assert due_of(*headers, ("delay-jitter", str(jitter_ms)), offset=7) == jittered
    assert jittered - plain == spread_ms(id, jitter_ms)


def test_a_herd_of_100k_fills_each_second_of_a_10s_window_with_10_percent() -> None:
    # Issue 27's acceptance: every 1-s bucket of the 10 s holds 10 % +- 2 %.
    n = 100_000
    buckets = Counter(spread_ms(f"order-{i:06d}", 10_000) // 1_000 for i in range(n))
    assert sorted(buckets) == list(range(10))
    shares = {b: count / n for b, count in sorted(buckets.items())}
    assert all(0.08 <= share <= 0.12 for share in shares.values()), shares


def test_without_an_id_the_records_own_id_spreads_it_the_same_on_replay() -> None:
    headers = (TARGET, ("delay-ms", "1000"), ("delay-jitter", "1h"))
    first = due_of(*headers, offset=5)
    assert first == due_of(*headers, offset=5)
    assert first - (TS + 1000) == spread_ms("delay-0-5", 3_600_000)


def test_the_stored_record_carries_the_jittered_due_and_not_the_header() -> None:
    headers = (TARGET, ("delay-ms", "1000"), ("delay-id", "x"), ("delay-jitter", "30s"), ("a", "b"))
    decision = decide(*headers)
    assert isinstance(decision, Schedule)
    assert decision.due_ms == TS + 1000 + spread_ms("x", 30_000)
    assert [name for name, _ in decision.headers] == ["a"]


def test_the_batch_path_agrees_with_classify() -> None:
    headers = [TARGET, ("delay-ms", "500"), ("delay-id", "y"), ("delay-jitter", "1m30s")]
    encoded: list[tuple[str, str | bytes | None]] = [(n, v.encode()) for n, v in headers]
    msg = Message(
        topic="delay",
        partition=0,
        offset=9,
        key=b"k",
        value=b"v",
        headers=encoded,
        timestamp=(TIMESTAMP_CREATE_TIME, TS),
    )
    plan = ingest_batch([msg], RULES, TS, lambda key: -1)
    (stored,) = plan.runs[("delay", 0)][0]
    assert stored.due_ms == due_of(*headers) == TS + 500 + spread_ms("y", 90_000)


@pytest.mark.parametrize(
    ("jitter", "reason", "says"),
    [
        ("soon", Reason.BAD_TIME, "delay-jitter: expected an interval"),
        ("-5s", Reason.BAD_TIME, "delay-jitter"),
        ("2d", Reason.BAD_TIME, "more than the maximum 86400000 ms"),
        ("", Reason.BAD_TIME, "delay-jitter"),
    ],
)
def test_a_bad_jitter_is_dead_lettered_naming_the_header(
    jitter: str, reason: Reason, says: str
) -> None:
    decision = decide(TARGET, ("delay-ms", "1000"), ("delay-jitter", jitter))
    assert isinstance(decision, Rejected), decision
    assert decision.reason is reason and says in decision.detail


def test_the_delay_and_the_whole_jitter_must_fit_the_maximum_delay_whatever_the_id() -> None:
    near_max = 365 * 86_400_000 - 1_000
    for id in ("a", "b", "c"):  # accepted or refused alike, whatever the id's offset
        decision = decide(
            TARGET, ("delay-ms", str(near_max)), ("delay-id", id), ("delay-jitter", "2s")
        )
        assert isinstance(decision, Rejected) and decision.reason is Reason.DELAY_TOO_LONG
        assert "delay-jitter" in decision.detail


def test_a_recurring_schedule_with_a_jitter_is_refused() -> None:
    decision = decide(TARGET, ("delay-every", "1m"), ("delay-jitter", "10s"))
    assert isinstance(decision, Rejected)
    assert decision.reason is Reason.BAD_RECURRENCE and "delay-jitter" in decision.detail


def test_a_cancel_ignores_a_jitter() -> None:
    hs = (("delay-cancel", b"x"), ("delay-jitter", b"10s"))
    decision = classify(SourceRecord("delay", 0, 1, TS, b"k", b"v", hs), RULES)
    assert not isinstance(decision, Rejected | Schedule)

"""Hostile header values: classify() never raises, and names the header at fault.

Each case was a crash before (a ValueError or an InvalidRecord escaping into the loop,
issue 10 item 1) or a silent early delivery (items 9 and 10).
"""

from __future__ import annotations

import re

import pytest

from delaybridge.contract.classify import Rejected, Schedule, SourceRecord, classify
from delaybridge.contract.reasons import Reason
from delaybridge.contract.rules import HeaderRules
from delaybridge.settings import DEFAULT_DELAY_LEVELS

# Once per implementation of the hot path: pure Python, and compiled where built
# (tests/unit/hot_impl.py).
pytestmark = pytest.mark.usefixtures("hot_impl")

TS = 1_700_000_000_000
DAY = 86_400_000
RULES = HeaderRules.from_strings(
    DEFAULT_DELAY_LEVELS,
    max_delay_ms=365 * DAY,
    delay_topics=("delay",),
    internal_topics=("delaybridge.cancels", "delaybridge.dead-letter"),
    delay_topic_pattern="^delay-.*",
)
T = ("delay-target-topic", "orders")


def decide(
    *headers: tuple[str, str | bytes],
    rules: HeaderRules = RULES,
    ts: int = TS,
    log_append: bool = False,
    now_ms: int | None = None,
) -> object:
    hs = tuple((n, v.encode() if isinstance(v, str) else v) for n, v in headers)
    record = SourceRecord("delay", 0, 7, ts, b"k", b"v", hs, log_append)
    return classify(record, rules, now_ms)


def reason_of(*headers: tuple[str, str | bytes], **kw: object) -> Reason:
    decision = decide(*headers, **kw)  # type: ignore[arg-type]
    assert isinstance(decision, Rejected), decision
    assert decision.detail
    return decision.reason


@pytest.mark.parametrize(
    "value",
    ["--5", "-+5", "+-5", "²", "٣", "1_000", " ", "", "9" * 5_000, "1e3", "0x10", "5ms"],
)
def test_malformed_integers_are_bad_time_not_a_crash(value: str) -> None:
    assert reason_of(T, ("delay-ms", value)) in (Reason.BAD_TIME, Reason.DELAY_TOO_LONG)


@pytest.mark.parametrize("value", ["4294967296", "2147483648", "-1", "9" * 400, "1.5", "²"])
def test_a_partition_outside_int32_is_bad_partition(value: str) -> None:
    assert reason_of(T, ("delay-ms", "5"), ("delay-target-partition", value)) == (
        Reason.BAD_PARTITION
    )


def test_the_largest_partition_a_record_can_name_is_accepted() -> None:
    decision = decide(T, ("delay-ms", "5"), ("delay-target-partition", "2147483647"))
    assert isinstance(decision, Schedule) and decision.target_partition == 2_147_483_647


def test_an_id_longer_than_the_store_format_allows_is_bad_header() -> None:
    assert reason_of(T, ("delay-ms", "5"), ("delay-id", "x" * 65_536)) == Reason.BAD_HEADER
    ok = decide(T, ("delay-ms", "5"), ("delay-id", "é" * 32_767))  # 65,534 bytes
    assert isinstance(ok, Schedule)


@pytest.mark.parametrize(
    "header", [("delay-id", ""), ("UNIQ_KEY", ""), ("delay-cancel", ""), ("TIMER_DEL_UNIQKEY", "")]
)
def test_an_empty_id_is_bad_header(header: tuple[str, str]) -> None:
    # An empty id named nothing: a schedule with one published a replace the cancel
    # topic's readers refuse ('id' must be a non-empty string), and a cancel with one
    # cancelled nothing; found by the ingest property test (test_ingest_poison.py).
    assert reason_of(T, ("delay-ms", "5"), header) == Reason.BAD_HEADER


def test_too_many_headers_or_a_huge_header_name_is_bad_header() -> None:
    many = [T, ("delay-ms", "5")] + [("h", "1")] * 65_536
    assert reason_of(*many) == Reason.BAD_HEADER
    assert reason_of(T, ("delay-ms", "5"), ("n" * 65_536, "1")) == Reason.BAD_HEADER


def test_sub_millisecond_due_times_round_up_never_down() -> None:
    decision = decide(T, ("deliver-at", "2023-11-14T22:13:20.2501Z"))
    assert isinstance(decision, Schedule) and decision.due_ms == TS + 251
    exact = decide(T, ("deliver-at", "2023-11-14T22:13:20.250Z"))
    assert isinstance(exact, Schedule) and exact.due_ms == TS + 250


@pytest.mark.parametrize(
    "target",
    ["delaybridge.cancels", "delaybridge.dead-letter", "delay", "delay-eu", "__consumer_offsets"],
)
def test_internal_topics_are_never_targets(target: str) -> None:
    reason = reason_of(("delay-target-topic", target), ("delay-ms", "5"))
    assert reason in (Reason.BAD_TARGET, Reason.TARGET_IS_DELAY_TOPIC)


def test_an_allow_list_limits_targets() -> None:
    rules = HeaderRules.from_strings(
        DEFAULT_DELAY_LEVELS, 365 * DAY, delay_topics=("delay",), target_allow="^(orders|mail)$"
    )
    assert isinstance(decide(T, ("delay-ms", "5"), rules=rules), Schedule)
    rejected = decide(("delay-target-topic", "payments"), ("delay-ms", "5"), rules=rules)
    assert isinstance(rejected, Rejected) and rejected.reason == Reason.BAD_TARGET
    assert re.search("allow", rejected.detail)


def test_a_create_time_far_from_our_clock_is_clamped_into_the_skew_window() -> None:
    skew = RULES.max_timestamp_skew_ms
    now = TS + 10 * DAY
    # An event-time stamp 10 days old: the delay counts from now - skew, not from it.
    old = decide(T, ("delay-ms", "60000"), ts=TS, now_ms=now)
    assert isinstance(old, Schedule) and old.due_ms == now - skew + 60_000
    # A producer clock 8 days ahead, asking for 364 days: clamped, storable.
    ahead = decide(T, ("delay-sec", str(364 * 86_400)), ts=now + 8 * DAY, now_ms=now)
    assert isinstance(ahead, Schedule) and ahead.due_ms == now + skew + 364 * DAY
    # Broker time (LogAppendTime) is trusted as it is; so is a stamp inside the window.
    broker = decide(T, ("delay-ms", "60000"), ts=TS, now_ms=now, log_append=True)
    assert isinstance(broker, Schedule) and broker.due_ms == TS + 60_000
    near = decide(T, ("delay-ms", "60000"), ts=now - 1_000, now_ms=now)
    assert isinstance(near, Schedule) and near.due_ms == now - 1_000 + 60_000


def test_the_skew_policy_can_dead_letter_instead() -> None:
    rules = HeaderRules.from_strings(
        DEFAULT_DELAY_LEVELS, 365 * DAY, delay_topics=("delay",), timestamp_policy="dead-letter"
    )
    reason = reason_of(T, ("delay-ms", "5"), ts=TS, now_ms=TS + DAY, rules=rules)
    assert reason == Reason.CLOCK_SKEW

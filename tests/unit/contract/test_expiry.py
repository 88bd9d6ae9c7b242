"""``delay-expire-after`` in the contract (contract/expiry.py): the deadline stored with
a one-off, the per-topic default, and what is refused."""

from __future__ import annotations

import pytest

from delaybridge.contract.classify import Rejected, Schedule, SourceRecord, classify
from delaybridge.contract.expiry import deadline_of
from delaybridge.contract.jitter import spread_ms
from delaybridge.contract.names import EXPIRE_HEADER
from delaybridge.contract.reasons import Reason
from delaybridge.contract.rules import HeaderRules
from delaybridge.settings import DEFAULT_DELAY_LEVELS

# Once per implementation of the hot path: pure Python, and compiled where built.
pytestmark = pytest.mark.usefixtures("hot_impl")

TS = 1_700_000_000_000
RULES = HeaderRules.from_strings(
    DEFAULT_DELAY_LEVELS,
    max_delay_ms=365 * 86_400_000,
    delay_topics=("delay",),
    expire_after_ms={"reminders": 60_000},
)


def decide(*headers: tuple[str, str]) -> Schedule | Rejected:
    hs = tuple((n, v.encode()) for n, v in headers)
    decision = classify(SourceRecord("delay", 0, 42, TS, b"k", b"v", hs), RULES)
    assert isinstance(decision, Schedule | Rejected), decision
    return decision


def schedule(*headers: tuple[str, str]) -> Schedule:
    decision = decide(*headers)
    assert isinstance(decision, Schedule), decision
    return decision


def test_the_deadline_is_the_due_time_plus_the_header_stored_last() -> None:
    s = schedule(
        ("delay-target-topic", "orders"),
        ("delay-ms", "1000"),
        ("delay-expire-after", "10m"),
        ("trace", "t-1"),
    )
    assert s.headers[-1] == (EXPIRE_HEADER, str(TS + 1000 + 600_000).encode())
    assert deadline_of(s.headers) == TS + 1000 + 600_000
    assert [name for name, _ in s.headers] == ["trace", EXPIRE_HEADER]


def test_the_deadline_counts_from_the_jittered_due_time() -> None:
    s = schedule(
        ("delay-target-topic", "orders"),
        ("delay-ms", "1000"),
        ("delay-id", "j"),
        ("delay-jitter", "1h"),
        ("delay-expire-after", "0"),
    )
    assert deadline_of(s.headers) == s.due_ms == TS + 1000 + spread_ms("j", 3_600_000)


def test_a_topics_default_applies_without_the_header_and_the_header_wins() -> None:
    plain = schedule(("delay-target-topic", "reminders"), ("delay-ms", "5"))
    assert deadline_of(plain.headers) == TS + 5 + 60_000
    own = schedule(
        ("delay-target-topic", "reminders"), ("delay-ms", "5"), ("delay-expire-after", "1s")
    )
    assert deadline_of(own.headers) == TS + 5 + 1_000
    other = schedule(("delay-target-topic", "orders"), ("delay-ms", "5"))
    assert deadline_of(other.headers) is None


def test_a_series_takes_no_default_and_refuses_the_header() -> None:
    series = schedule(("delay-target-topic", "reminders"), ("delay-every", "1m"))
    assert all(name != EXPIRE_HEADER for name, _ in series.headers)
    refused = decide(
        ("delay-target-topic", "orders"), ("delay-every", "1m"), ("delay-expire-after", "5s")
    )
    assert isinstance(refused, Rejected) and refused.reason is Reason.BAD_RECURRENCE
    assert "delay-expire-after" in refused.detail


@pytest.mark.parametrize("value", ["soon", "-1s", "", "367d"])
def test_a_bad_value_is_bad_time_naming_the_header(value: str) -> None:
    refused = decide(
        ("delay-target-topic", "orders"), ("delay-ms", "5"), ("delay-expire-after", value)
    )
    assert isinstance(refused, Rejected) and refused.reason is Reason.BAD_TIME
    assert "delay-expire-after" in refused.detail


def test_a_producer_cannot_set_the_deadline_itself() -> None:
    s = schedule(("delay-target-topic", "orders"), ("delay-ms", "5"), (EXPIRE_HEADER, "1"))
    assert deadline_of(s.headers) is None and s.headers == ()

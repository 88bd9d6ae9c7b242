"""Recurring schedules: the headers, the instants (DST included) and the misfire rule."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from delaybridge.contract.classify import Cancel, Rejected, Schedule, SourceRecord, classify
from delaybridge.contract.reasons import Reason
from delaybridge.contract.series import Series, read_state
from delaybridge.contract.timing import TimeFormatError, parse_interval_ms
from tests.unit.contract.test_classify import RULES, TS

# Once per implementation of the hot path: pure Python, and compiled where built
# (tests/unit/hot_impl.py).
pytestmark = pytest.mark.usefixtures("hot_impl")

PARIS = ZoneInfo("Europe/Paris")
T = ("delay-target-topic", "orders")


def classified(*headers: tuple[str, str], ts: int = TS, value: bytes | None = b"v") -> object:
    hs = tuple((n, v.encode()) for n, v in headers)
    return classify(SourceRecord("delay", 0, 7, ts, b"k", value, hs), RULES)


def series_of(*headers: tuple[str, str], ts: int = TS) -> tuple[Schedule, Series]:
    decision = classified(T, *headers, ts=ts)
    assert isinstance(decision, Schedule), decision
    assert decision.series is not None
    name, raw = decision.headers[-1]
    assert name == "delaybridge-series"
    assert read_state(raw) == (decision.series, 1)
    return decision, decision.series


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2s", 2_000), ("5m", 300_000), ("1h30m", 5_400_000), ("1500", 1_500), ("1m30s500ms", 90_500)],
)
def test_intervals(text: str, expected: int) -> None:
    assert parse_interval_ms(text) == expected


@pytest.mark.parametrize("text", ["", "-5", "2x", "1h 30m", "s", "1.5s"])
def test_bad_intervals(text: str) -> None:
    with pytest.raises(TimeFormatError):
        parse_interval_ms(text)


def test_an_interval_series_starts_one_interval_after_the_record_and_keeps_the_rate() -> None:
    decision, series = series_of(("delay-every", "2s"), ("delay-count", "5"))
    assert decision.due_ms == TS + 2_000 == series.first_ms
    assert series.expand(TS + 60_000, 100) == [(k, TS + 2_000 * k) for k in range(1, 6)]
    # fixed rate: occurrence 3 delivered 900 ms late still has occurrence 4 at +8 s
    assert series.after(3, TS + 6_000, TS + 6_900 - 60_000) == (4, TS + 8_000)
    assert series.after(5, TS + 10_000, 0) is None  # delay-count reached


def test_a_timing_header_sets_the_first_occurrence() -> None:
    decision, series = series_of(("delay-every", "1m"), ("deliver-at-ms", str(TS + 5)))
    assert decision.due_ms == TS + 5
    assert series.after(1, TS + 5, 0) == (2, TS + 60_005)


def test_until_is_inclusive() -> None:
    _, series = series_of(("delay-every", "10s"), ("delay-until", str(TS + 30_000)))
    assert [k for k, _ in series.expand(TS + 10**6, 100)] == [1, 2, 3]
    _, series = series_of(("delay-every", "10s"), ("delay-until", "2023-11-14T22:13:50Z"))
    assert series.until_ms == TS + 30_000


def test_misfires_beyond_the_threshold_are_skipped_and_keep_their_numbers() -> None:
    series = Series(TS, every_ms=1_000)
    # occurrence 1 went out 10 s late; with a 3 s threshold the next is the first
    # instant at or after now - 3 s: occurrence 8 (due TS + 7 s), not 2
    assert series.after(1, TS, TS + 10_000 - 3_000) == (8, TS + 7_000)
    cron = Series(ms(datetime(2025, 1, 1, 0, 0, tzinfo=UTC)), cron="0 * * * *")
    floor = ms(datetime(2025, 1, 1, 5, 30, tzinfo=UTC))
    assert cron.after(1, cron.first_ms, floor) == (7, ms(datetime(2025, 1, 1, 6, tzinfo=UTC)))


def test_a_cron_series_starts_at_the_first_instant_after_the_record() -> None:
    ts = ms(datetime(2025, 6, 1, 8, 59, 30, tzinfo=PARIS))
    decision, _ = series_of(
        ("delay-cron", "0 9 * * MON-FRI"), ("delay-timezone", "Europe/Paris"), ts=ts
    )
    assert decision.due_ms == ms(datetime(2025, 6, 2, 9, 0, tzinfo=PARIS))  # June 1st: Sunday
    _, daily = series_of(("delay-cron", "@daily"), ts=ts)
    assert daily.first_ms == ms(datetime(2025, 6, 2, 0, 0, tzinfo=UTC))


def test_paris_spring_forward_a_skipped_time_fires_right_after_the_gap() -> None:
    """30 March 2025: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist that day."""
    ts = ms(datetime(2025, 3, 28, 12, 0, tzinfo=PARIS))
    _, series = series_of(("delay-cron", "30 2 * * *"), ("delay-timezone", "Europe/Paris"), ts=ts)
    dues = [d for _, d in series.expand(ms(datetime(2025, 4, 1, tzinfo=PARIS)), 10)]
    assert dues == [
        ms(datetime(2025, 3, 29, 1, 30, tzinfo=UTC)),  # 02:30 CET
        ms(datetime(2025, 3, 30, 1, 0, tzinfo=UTC)),  # 03:00 CEST, the first instant after
        ms(datetime(2025, 3, 31, 0, 30, tzinfo=UTC)),  # 02:30 CEST
    ]
    _, hourly = series_of(("delay-cron", "0 * * * *"), ("delay-timezone", "Europe/Paris"), ts=ts)
    start, end = (
        ms(datetime(2025, 3, 30, 0, 0, tzinfo=UTC)),
        ms(datetime(2025, 3, 30, 3, 0, tzinfo=UTC)),
    )
    utc_hours = [d for _, d in hourly.expand(end, 1000) if d >= start]
    # 01:00 CET, then 03:00 CEST, 04:00 CEST: one hour apart in real time, no gap
    assert utc_hours == [start + h * 3_600_000 for h in range(4)]


def test_paris_fall_back_a_repeated_time_fires_once() -> None:
    """26 October 2025: 03:00 CEST falls back to 02:00 CET; 02:00-03:00 happens twice."""
    ts = ms(datetime(2025, 10, 24, 12, 0, tzinfo=PARIS))
    _, series = series_of(("delay-cron", "30 2 * * *"), ("delay-timezone", "Europe/Paris"), ts=ts)
    dues = [d for _, d in series.expand(ms(datetime(2025, 10, 28, tzinfo=PARIS)), 10)]
    assert dues == [
        ms(datetime(2025, 10, 25, 0, 30, tzinfo=UTC)),  # 02:30 CEST
        ms(datetime(2025, 10, 26, 0, 30, tzinfo=UTC)),  # 02:30 CEST, first pass only
        ms(datetime(2025, 10, 27, 1, 30, tzinfo=UTC)),  # 02:30 CET
    ]
    _, hourly = series_of(("delay-cron", "0 * * * *"), ("delay-timezone", "Europe/Paris"), ts=ts)
    start, end = (
        ms(datetime(2025, 10, 25, 23, tzinfo=UTC)),
        ms(datetime(2025, 10, 26, 2, tzinfo=UTC)),
    )
    # a wildcard hour fires in both passes: every real hour, none twice
    assert [d for _, d in hourly.expand(end, 1000) if d >= start] == [
        start + h * 3_600_000 for h in range(4)
    ]


@pytest.mark.parametrize(
    ("headers", "reason", "detail"),
    [
        ((("delay-cron", "61 * * * *"),), Reason.BAD_RECURRENCE, "not a cron expression"),
        ((("delay-cron", "0 0 30 2 *"),), Reason.BAD_RECURRENCE, "not a cron expression"),
        (
            (("delay-cron", "0 9 * * *"), ("delay-timezone", "Europe/Atlantis")),
            Reason.BAD_RECURRENCE,
            "not a known IANA time zone",
        ),
        (
            (("delay-cron", "0 9 * * *"), ("delay-timezone", "../../etc/passwd")),
            Reason.BAD_RECURRENCE,
            "not a known IANA time zone",
        ),
        ((("delay-cron", "* * * * *"), ("delay-every", "1m")), Reason.BAD_RECURRENCE, "together"),
        ((("delay-every", "500ms"),), Reason.BAD_RECURRENCE, "below the minimum"),
        ((("delay-every", "soon"),), Reason.BAD_RECURRENCE, "delay-every"),
        ((("delay-every", "2s"), ("delay-count", "0")), Reason.BAD_RECURRENCE, "delay-count"),
        ((("delay-every", "2s"), ("delay-count", "x")), Reason.BAD_RECURRENCE, "delay-count"),
        (
            (("delay-every", "2s"), ("delay-until", str(TS + 1_000))),
            Reason.BAD_RECURRENCE,
            "before the first occurrence",
        ),
        ((("delay-every", "2s"), ("delay-until", "Tuesday")), Reason.BAD_RECURRENCE, "delay-until"),
        ((("delay-count", "3"), ("delay-ms", "5")), Reason.BAD_RECURRENCE, "needs delay-cron"),
        (
            (("delay-every", "2s"), ("delay-timezone", "UTC")),
            Reason.BAD_RECURRENCE,
            "applies to delay-cron only",
        ),
        ((("delay-cron", "0 0 29 2 *"),), Reason.DELAY_TOO_LONG, "first occurrence"),
        ((("delay-every", "400d"),), Reason.BAD_RECURRENCE, "max_delay_ms"),
    ],
)
def test_bad_recurrences_are_dead_lettered_with_a_reason(
    headers: tuple[tuple[str, str], ...], reason: Reason, detail: str
) -> None:
    ts = ms(datetime(2025, 3, 1, tzinfo=UTC))  # the next 29 February is in 2028
    decision = classified(T, *headers, ts=ts if reason is Reason.DELAY_TOO_LONG else TS)
    assert isinstance(decision, Rejected), decision
    assert decision.reason is reason
    assert detail in decision.detail


def test_a_forged_series_state_is_stripped_and_a_null_value_series_is_no_tombstone() -> None:
    decision = classified(T, ("delay-ms", "5"), ("delaybridge-series", '{"k": 99}'))
    assert isinstance(decision, Schedule) and decision.series is None
    assert all(name != "delaybridge-series" for name, _ in decision.headers)
    tomb = classified(T, ("delay-every", "2s"), value=None)
    assert not isinstance(tomb, Cancel)

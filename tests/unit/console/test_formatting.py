"""Times, sizes and value previews as the pages write and read them."""

from __future__ import annotations

import pytest

from delaybridge.console.formatting import (
    BadInput,
    local_input,
    parse_time,
    parse_when,
    preview,
    relative,
    size,
    utc,
)

T = 1_795_000_000_000  # 2026-11-18T...Z


def test_utc_and_relative() -> None:
    assert utc(0) == "1970-01-01 00:00:00.000 UTC"
    assert utc(1_234) == "1970-01-01 00:00:01.234 UTC"
    assert utc(None) == "—"
    assert relative(T + 30_000, T) == "in 30 s"
    assert relative(T - 600_000, T) == "10 min ago"
    assert relative(T + 3 * 3_600_000, T) == "in 3.0 h"
    assert relative(T, T) == "now"


def test_parse_when_takes_a_delay_or_a_utc_time() -> None:
    assert parse_when("30m", T, "when") == T + 1_800_000
    assert parse_when(" 2h ", T, "when") == T + 7_200_000
    assert parse_when("2026-11-22T08:00", T, "when") == 1_795_334_400_000
    assert parse_when("2026-11-22T08:00:01", T, "when") == 1_795_334_401_000
    assert parse_when("2026-11-22T09:00:00+01:00", T, "when") == 1_795_334_400_000
    for bad in ("", "tomorrow", "2026-13-01T00:00"):
        with pytest.raises(BadInput):
            parse_when(bad, T, "when")


def test_parse_time_and_back() -> None:
    assert parse_time(None, "x") is None and parse_time(" ", "x") is None
    ms = parse_time("2026-11-22T08:00:00", "x")
    assert ms is not None and local_input(ms) == "2026-11-22T08:00:00"
    with pytest.raises(BadInput) as err:
        parse_time("soon", "due_from")
    assert err.value.field == "due_from"


def test_preview_and_size() -> None:
    assert preview(None, 10) == ("(null)", False)
    assert preview(b"hello", 10) == ("hello", False)
    assert preview(b"hello world", 5) == ("hello", True)
    assert preview("héllo".encode(), 2) == ("h", True), "a cut character is left out"
    assert preview(b"\x00\xff\xfe\xfd\xfc", 10) == ("hex: 00 ff fe fd fc", False)
    assert size(None) == "—" and size(5) == "5 B" and size(2048) == "2.0 KiB"

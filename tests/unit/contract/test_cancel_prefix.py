"""``delay-cancel-prefix`` (issue 27): a bulk cancel by id prefix, refused when empty or
mixed with a cancel by id, and a stable reason code for the header path's cap."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delaybridge.contract import names
from delaybridge.contract.classify import Cancel, Rejected, SourceRecord, classify
from delaybridge.contract.reasons import SIDECAR_REASONS, Reason
from delaybridge.contract.rules import HeaderRules
from delaybridge.settings import DEFAULT_DELAY_LEVELS

pytestmark = pytest.mark.usefixtures("hot_impl")

RULES = HeaderRules.from_strings(
    DEFAULT_DELAY_LEVELS, max_delay_ms=365 * 86_400_000, delay_topics=("delay",)
)


def decide(*headers: tuple[str, str], value: bytes | None = b"v") -> object:
    hs = tuple((n, v.encode()) for n, v in headers)
    return classify(SourceRecord("delay", 0, 7, 1_700_000_000_000, b"k", value, hs), RULES)


def test_the_header_is_a_prefix_cancel_with_its_optional_target() -> None:
    assert decide(("delay-cancel-prefix", "tenant-42/")) == Cancel("tenant-42/", None, True)
    assert decide(("delay-cancel-prefix", "o-"), ("delay-target-topic", "orders")) == Cancel(
        "o-", "orders", True
    )


def test_a_timing_header_beside_it_does_not_make_it_a_schedule() -> None:
    decision = decide(("delay-cancel-prefix", "o-"), ("delay-ms", "1000"))
    assert decision == Cancel("o-", None, True)


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_prefix_is_refused_naming_the_header(value: str) -> None:
    decision = decide(("delay-cancel-prefix", value))
    assert isinstance(decision, Rejected)
    assert decision.reason is Reason.BAD_HEADER
    assert "delay-cancel-prefix" in decision.detail and "empty" in decision.detail


@pytest.mark.parametrize("other", ["delay-cancel", "TIMER_DEL_UNIQKEY"])
def test_with_a_cancel_by_id_on_the_same_record_it_is_refused(other: str) -> None:
    decision = decide(("delay-cancel-prefix", "o-"), (other, "o-1"))
    assert isinstance(decision, Rejected)
    assert decision.reason is Reason.BAD_HEADER
    assert "delay-cancel-prefix" in decision.detail


def test_an_illegal_target_is_refused() -> None:
    decision = decide(("delay-cancel-prefix", "o-"), ("delay-target-topic", "no way"))
    assert isinstance(decision, Rejected) and decision.reason is Reason.BAD_TARGET


@given(st.text(min_size=1, max_size=40).filter(lambda s: s.strip() == s and s))
def test_any_non_empty_prefix_is_kept_as_sent(prefix: str) -> None:
    assert decide(("delay-cancel-prefix", prefix)) == Cancel(prefix, None, True)


def test_the_header_is_a_control_header_and_the_cap_reason_is_stable() -> None:
    assert names.DELAY_CANCEL_PREFIX in names.CONTROL_HEADERS
    assert Reason.PREFIX_OVER_CAP.value == "prefix-over-cap"
    assert Reason.PREFIX_OVER_CAP in SIDECAR_REASONS  # a metric series from the first scrape

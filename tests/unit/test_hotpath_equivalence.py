"""A compiled hot path changes nothing: on random and hostile headers and records, the
compiled build (where installed) decides, encodes, decodes and fails exactly as pure
Python does -- the same decisions with the same details, the same bytes, the same
errors with the same messages. Where no build is installed the comparison is pure
against pure (and tests/unit/test_hotpath.py fails where one was expected)."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delaybridge.contract.decisions import SourceRecord
from delaybridge.contract.names import CONTROL_HEADERS, INTERNAL_HEADERS, RMQ_UNIQ_KEY
from delaybridge.contract.rules import HeaderRules
from delaybridge.settings import DEFAULT_DELAY_LEVELS
from delaybridge.timerlog.records import TimerRecord
from tests.unit.hot_impl import PURE, Impl, available

VARIANTS = available()[1:] or [PURE]
RULES = HeaderRules.from_strings(
    DEFAULT_DELAY_LEVELS,
    max_delay_ms=365 * 86_400_000,
    routes={"routed": "orders"},
    delay_topics=("delay", "routed"),
    target_allow="^(orders|mail|o.*)$",
)
TS = 1_700_000_000_000
P = Path("segment-0")
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

names = st.one_of(
    st.sampled_from(sorted(CONTROL_HEADERS | INTERNAL_HEADERS | {RMQ_UNIQ_KEY})),
    st.text(max_size=12),
)
texts = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(
        [
            "",
            " ",
            "5s",
            "1e3",
            "²",
            "-0",
            "keep",
            "replace",
            "KEEP",
            "orders",
            "2023-11-14T22:13:20.2501Z",
            "2023-11-14T22:13:20",
            "*/5 * * * *",
            "Europe/Berlin",
            "1h30m",
            "9" * 40,
        ]
    ),
    st.text(max_size=40),
)
values = st.one_of(
    st.none(),
    texts.map(lambda t: f" {t}\t".encode()),
    texts.map(str.encode),
    st.binary(max_size=24),
)
source_records = st.builds(
    SourceRecord,
    topic=st.sampled_from(["delay", "routed", "other"]),
    partition=st.integers(0, 5),
    offset=st.integers(0, 2**40),
    timestamp_ms=st.integers(-(2**45), 2**45),
    key=st.one_of(st.none(), st.binary(max_size=8), texts.map(str.encode)),
    value=st.one_of(st.none(), st.binary(max_size=8)),
    headers=st.lists(st.tuples(names, values), max_size=8).map(tuple),
    log_append_time=st.booleans(),
)


@pytest.mark.parametrize("impl", VARIANTS, ids=lambda i: i.name)
@SETTINGS
@given(record=source_records, now_ms=st.one_of(st.none(), st.integers(0, 2**45)))
def test_classify_decides_exactly_as_pure_python(
    impl: Impl, record: SourceRecord, now_ms: int | None
) -> None:
    want = PURE.classify.classify(record, RULES, now_ms)
    got = impl.classify.classify(record, RULES, now_ms)
    assert type(got) is type(want) and got == want


maybe_bytes = st.one_of(st.none(), st.binary(max_size=40))
timer_records = st.builds(
    TimerRecord,
    id=st.text(min_size=1, max_size=300),
    due_ms=st.integers(-(2**63), 2**63 - 1),
    target_topic=st.text(min_size=1, max_size=300),
    target_partition=st.integers(-1, 2**31 - 1) | st.integers(-(2**40), 2**40),
    key=maybe_bytes,
    value=maybe_bytes,
    headers=st.lists(st.tuples(st.text(max_size=10), maybe_bytes), max_size=4).map(tuple),
    source_offset=st.integers(0, 2**62) | st.integers(-(2**70), 2**70),
    source_timestamp_ms=st.integers(-(2**63), 2**63 - 1),
)


def _outcome(fn: object, *args: object) -> object:
    """What a call returns, or the type and message of what it raises."""
    try:
        return fn(*args)  # type: ignore[operator]
    except Exception as exc:  # the very thing compared
        return (type(exc), str(exc))


def _batch_fields(batch: object) -> object:
    if isinstance(batch, tuple):
        return batch  # an error
    return (
        [bytes(p) for p in batch.parts],  # type: ignore[attr-defined]
        batch.sizes,  # type: ignore[attr-defined]
        batch.id_hashes,  # type: ignore[attr-defined]
        batch.due_ms,  # type: ignore[attr-defined]
        batch.topics,  # type: ignore[attr-defined]
        batch.max_source_offset,  # type: ignore[attr-defined]
    )


@pytest.mark.parametrize("impl", VARIANTS, ids=lambda i: i.name)
@SETTINGS
@given(batch=st.lists(timer_records, min_size=1, max_size=6), compact=st.booleans())
def test_encode_writes_the_same_bytes_and_refuses_the_same_records(
    impl: Impl, batch: list[TimerRecord], compact: bool
) -> None:
    want = _outcome(PURE.codec.encode_batch, batch, compact)
    got = _outcome(impl.codec.encode_batch, batch, compact)
    assert _batch_fields(got) == _batch_fields(want)


@pytest.mark.parametrize("impl", VARIANTS, ids=lambda i: i.name)
@SETTINGS
@given(
    batch=st.lists(timer_records, min_size=1, max_size=4),
    damage=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=3),
    cut=st.integers(0, 40),
)
def test_decode_reads_the_same_records_and_reports_the_same_damage(
    impl: Impl, batch: list[TimerRecord], damage: list[tuple[int, int]], cut: int
) -> None:
    enc = _outcome(PURE.codec.encode_batch, batch, True)
    if isinstance(enc, tuple):
        return  # not storable: the encode test compares that
    raw = bytearray(b"".join(bytes(p) for p in enc.parts))  # type: ignore[attr-defined]
    offsets, o = [], 0
    for size in enc.sizes:  # type: ignore[attr-defined]
        offsets.append(o)
        o += size
    for where, flip in damage:
        raw[where % len(raw)] ^= flip
    buf = bytes(raw[: len(raw) - cut])
    args = ((buf,), (P,), [0] * len(offsets), offsets)
    want = _outcome(PURE.codec.decode_many, *args)
    got = _outcome(impl.codec.decode_many, *args)
    assert got == want
    if not damage and not cut:
        assert want == batch and zlib.crc32(buf) == zlib.crc32(bytes(raw))

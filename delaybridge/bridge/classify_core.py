"""The classifier proper (DESIGN §2), in plain typed Python: the hot path's first half.

``bridge/headers.py`` documents the rules and is the module to import; this one holds
their code so it can also be compiled with mypyc (``delaybridge/tools/build_compiled.py``,
``delaybridge/hotpath.py``): the same source runs interpreted or compiled, and a
compiled copy that does not match this file byte for byte is never used. Keep it
compilable: no monkeypatching, no dynamic attributes, only typed functions; any edit
here needs a rebuild (``scripts/bootstrap`` does it) before the compiled path is used.
"""

from __future__ import annotations

from delaybridge.bridge.decision_types import (
    MAX_HEADERS,
    MAX_ID_BYTES,
    MAX_NAME_BYTES,
    MAX_PARTITION,
    Cancel,
    Decision,
    Headers,
    Rejected,
    Schedule,
    SourceRecord,
)
from delaybridge.bridge.due import TIMING_PRECEDENCE, delay_base_ms, due_ms
from delaybridge.bridge.header_names import (
    CONTROL_HEADERS,
    DELAY_CANCEL,
    DELAY_ID,
    ETF1_EPOCH,
    ETF1_TARGET_KEY,
    ETF1_TARGET_TOPIC,
    INTERNAL_HEADERS,
    ON_DUPLICATE,
    RECURRENCE_HEADERS,
    RMQ_CANCEL,
    RMQ_UNIQ_KEY,
    TARGET_PARTITION,
    TARGET_TOPIC,
)
from delaybridge.bridge.reasons import Reason
from delaybridge.bridge.rules import HeaderRules, Rejection
from delaybridge.bridge.series import Series, recurrence, state_header
from delaybridge.bridge.timing import TimeFormatError, parse_int

#: Never stored with a message: ours to set (was a set union per header per record).
_STRIPPED = CONTROL_HEADERS | INTERNAL_HEADERS


def classify(record: SourceRecord, rules: HeaderRules, now_ms: int | None = None) -> Decision:
    """Decide what to do with one delay-topic record. Never raises on bad input.

    ``now_ms`` is the sidecar's clock at ingest (it bounds a skewed CreateTime, see
    ``bridge/due.py``); the reconciliation job passes None.
    """
    try:
        return _classify(record, rules, now_ms)
    except Rejection as rej:
        return Rejected(rej.reason, rej.detail)


def _classify(record: SourceRecord, rules: HeaderRules, now_ms: int | None) -> Decision:
    found = _control_values(record.headers)
    cancel_id = found.get(DELAY_CANCEL) or found.get(RMQ_CANCEL)
    target = found.get(TARGET_TOPIC) or found.get(ETF1_TARGET_TOPIC)
    if cancel_id is not None:
        return Cancel(_checked_id(cancel_id, DELAY_CANCEL), _cancel_target(target, rules))
    timing = [name for name in TIMING_PRECEDENCE if name in found]
    recurring = not RECURRENCE_HEADERS.isdisjoint(found)
    if record.value is None and not timing and not recurring and record.key is not None:
        key_id = _checked_id(_text(record.key, "record key"), "record key")
        return Cancel(key_id, _cancel_target(target, rules))  # etf1 tombstone
    target = target or rules.routes.get(record.topic)
    if not target:
        raise Rejection(
            Reason.MISSING_TARGET,
            f"no {TARGET_TOPIC} header and no route for delay topic {record.topic!r}",
        )
    rules.check_target(target)
    partition = -1
    if TARGET_PARTITION in found:
        try:
            partition = parse_int(found[TARGET_PARTITION], maximum=MAX_PARTITION)
        except TimeFormatError as exc:
            raise Rejection(Reason.BAD_PARTITION, f"header {TARGET_PARTITION}: {exc}") from exc
    base = delay_base_ms(record.timestamp_ms, record.log_append_time, rules, now_ms)
    due = due_ms(found, timing, base, rules) if timing or not recurring else None
    series = recurrence(found, due, base, rules) if recurring else None
    if series is not None:
        due = series.first_ms
    assert due is not None
    key = record.key
    if ETF1_TARGET_KEY in found:
        key = found[ETF1_TARGET_KEY].encode()
    default_id = record.default_id  # built once: a record's id, and what it may replace
    id = _checked_id(_message_id(record, found, default_id), DELAY_ID)
    return Schedule(
        id=id,
        due_ms=due,
        target_topic=target,
        target_partition=partition,
        key=key,
        headers=_stored_headers(record.headers, series),
        replace=_replaces(found) and id != default_id,
        series=series,
    )


def _stored_headers(
    headers: Headers, series: Series | None
) -> tuple[tuple[str, bytes | None], ...]:
    kept = tuple((k, v) for k, v in headers if k not in _STRIPPED)
    return kept if series is None else (*kept, state_header(series, 1))


def _replaces(found: dict[str, str]) -> bool:
    """``delay-on-duplicate``: ``replace`` (the default) or ``keep``."""
    value = found.get(ON_DUPLICATE, "replace").lower()
    if value not in ("replace", "keep"):
        raise Rejection(
            Reason.BAD_HEADER,
            f"header {ON_DUPLICATE}: {value[:80]!r} is neither 'replace' nor 'keep'",
        )
    return value == "replace"


def _cancel_target(target: str | None, rules: HeaderRules) -> str | None:
    """A cancel may name the target topic of the message it cancels: a legal name."""
    if target is not None and not rules.is_topic_name(target):
        raise Rejection(Reason.BAD_TARGET, f"{target[:300]!r} is not a legal Kafka topic name")
    return target


def _message_id(record: SourceRecord, found: dict[str, str], default_id: str) -> str:
    if DELAY_ID in found:
        return found[DELAY_ID]
    if RMQ_UNIQ_KEY in found:
        return found[RMQ_UNIQ_KEY]
    if ETF1_EPOCH in found and record.key is not None:
        return _text(record.key, "record key")  # etf1: the key is the schedule id
    return default_id


def _checked_id(id: str, where: str) -> str:
    if len(id) > MAX_ID_BYTES // 4 and len(id.encode()) > MAX_ID_BYTES:
        raise Rejection(
            Reason.BAD_HEADER, f"{where}: id of {len(id.encode())} bytes (max {MAX_ID_BYTES})"
        )
    return id


def _control_values(headers: Headers) -> dict[str, str]:
    """The control headers (plus UNIQ_KEY) as text; repeated headers must agree."""
    if len(headers) > MAX_HEADERS:
        raise Rejection(Reason.BAD_HEADER, f"{len(headers)} headers (max {MAX_HEADERS})")
    found: dict[str, str] = {}
    for name, raw in headers:
        if name not in CONTROL_HEADERS and name != RMQ_UNIQ_KEY:
            if len(name) > MAX_NAME_BYTES // 4 and len(name.encode()) > MAX_NAME_BYTES:
                raise Rejection(
                    Reason.BAD_HEADER,
                    f"header name of {len(name.encode())} bytes (max {MAX_NAME_BYTES})",
                )
            continue
        if raw is None:
            raise Rejection(Reason.BAD_HEADER, f"header {name} has a null value")
        value = _text(raw, f"header {name}")
        if name in found and found[name] != value:
            reason = Reason.CONFLICTING_TIME if name in TIMING_PRECEDENCE else Reason.BAD_HEADER
            raise Rejection(
                reason, f"header {name} appears twice: {found[name]!r:.80} and {value!r:.80}"
            )
        found[name] = value
    return found


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise Rejection(Reason.BAD_HEADER, f"{what} is not UTF-8: {exc}") from exc

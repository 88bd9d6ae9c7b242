"""The classifier proper (DESIGN §2), in plain typed Python: the hot path's first half.

``contract/classify.py`` documents the rules and is the module to import; this one holds
their code so it can also be compiled with mypyc (``delaybridge/tools/build_compiled.py``,
``delaybridge/hotpath.py``): the same source runs interpreted or compiled, and a
compiled copy that does not match this file byte for byte is never used. Keep it
compilable: no monkeypatching, no dynamic attributes, only typed functions; any edit
here needs a rebuild (``scripts/bootstrap`` does it) before the compiled path is used.
Constants are ``Final``: mypyc keeps them in C statics (no dict lookup per use).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, cast

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

from delaybridge.contract import names
from delaybridge.contract.decisions import (
    MAX_HEADERS,
    MAX_ID_BYTES,
    MAX_NAME_BYTES,
    MAX_PARTITION,
    Cancel,
    Decision,
    Headers,
    IngestPlan,
    PartKey,
    Rejected,
    Run,
    Schedule,
    SourceRecord,
)
from delaybridge.contract.due import (
    PLAIN_DUE,
    TIMING_PRECEDENCE,
    TIMING_RANK,
    delay_base_ms,
    due_ms,
)
from delaybridge.contract.expiry import deadline_header
from delaybridge.contract.jitter import jitter_ms, spread_ms
from delaybridge.contract.reasons import Reason
from delaybridge.contract.rules import HeaderRules, Rejection
from delaybridge.contract.series import Series, recurrence, state_header
from delaybridge.contract.timing import TimeFormatError, parse_int
from delaybridge.timerlog.records import TimerRecord

#: Never stored with a message: ours to set (was a set union per header per record).
_STRIPPED: Final = names.CONTROL_HEADERS | names.INTERNAL_HEADERS
#: The headers read as text (the control headers, and UNIQ_KEY for its id).
_READ: Final = names.CONTROL_HEADERS | {names.RMQ_UNIQ_KEY}
_RECURRENCE: Final = names.RECURRENCE_HEADERS
DELAY_CANCEL: Final = names.DELAY_CANCEL
DELAY_CANCEL_PREFIX: Final = names.DELAY_CANCEL_PREFIX
DELAY_ID: Final = names.DELAY_ID
DELAY_JITTER: Final = names.DELAY_JITTER
DELAY_EXPIRE_AFTER: Final = names.DELAY_EXPIRE_AFTER
ETF1_EPOCH: Final = names.ETF1_EPOCH
ETF1_TARGET_KEY: Final = names.ETF1_TARGET_KEY
ETF1_TARGET_TOPIC: Final = names.ETF1_TARGET_TOPIC
ON_DUPLICATE: Final = names.ON_DUPLICATE
RMQ_CANCEL: Final = names.RMQ_CANCEL
RMQ_UNIQ_KEY: Final = names.RMQ_UNIQ_KEY
TARGET_PARTITION: Final = names.TARGET_PARTITION
TARGET_TOPIC: Final = names.TARGET_TOPIC
_RANK: Final = TIMING_RANK
_PLAIN: Final = PLAIN_DUE
_TIMINGS: Final = len(TIMING_PRECEDENCE)
_LOG_APPEND_TIME: Final = TIMESTAMP_LOG_APPEND_TIME
_new: Final = tuple.__new__
TIMER: Final = TimerRecord
#: target -> the rules that last accepted it (``check_target`` is a pure function of both,
#: its lru_cache says so): no call into interpreted code per record. Rules by identity.
_accepted: Final[dict[str, HeaderRules]] = {}


def classify(record: SourceRecord, rules: HeaderRules, now_ms: int | None = None) -> Decision:
    """Decide what to do with one delay-topic record. Never raises on bad input.

    ``now_ms`` is the sidecar's clock at ingest (it bounds a skewed CreateTime, see
    ``contract/due.py``); the reconciliation job passes None.
    """
    try:
        decision = _decide(
            record.topic,
            record.partition,
            record.offset,
            record.timestamp_ms,
            record.log_append_time,
            record.key,
            record.value,
            record.headers,
            rules,
            now_ms,
            False,
        )[0]
        return cast("Schedule | Cancel", decision)  # not timer: never a TimerRecord
    except Rejection as rej:
        return Rejected(rej.reason, rej.detail)


def _decide(
    topic: str,
    partition: int,
    offset: int,
    timestamp_ms: int,
    log_append_time: bool,
    key: bytes | None,
    value: bytes | None,
    headers: Headers,
    rules: HeaderRules,
    now_ms: int | None,
    timer: bool,
) -> tuple[Schedule | TimerRecord | Cancel, bool]:
    """classify() on a record's fields (``ingest_batch`` has no SourceRecord to build), and
    whether a schedule replaces; ``timer``: a schedule as the TimerRecord to store."""
    found = _control_values(headers)
    cancel_id = found.get(DELAY_CANCEL)
    if cancel_id is None:
        cancel_id = found.get(RMQ_CANCEL)
    target = found.get(TARGET_TOPIC) or found.get(ETF1_TARGET_TOPIC)
    if DELAY_CANCEL_PREFIX in found:
        return _prefix_cancel(found[DELAY_CANCEL_PREFIX], cancel_id, target, rules), False
    if cancel_id is not None:
        return Cancel(_checked_id(cancel_id, DELAY_CANCEL), _cancel_target(target, rules)), False
    first = ""
    rank = _TIMINGS
    recurring = False  # one pass over found
    for name in found:
        r = _RANK.get(name, _TIMINGS)
        if r < rank:
            first, rank = name, r
        elif name in _RECURRENCE:
            recurring = True
    timed = rank < _TIMINGS
    if value is None and not timed and not recurring and key is not None:
        key_id = _checked_id(_text(key, "record key"), "record key")
        return Cancel(key_id, _cancel_target(target, rules)), False  # etf1 tombstone
    target = target or rules.routes.get(topic)
    if not target:
        detail = f"no {TARGET_TOPIC} header and no route for delay topic {topic!r}"
        raise Rejection(Reason.MISSING_TARGET, detail)
    if _accepted.get(target) is not rules:
        rules.check_target(target)  # raises unless accepted
        if len(_accepted) > 4096:  # targets are few; this only guards against abuse
            _accepted.clear()
        _accepted[target] = rules
    to_partition = -1
    if TARGET_PARTITION in found:
        to_partition = _partition(found[TARGET_PARTITION])
    base = timestamp_ms  # delay_base_ms(), its common case inline
    skewed = now_ms is not None and abs(timestamp_ms - now_ms) > rules.max_timestamp_skew_ms
    if skewed and not log_append_time:
        base = delay_base_ms(timestamp_ms, log_append_time, rules, now_ms)
    due = _due(found, first, base, rules) if timed or not recurring else None
    series = recurrence(found, due, base, rules) if recurring else None
    if series is not None:
        due = series.first_ms
    assert due is not None
    out_key = found[ETF1_TARGET_KEY].encode() if ETF1_TARGET_KEY in found else key
    default_id = f"{topic}-{partition}-{offset}"  # a record's id, and what it may replace
    id = _checked_id(_message_id(key, found, default_id), DELAY_ID)
    if DELAY_JITTER in found:  # contract/jitter.py: later by a hash of the id, never earlier
        if series is not None:
            detail = f"header {DELAY_JITTER} spreads one-off schedules, not a recurring one"
            raise Rejection(Reason.BAD_RECURRENCE, detail)
        due += spread_ms(id, jitter_ms(found[DELAY_JITTER], due - base, rules))
    kept = _stored_headers(headers, series)
    if rules.expire_after_ms or DELAY_EXPIRE_AFTER in found:  # contract/expiry.py
        text = found.get(DELAY_EXPIRE_AFTER)
        deadline = deadline_header(text, target, due, series is not None, rules)
        if deadline is not None:
            kept = (*kept, deadline)
    replace = _replaces(found) and id != default_id
    if timer:  # built without the named tuples' Python-level __new__
        return _new(
            TIMER, (id, due, target, to_partition, out_key, value, kept, offset, timestamp_ms)
        ), replace
    return _new(Schedule, (id, due, target, to_partition, out_key, kept, replace, series)), replace


def ingest_batch(
    messages: Sequence[Any],
    rules: HeaderRules,
    now_ms: int,
    stored_upto: Callable[[PartKey], int | None],
) -> IngestPlan:
    """classify() over a consumed batch, sorted into an :class:`IngestPlan` straight from
    the librdkafka messages (no SourceRecord; schedules become TimerRecords). What
    ``stored_upto`` and the plan's fields mean: ``headers.ingest_batch``."""
    plan = IngestPlan({}, {}, [], [], [])
    runs, later = plan.runs, plan.later
    upto: dict[PartKey, int | None] = {}  # stored_upto() of each partition of the batch
    where: PartKey = ("", -1)
    run: Run | None = None  # where's run, once looked up
    stored: int | None = None
    for msg in messages:
        if msg.error() is not None:
            plan.errors.append(msg)
            continue
        topic, partition = msg.topic(), msg.partition()
        if partition != where[1] or topic != where[0]:  # batches come in runs of one partition
            where, run = (topic, partition), None
            stored = upto[where] if where in upto else upto.setdefault(where, stored_upto(where))
        if stored is None:
            continue  # revoked meanwhile (the next owner reads it) or still restoring
        replace = False
        decision: Schedule | TimerRecord | Cancel | Rejected
        try:
            ts_type, ts = msg.timestamp()
            offset, value = msg.offset(), msg.value()
            assert topic is not None and partition is not None and offset is not None
            decision, replace = _decide(
                topic,
                partition,
                offset,
                ts,
                ts_type == _LOG_APPEND_TIME,
                msg.key(),
                value,
                msg.headers() or [],
                rules,
                now_ms,
                True,
            )
        except Rejection as rej:
            decision = Rejected(rej.reason, rej.detail)
        except Exception as exc:  # a bug: keep the record, say what happened
            plan.failures.append((where, msg, exc))
            decision = Rejected(Reason.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
        if isinstance(decision, TIMER):
            if offset > stored:
                if run is None:
                    run = runs.get(where) or runs.setdefault(where, ([], [], []))
                run[0].append(decision)
                run[1].append(msg)
                if replace:
                    run[2].append(msg)
            elif replace:  # stored before a crash; its replace maybe not
                plan.stored_replaces.append((where, msg, Cancel(decision[0], decision[2])))
            continue
        writes = later.get(where)
        if writes is None:
            writes = later[where] = []
        writes.append((msg, cast("Cancel | Rejected", decision)))  # timer: never a Schedule
    return plan


def _due(found: dict[str, str], first: str, base: int, rules: HeaderRules) -> int:
    """due_ms() of the first timing header; plain digits (the common case) inline."""
    plain = _PLAIN.get(first)
    if plain is not None:
        text = found[first]
        if 0 < len(text) <= 18 and text.isascii() and text.isdigit():
            due = plain[0] * base + int(text) * plain[1]
            if due - base <= rules.max_delay_ms:
                return due
    return due_ms(found, [name for name in TIMING_PRECEDENCE if name in found], base, rules)


def _partition(text: str) -> int:
    """``delay-target-partition``: parse_int() with its checks, plain digits inline."""
    if 0 < len(text) <= 10 and text.isascii() and text.isdigit():
        value = int(text)
        if value <= MAX_PARTITION:
            return value
    try:
        return parse_int(text, maximum=MAX_PARTITION)
    except TimeFormatError as exc:
        raise Rejection(Reason.BAD_PARTITION, f"header {TARGET_PARTITION}: {exc}") from exc


def _stored_headers(
    headers: Headers, series: Series | None
) -> tuple[tuple[str, bytes | None], ...]:
    kept: list[tuple[str, bytes | None]] = []
    items: Sequence[Any] = headers  # as they are: the producer's tuples kept, not rebuilt
    for item in items:
        if item[0] not in _STRIPPED:
            kept.append(item if type(item) is tuple else (item[0], item[1]))
    if series is not None:
        kept.append(state_header(series, 1))
    return tuple(kept)


def _replaces(found: dict[str, str]) -> bool:
    """``delay-on-duplicate``: ``replace`` (the default) or ``keep``."""
    value = found.get(ON_DUPLICATE)
    if value is None:
        return True
    value = value.lower()
    if value not in ("replace", "keep"):
        detail = f"header {ON_DUPLICATE}: {value[:80]!r} is neither 'replace' nor 'keep'"
        raise Rejection(Reason.BAD_HEADER, detail)
    return value == "replace"


def _cancel_target(target: str | None, rules: HeaderRules) -> str | None:
    """A cancel may name the target topic of the message it cancels: a legal name."""
    if target is not None and not rules.is_topic_name(target):
        raise Rejection(Reason.BAD_TARGET, f"{target[:300]!r} is not a legal Kafka topic name")
    return target


def _prefix_cancel(
    prefix: str, cancel_id: str | None, target: str | None, rules: HeaderRules
) -> Cancel:
    """``delay-cancel-prefix``: a bulk cancel of the ids starting with the value. Never
    empty (it would name every message), never with a cancel by id on the same record."""
    if cancel_id is not None:
        detail = f"header {DELAY_CANCEL_PREFIX} and a cancel by id on one record: send two"
        raise Rejection(Reason.BAD_HEADER, detail)
    if not prefix:
        detail = f"header {DELAY_CANCEL_PREFIX}: an empty prefix would cancel every message"
        raise Rejection(Reason.BAD_HEADER, detail)
    return Cancel(_checked_id(prefix, DELAY_CANCEL_PREFIX), _cancel_target(target, rules), True)


def _message_id(key: bytes | None, found: dict[str, str], default_id: str) -> str:
    if DELAY_ID in found:
        return found[DELAY_ID]
    if RMQ_UNIQ_KEY in found:
        return found[RMQ_UNIQ_KEY]
    if ETF1_EPOCH in found and key is not None:
        return _text(key, "record key")  # etf1: the key is the schedule id
    return default_id


def _checked_id(id: str, where: str) -> str:
    if not id:  # names nothing: a cancel would cancel nothing, a replace is unreadable
        raise Rejection(Reason.BAD_HEADER, f"{where}: an id must not be empty")
    if len(id) > MAX_ID_BYTES // 4 and len(id.encode()) > MAX_ID_BYTES:
        detail = f"{where}: id of {len(id.encode())} bytes (max {MAX_ID_BYTES})"
        raise Rejection(Reason.BAD_HEADER, detail)
    return id


def _control_values(headers: Headers) -> dict[str, str]:
    """The control headers (plus UNIQ_KEY) as text; repeated headers must agree."""
    if len(headers) > MAX_HEADERS:
        raise Rejection(Reason.BAD_HEADER, f"{len(headers)} headers (max {MAX_HEADERS})")
    found: dict[str, str] = {}
    for name, raw in headers:
        if name not in _READ:
            if len(name) > MAX_NAME_BYTES // 4 and len(name.encode()) > MAX_NAME_BYTES:
                detail = f"header name of {len(name.encode())} bytes (max {MAX_NAME_BYTES})"
                raise Rejection(Reason.BAD_HEADER, detail)
            continue
        if raw is None:
            raise Rejection(Reason.BAD_HEADER, f"header {name} has a null value")
        try:
            value = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:  # as _text() says it, the message built only now
            raise Rejection(Reason.BAD_HEADER, f"header {name} is not UTF-8: {exc}") from exc
        seen = found.get(name)
        if seen is not None and seen != value:
            reason = Reason.CONFLICTING_TIME if name in _RANK else Reason.BAD_HEADER
            raise Rejection(reason, f"header {name} appears twice: {seen!r:.80} and {value!r:.80}")
        found[name] = value
    return found


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise Rejection(Reason.BAD_HEADER, f"{what} is not UTF-8: {exc}") from exc

"""The producer-side header contract (DESIGN §2): one record in, one decision out.

:func:`classify` turns a delay-topic record into a :class:`Schedule` (deliver later), a
:class:`Cancel` or a :class:`Rejected` (dead-letter, with a stable :class:`Reason`). It is a
pure function of the record, the rules and (in the sidecar) the ingest clock, shared by
the sidecar and the PySpark reconciliation so the two can never disagree. It never
raises on bad input: every header value a producer can send ends in a decision.

When a record is due (timing precedence, the base of a relative delay, rounding) is in
``contract/due.py``; the target checks and the settings-derived rules in
``contract/rules.py``. The same control header repeated with different values is
``conflicting-time`` (timing) or ``bad-header``. Values must fit the store's format:
an id, a header name or the header count over 65,535 (bytes) is ``bad-header``, a
target partition outside 0..2^31-1 ``bad-partition``.

Cancels: ``delay-cancel: <id>`` or ``TIMER_DEL_UNIQKEY: <id>``, or an etf1 tombstone (a
null value keyed by the schedule id, with no timing header). A cancel that names a
target topic only cancels a message bound for that topic. ``delay-cancel-prefix: <p>``
cancels, by the same rule, every message whose id starts with ``p`` (``Cancel.prefix``);
an empty prefix, or one on a record that also cancels by id, is ``bad-header``.

Replace by id: a schedule with an id of its own (``delay-id``, ``UNIQ_KEY``, an etf1
key) replaces the pending messages with that id *and target topic* sent before it
(``Schedule.replace``), unless ``delay-on-duplicate: keep``. A schedule under its default
id (``<topic>-<partition>-<offset>``, unique) has nothing to replace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from delaybridge import hotpath
from delaybridge.contract import classifier
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
from delaybridge.contract.names import OUT_DUE_MS, OUT_ID, OUT_ORIGIN
from delaybridge.contract.rules import HeaderRules

__all__ = [
    "MAX_HEADERS",
    "MAX_ID_BYTES",
    "MAX_NAME_BYTES",
    "MAX_PARTITION",
    "Cancel",
    "Decision",
    "Headers",
    "IngestPlan",
    "Rejected",
    "Run",
    "Schedule",
    "SourceRecord",
    "classify",
    "delivered_headers",
    "ingest_batch",
]

#: The classifier in use: ``classifier`` compiled when a matching build is installed,
#: else the module itself (``delaybridge/hotpath.py``). Tests swap it to run both.
_core: ModuleType = hotpath.select(classifier)


def classify(record: SourceRecord, rules: HeaderRules, now_ms: int | None = None) -> Decision:
    """Decide what to do with one delay-topic record. Never raises on bad input.

    ``now_ms`` is the sidecar's clock at ingest (it bounds a skewed CreateTime, see
    ``contract/due.py``); the reconciliation job passes None.
    """
    decision: Decision = _core.classify(record, rules, now_ms)
    return decision


def ingest_batch(
    messages: Sequence[Any],
    rules: HeaderRules,
    now_ms: int,
    stored_upto: Callable[[PartKey], int | None],
) -> IngestPlan:
    """classify() over a consumed batch (``bridge/ingest/ingestor.py``), in one pass straight from
    the librdkafka messages: every record decided exactly as classify() decides it, and
    sorted into the plan's runs (new schedules, as TimerRecords), side writes, replaces of
    schedules already stored, consume errors and failures.

    ``stored_upto(key)``: a partition's highest stored offset (its schedules at or below
    it are stored already: skipped, their replace published again), or None to skip its
    records (not ingesting); asked once per partition of the batch. Anything a decision
    raises besides a Rejection becomes an ``internal-error`` Rejected, listed in the
    plan's failures for the caller to log.
    """
    plan: IngestPlan = _core.ingest_batch(messages, rules, now_ms, stored_upto)
    return plan


def delivered_headers(
    stored: Sequence[tuple[str, bytes | None]], id: str, origin: str, due_ms: int
) -> list[tuple[str, str | bytes | None]]:
    """The headers a delivered record carries: the producer's, plus ours.

    ``stored`` are a :class:`Schedule`'s headers, from which classify() already removed
    every control header (ours included), so nothing is filtered here: this runs once
    per delivered message.
    """
    return [
        *stored,
        (OUT_ID, id.encode()),
        (OUT_ORIGIN, origin.encode()),
        (OUT_DUE_MS, str(due_ms).encode()),
    ]

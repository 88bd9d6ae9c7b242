"""The admin API's view of pending messages: ``GET /admin/messages`` and ``/admin/pending``.

``/admin/messages`` lists the pending messages of every store this replica owns (its
active and restoring partitions; standby copies are another replica's), merged in
listing order (:mod:`~delaybridge.timerlog.list_cursor`): each store walks its wheel
from the cursor (:mod:`~delaybridge.timerlog.listing`), the pages merge by position,
and the answer's ``cursor`` resumes all of them. Each message carries its
``position``, so the CLI merges the answers of several replicas with the same rule.

``/admin/pending`` sums the stores' exact per-target-topic counts and their due-time
histograms read off the wheel (:mod:`~delaybridge.timerlog.pending_stats`).

Parsing happens on the HTTP thread (a bad parameter is a 400 naming it); the store
calls run on the owner thread (the admin control's command queue).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from delaybridge.bridge.admin.control import BadRequest
from delaybridge.bridge.admin.status import record_json
from delaybridge.bridge.partition.state import PartitionState, Role
from delaybridge.timerlog.list_cursor import (
    END,
    BadCursor,
    Cursor,
    Part,
    Position,
    SourcePage,
    fingerprint,
    merge,
)
from delaybridge.timerlog.listing import DEFAULT_BUDGET, Filter, Listed, list_pending
from delaybridge.timerlog.pending_stats import Histogram, histogram

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MIN_STORE_BUDGET = 1_000
LIST_PARAMETERS = ("topic", "due_from_ms", "due_to_ms", "id_prefix", "limit", "cursor", "values")


@dataclass(frozen=True)
class PendingQuery:
    """A parsed ``/admin/messages`` request."""

    filter: Filter
    limit: int = DEFAULT_LIMIT
    cursor: Cursor | None = None
    values: bool = False


def filter_fingerprint(flt: Filter) -> str:
    return fingerprint(*flt.key())


def parse_query(params: Mapping[str, str]) -> PendingQuery:
    """The query of ``/admin/messages`` (parameters already unique and known);
    BadRequest naming the parameter at fault."""
    flt = Filter(
        topic=_nonempty(params, "topic"),
        due_from_ms=parse_int(params, "due_from_ms"),
        due_to_ms=parse_int(params, "due_to_ms"),
        id_prefix=_nonempty(params, "id_prefix"),
    )
    due_from, due_to = flt.due_from_ms, flt.due_to_ms
    if due_from is not None and due_to is not None and due_to <= due_from:
        raise BadRequest("due_to_ms", "due_to_ms must be after due_from_ms (it is exclusive)")
    limit = parse_int(params, "limit")
    if limit is None:
        limit = DEFAULT_LIMIT
    elif not 1 <= limit <= MAX_LIMIT:
        raise BadRequest("limit", f"limit must be 1..{MAX_LIMIT}, not {limit}")
    cursor = None
    if (text := params.get("cursor")) is not None:
        try:
            cursor = Cursor.decode(text, filter_fingerprint(flt))
        except BadCursor as exc:
            raise BadRequest("cursor", str(exc)) from None
    return PendingQuery(flt, limit, cursor, parse_values(params))


def parse_values(params: Mapping[str, str]) -> bool:
    """``values=true|false`` (also ``1|0``; default false): whether to add message values."""
    values = params.get("values", "false").lower()
    if values not in ("true", "false", "1", "0"):
        raise BadRequest("values", f"values must be true or false, not {values!r}")
    return values in ("true", "1")


def _nonempty(params: Mapping[str, str], name: str) -> str | None:
    value = params.get(name)
    if value == "":
        raise BadRequest(name, f"{name} must not be empty (leave it out for any)")
    return value


def parse_int(params: Mapping[str, str], name: str) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise BadRequest(name, f"{name} must be an integer, not {value!r}") from None


def owned(parts: Iterable[PartitionState]) -> list[PartitionState]:
    """The partitions whose messages this replica lists (not standby copies), by name."""
    return sorted((p for p in parts if p.role is not Role.STANDBY), key=lambda p: p.name)


def list_replica(
    parts: Iterable[PartitionState], query: PendingQuery, budget: int = DEFAULT_BUDGET
) -> dict[str, Any]:
    """One page of this replica's pending messages (owner thread). ``budget``: entries
    examined, shared by its stores (each gets at least ``MIN_STORE_BUDGET`` or all)."""
    mine = owned(parts)
    cursor = query.cursor or Cursor(filters=filter_fingerprint(query.filter))
    budget = max(min(budget, MIN_STORE_BUDGET), budget // max(1, len(mine)))
    bounds = dict(cursor.roll_bounds)
    pages: list[SourcePage[Listed]] = []
    examined = damaged = 0
    for part in mine:
        page = list_pending(
            part.store,
            part.name,
            cursor.after,
            query.filter,
            query.limit,
            budget=budget,
            roll_bound=bounds.get(part.name),
        )
        if page.roll_bound is not None:
            bounds[part.name] = page.roll_bound
        examined += page.examined
        damaged += page.damaged
        pages.append(SourcePage([(item.position, item) for item in page.items], page.next))
    merged = merge(pages, query.limit)
    nxt = None if merged.next == END else Cursor(merged.next, bounds, cursor.filters).encode()
    by_name = {p.name: p for p in mine}
    return {
        "messages": [
            message_json(by_name[pos.store], item, query.values) for pos, item in merged.items
        ],
        "cursor": nxt,
        "partial": nxt is not None and len(merged.items) < query.limit,
        "stores": [p.name for p in mine],
        "roll_bounds": bounds,
        "examined": examined,
        "damaged": damaged,
    }


def message_json(part: PartitionState, item: Listed, values: bool) -> dict[str, Any]:
    """A listed message as the lookup shows one, plus ``rolled`` and its ``position``."""
    rec = item.record
    doc = record_json(part, rec, values)
    doc["rolled"] = item.position.part == Part.ROLLED
    doc["position"] = list(item.position)
    return doc


def stats_replica(parts: Iterable[PartitionState], start_ms: int) -> dict[str, Any]:
    """Per-target-topic counts and the due-time histogram of this replica (owner thread)."""
    mine = owned(parts)
    by_topic: dict[str, int] = {}
    total: Histogram | None = None
    stores = []
    for part in mine:
        counts = part.store.pending_by_topic
        for topic, n in counts.items():
            by_topic[topic] = by_topic.get(topic, 0) + n
        stores.append({"store": part.name, "pending": sum(counts.values())})
        h = histogram(part.store, start_ms)
        if total is None:
            total = h
        else:
            total.add(h)
    return {
        "pending": sum(by_topic.values()),
        "by_topic": dict(sorted(by_topic.items())),
        "stores": stores,
        "histogram": histogram_json(total or Histogram(start_ms, [0] * 60, [0], start_ms)),
    }


def histogram_json(h: Histogram) -> dict[str, Any]:
    return {
        "start_ms": h.start_ms,
        "by_minute": h.by_minute,
        "by_hour": h.by_hour,
        "edge_ms": h.edge_ms,
    }


def parse_position(raw: object, where: str) -> Position:
    """A message's ``position`` as JSON gives it back (the CLI's merge)."""
    if not isinstance(raw, list) or len(raw) != 4:
        raise BadCursor(f"{where}: a message without a valid position: {raw!r}")
    part, tick, store, index = raw
    return Position(int(part), int(tick), str(store), int(index))

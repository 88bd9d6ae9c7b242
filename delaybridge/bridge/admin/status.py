"""JSON views of partitions and stored messages, for the admin API and ``status``."""

from __future__ import annotations

import base64
from typing import Any

from delaybridge.bridge.partition.state import PartitionState
from delaybridge.timerlog import TimerRecord


def partition_stats(part: PartitionState) -> dict[str, Any]:
    stats = part.store.stats()
    return {
        "topic": part.topic,
        "partition": part.partition,
        "role": part.role.value,
        "pending": stats.pending,
        "pending_by_topic": stats.pending_by_topic,
        "bytes_on_disk": stats.bytes_on_disk,
        "read_lag_ms": stats.read_lag_ms,
        "last_source_offset": stats.last_source_offset,
        "commit_position": part.offsets.commit_position(),
        "in_flight": part.pipeline.in_flight,
        "held": part.pipeline.held,
        "recovery_s": round(part.recovery_s, 3),
        "delivered_total": stats.delivered_total,
        "cancelled_total": stats.cancelled_total,
    }


def _text(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(raw).decode()


def record_json(part: PartitionState, rec: TimerRecord, values: bool = False) -> dict[str, Any]:
    """A stored message as the admin API shows it; ``values`` adds ``value`` (base64),
    which is left out by default (values may hold personal data)."""
    doc = {
        "id": rec.id,
        "due_ms": rec.due_ms,
        "target_topic": rec.target_topic,
        "target_partition": rec.target_partition,
        "origin": f"{part.topic}/{part.partition}/{rec.source_offset}",
        "key": _text(rec.key),
        "value_bytes": None if rec.value is None else len(rec.value),
        "headers": {name: _text(value) for name, value in rec.headers},
    }
    if values:
        doc["value"] = None if rec.value is None else base64.b64encode(rec.value).decode()
    return doc

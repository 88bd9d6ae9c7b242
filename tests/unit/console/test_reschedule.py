"""The replacing record a reschedule writes, from the admin API's look-up."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from delaybridge.console.reschedule import CannotReschedule, replacement


def looked_up(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": "order-42",
        "due_ms": 1_000,
        "target_topic": "orders",
        "target_partition": -1,
        "origin": "app.delay/3/1234",
        "key": "customer-7",
        "value_bytes": 5,
        "value": base64.b64encode(b"hello").decode(),
        "headers": {"tenant": "shop-1", "blob": "base64:gIE=", "empty": None},
    }
    return doc | extra


def test_same_id_new_time_original_key_value_and_headers() -> None:
    record = replacement(looked_up(), due_ms=99_000)
    assert record.delay_topic == "app.delay"
    assert record.key == b"customer-7" and record.value == b"hello"
    assert record.headers == [
        ("tenant", b"shop-1"),
        ("blob", b"\x80\x81"),
        ("empty", None),
        ("delay-target-topic", "orders"),
        ("deliver-at-ms", "99000"),
        ("delay-id", "order-42"),
    ]


def test_a_fixed_target_partition_and_binary_key_are_kept() -> None:
    record = replacement(looked_up(target_partition=2, key="base64:/wA=", value=None), due_ms=5)
    assert ("delay-target-partition", "2") in record.headers
    assert record.key == b"\xff\x00" and record.value is None


def test_control_and_internal_headers_are_never_copied() -> None:
    headers = {"delay-ms": "5", "delay-cancel": "x", "delaybridge-retry": "1", "ok": "y"}
    record = replacement(looked_up(headers=headers), due_ms=5)
    names = [name for name, _ in record.headers]
    assert names == ["ok", "delay-target-topic", "deliver-at-ms", "delay-id"]


def test_series_and_look_ups_without_a_value_are_refused() -> None:
    with pytest.raises(CannotReschedule, match="recurring"):
        replacement(looked_up(headers={"delaybridge-series": "..."}), due_ms=5)
    doc = looked_up()
    del doc["value"]
    with pytest.raises(CannotReschedule, match="value"):
        replacement(doc, due_ms=5)
    with pytest.raises(CannotReschedule, match="origin"):
        replacement(looked_up(origin="nonsense"), due_ms=5)

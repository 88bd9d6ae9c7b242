"""The ingestor on the fakes: a record it cannot decide is dead-lettered, and ingest goes on."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from confluent_kafka import (
    Message,
)

from delaybridge.connectors import header_text
from tests.unit.bridge.sidecar_kit import DELAY, DLT, FakeSidecar, schedule
from tests.unit.contract.test_ingest_batch import BrokenMessage


def test_the_sidecar_dead_letters_a_record_it_cannot_decide_logs_it_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("a", 100))
    bad = side.send(schedule("b", 100))
    side.send(schedule("c", 100))
    real = side.cluster.message

    def message(topic: str, partition: int, offset: int) -> Message:
        msg = real(topic, partition, offset)
        if (topic, offset) != (DELAY, bad):
            return msg
        return BrokenMessage(
            topic=topic,
            partition=partition,
            offset=offset,
            key=msg.key(),
            value=msg.value(),
            timestamp=msg.timestamp(),
        )

    monkeypatch.setattr(side.cluster, "message", message)
    with caplog.at_level(logging.ERROR, logger="delaybridge.bridge.ingest.ingestor"):
        side.turns(3, advance_ms=200)
    [dead] = side.cluster.records(DLT)
    assert header_text(dead)["delay-error"] == "internal-error"
    assert header_text(dead)["delay-error-detail"] == "RuntimeError: boom"
    assert [h["delay-id"] for h in side.delivered()] == ["a", "c"]
    [logged] = [r for r in caplog.records if "failed" in r.getMessage()]
    assert logged.getMessage() == f"deciding about {DELAY}/0/{bad} failed"
    assert logged.exc_info is not None and isinstance(logged.exc_info[1], RuntimeError)
    side.stop()

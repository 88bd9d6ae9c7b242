"""What the ``bench`` commands share: the cluster (given or a local broker) and the report."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from delaybridge.connectors import KafkaSettings, localkafka
from delaybridge.tools.bench_kit import bench_cluster, report


class StubBroker:
    """Stands in for :class:`LocalKafka`: records start and stop, opens no process."""

    def __init__(self, data_dir: Path, **kwargs: Any) -> None:
        self.data_dir = data_dir
        self.kwargs = kwargs
        self.events: list[str] = []
        self.bootstrap = f"127.0.0.1:{kwargs['port']}"

    def start(self, timeout_s: float) -> None:
        self.events.append("start")

    def stop(self) -> None:
        self.events.append("stop")


@pytest.fixture
def stub_broker(monkeypatch: pytest.MonkeyPatch) -> list[StubBroker]:
    made: list[StubBroker] = []

    def make(data_dir: Path, **kwargs: Any) -> StubBroker:
        made.append(StubBroker(data_dir, **kwargs))
        return made[-1]

    monkeypatch.setattr(localkafka, "LocalKafka", make)
    return made


def test_a_given_cluster_starts_no_broker(stub_broker: list[StubBroker]) -> None:
    kafka = KafkaSettings(bootstrap_servers="broker-1:9093")
    with bench_cluster("bench-kit-", kafka) as (work, clients):
        assert work.is_dir() and work.name.startswith("bench-kit-")
        assert clients.settings is kafka
    assert not work.exists()
    assert stub_broker == []


def test_without_a_cluster_a_local_broker_runs_for_the_block_even_when_it_fails(
    stub_broker: list[StubBroker],
) -> None:
    with (
        pytest.raises(RuntimeError, match="measurement"),
        bench_cluster("bench-kit-", None) as (work, clients),
    ):
        (broker,) = stub_broker
        assert broker.data_dir == work / "kafka" and broker.kwargs["heap_mb"] == 1024
        assert clients.settings.bootstrap_servers == broker.bootstrap
        assert broker.events == ["start"]
        raise RuntimeError("a measurement failed")
    assert broker.events == ["start", "stop"]
    assert not work.exists()


def test_report_writes_json_and_a_column_per_run(tmp_path: Path) -> None:
    out = io.StringIO()
    runs = [{"pending": 1000, "seconds": 0.5}, {"pending": 2000, "seconds": 0.9}]
    path = tmp_path / "results" / "restore.json"

    report(Console(file=out, width=120), path, "restore", runs, lambda r: f"{r['pending']:,} p")

    assert json.loads(path.read_text()) == {"restore": runs}
    text = out.getvalue()
    assert "delaybridge bench restore" in text and "1,000 p" in text and "2,000 p" in text
    assert "seconds" in text and "0.9" in text
    assert f"JSON written to {path}" in text.replace("\n", "")

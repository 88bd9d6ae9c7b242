"""``delaybridge bench ingest`` measures what it says: every record of every round goes
through ``Ingestor.handle`` into the store, on each hot path there is, and the hot path
of the process is the compiled one again afterwards."""

from __future__ import annotations

from pathlib import Path

from delaybridge import hotpath
from delaybridge.tools.bench_ingest import run
from tests.unit.hot_impl import available


def test_every_round_is_ingested_on_every_hot_path(tmp_path: Path) -> None:
    before = hotpath.implementation()
    result = run(600, 2, tmp_path)
    per = result["handle_ns_per_record"]
    assert set(per) == ({"pure", "compiled"} if len(available()) > 1 else {"pure"})
    assert all(ns > 0 for ns in per.values())
    assert result["hot_path"]["pure"] == "pure"
    assert hotpath.implementation() == before

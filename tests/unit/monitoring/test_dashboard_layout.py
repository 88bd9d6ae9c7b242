"""The shipped Grafana dashboard and alert rules speak the sidecar's metric names.

No Grafana and no Prometheus here (those are tests/integration/monitoring/): the JSON
file itself, its layout, and every ``delaybridge_*`` name used by a panel or an alert
checked against what :class:`~delaybridge.bridge.observe.metrics.Metrics` registers, so renaming
a metric without the dashboard fails at once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from delaybridge.bridge.observe.metrics import Metrics

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "helm" / "delaybridge"
DASHBOARD = CHART / "dashboards" / "delaybridge.json"
RULES = CHART / "templates" / "prometheusrule.yaml"
NAME = re.compile(r"\bdelaybridge_[a-z_]+\b")
# Suffixes Prometheus' exposition adds to a family's name, per type.
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "info": ("_info",)}


@pytest.fixture(scope="module")
def board() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def exported_names() -> set[str]:
    names = set()
    for family in Metrics(process=False).registry.collect():
        for suffix in SUFFIXES.get(family.type, ("",)):
            names.add(family.name + suffix)
    return names


def all_panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for top in board["panels"] for p in (top, *top.get("panels", []))]


def test_every_metric_the_dashboard_and_the_alerts_use_is_exported(board: dict[str, Any]) -> None:
    exported = exported_names()
    queries = [t["expr"] for p in all_panels(board) for t in p.get("targets", [])]
    used_by_dashboard = {name for expr in queries for name in NAME.findall(expr)}
    used_by_rules = set(NAME.findall(RULES.read_text(encoding="utf-8")))
    assert used_by_dashboard - exported == set()
    assert used_by_rules - exported == set()
    # The panels are all there.
    for needed in (
        "delaybridge_pending_messages",
        "delaybridge_enqueued_total",
        "delaybridge_delivered_total",
        "delaybridge_delivery_lateness_seconds_bucket",
        "delaybridge_early_deliveries_total",
        "delaybridge_dead_lettered_total",
        "delaybridge_delivery_retries_total",
        "delaybridge_consumer_lag_messages",
        "delaybridge_store_bytes",
        "delaybridge_store_free_bytes",
        "delaybridge_backpressure_active",
        "delaybridge_disk_pause_active",
        "delaybridge_disk_pauses_total",
        "delaybridge_paused",
        "delaybridge_restore_remaining_records",
        "delaybridge_restored_records_total",
        "delaybridge_partition_role",
        "delaybridge_standby_lag_records",
        "delaybridge_kafka_reachable",
    ):
        assert needed in used_by_dashboard, needed


def test_panels_have_unique_ids_and_do_not_overlap(board: dict[str, Any]) -> None:
    panels = all_panels(board)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]


def test_every_query_uses_the_datasource_and_job_variables(board: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in all_panels(board):
        if panel["type"] == "row":
            continue
        assert panel["description"], panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            for selector in re.findall(r"delaybridge_[a-z_]+\{([^}]*)\}", target["expr"]):
                assert 'job=~"$job"' in selector, (panel["title"], target["expr"])
            assert re.search(r"delaybridge_[a-z_]+(?!\{|[a-z_])", target["expr"]) is None, (
                f"{panel['title']!r}: a metric without the job selector in {target['expr']!r}"
            )


def test_every_exported_metric_has_a_panel(board: dict[str, Any]) -> None:
    """An operator sees every family the sidecar exports on the shipped dashboard: a
    metric only an alert (or nobody) reads is invisible until it is needed at 3 a.m.
    (the transaction and replace-wait metrics had no panel)."""
    queries = [t["expr"] for p in all_panels(board) for t in p.get("targets", [])]
    used = {name for expr in queries for name in NAME.findall(expr)}
    missing = []
    for family in Metrics(process=False).registry.collect():
        names = {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
        if not names & used:
            missing.append(family.name)
    assert missing == []

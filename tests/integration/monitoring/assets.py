"""The chart's monitoring assets as the tests read them: the dashboard, the alert rules.

One source each: the dashboard is ``helm/delaybridge/dashboards/delaybridge.json`` (the
chart's ConfigMap embeds that file), the rules are whatever ``helm template`` renders
from ``templates/prometheusrule.yaml``. Grafana's variables in panel queries are
replaced by :func:`concrete` so that Prometheus itself can run them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.chart_config import CHART, ROOT, one, render

DASHBOARD = CHART / "dashboards" / "delaybridge.json"
OPERATIONS = ROOT / "docs" / "operations.md"
RULES_ON = (
    "--set",
    "config.kafka.bootstrap_servers=kafka:9092",
    "--set",
    "metrics.prometheusRule.enabled=true",
    "--api-versions",
    "monitoring.coreos.com/v1",
)


@dataclass(frozen=True)
class Query:
    """One PromQL expression of the dashboard or the rules, and where it comes from."""

    where: str
    expr: str


def tool(name: str) -> str:
    """promtool or prometheus from Debian's package; missing is a failure, not a skip."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found on PATH: run scripts/install-promtool", pytrace=False)
    return found


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' collapsed children included."""
    out: list[dict[str, Any]] = []
    for panel in board["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def panel_queries(board: dict[str, Any]) -> list[Query]:
    return [
        Query(f"panel {panel['title']!r} {target['refId']}", target["expr"])
        for panel in panels(board)
        for target in panel.get("targets", [])
    ]


def concrete(expr: str, job: str, *, window: str = "1m") -> str:
    """A panel query with Grafana's variables replaced, runnable by Prometheus."""
    expr = expr.replace("$__rate_interval", window).replace("$__range", window)
    expr = expr.replace("$__interval", window)
    expr = expr.replace("$job", job)  # a plain job name is its own regular expression
    assert "$" not in expr, f"unreplaced Grafana variable in {expr!r}"
    return expr


def rule_groups(helm: str, *extra: str) -> list[dict[str, Any]]:
    """The rendered PrometheusRule's groups (default values plus ``extra``)."""
    rule = one(render(helm, *RULES_ON, *extra), "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def alerts(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def alert_queries(groups: list[dict[str, Any]]) -> list[Query]:
    return [Query(f"alert {rule['alert']}", rule["expr"]) for rule in alerts(groups)]


def write_rules(groups: list[dict[str, Any]], path: Path, *, annotations: bool = True) -> Path:
    """A Prometheus rule file of ``groups``, optionally without the annotations."""
    if not annotations:
        groups = [
            {**group, "rules": [_without_annotations(rule) for rule in group["rules"]]}
            for group in groups
        ]
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False), encoding="utf-8")
    return path


def _without_annotations(rule: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in rule.items() if key != "annotations"}


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool"), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        timeout=120,
    )


def heading_anchors(markdown: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (lower case, punctuation dropped)."""
    anchors = set()
    fenced = False
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("#") and not fenced:
            title = line.lstrip("#").strip().lower()
            slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
            anchors.add(slug)
    return anchors

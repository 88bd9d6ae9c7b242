"""The chart's alert rules, checked and unit-tested by Prometheus' own promtool (issue 15).

The rules are rendered by ``helm template`` (the chart is their only source), written to
a rule file, and handed to ``promtool check rules`` (syntax, PromQL, annotation
templates) and ``promtool test rules`` (rules_test.yaml: synthetic series, each alert
firing and not firing). promtool missing is a failure: ``scripts/install-promtool``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.integration.chart_config import helm_binary
from tests.integration.monitoring.assets import (
    OPERATIONS,
    alerts,
    heading_anchors,
    promtool,
    rule_groups,
    write_rules,
)

HERE = Path(__file__).parent
ALERTS = {
    "DelaybridgeEarlyDelivery",
    "DelaybridgeLatenessHigh",
    "DelaybridgeConsumerLagGrowing",
    "DelaybridgeDeadLetters",
    "DelaybridgeDiskFreeLow",
    "DelaybridgeIngestPausedForDisk",
    "DelaybridgePartitionUnowned",
    "DelaybridgeRestoreStuck",
    "DelaybridgeLoopStalled",
    "DelaybridgeTransactionsAborting",
    "DelaybridgeStoreCorrupt",
    "DelaybridgeDeliveredPastCancelHorizon",
    "DelaybridgeKafkaUnreachable",
}


@pytest.fixture(scope="module")
def helm() -> str:
    return helm_binary()


def run_unit_tests(helm: str, tmp_path: Path, *values: str) -> tuple[int, str]:
    write_rules(rule_groups(helm, *values), tmp_path / "delaybridge.rules.yaml", annotations=False)
    shutil.copy(HERE / "rules_test.yaml", tmp_path / "rules_test.yaml")
    done = promtool("test", "rules", "rules_test.yaml", cwd=tmp_path)
    return done.returncode, done.stdout + done.stderr


def test_promtool_check_rules(helm: str, tmp_path: Path) -> None:
    rules = write_rules(rule_groups(helm), tmp_path / "delaybridge.rules.yaml")
    done = promtool("check", "rules", str(rules))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in done.stdout


def test_promtool_unit_tests(helm: str, tmp_path: Path) -> None:
    status, output = run_unit_tests(helm, tmp_path)
    assert status == 0, output
    assert "SUCCESS" in output


@pytest.mark.parametrize(
    "values",
    [
        ("--set", "metrics.prometheusRule.diskFreeMinBytes=500000000"),
        ("--set", "metrics.prometheusRule.latenessP99Seconds=5"),
        ("--set", "metrics.prometheusRule.unownedFor=30m"),
        ("--set", "metrics.prometheusRule.kafkaUnreachableFor=5m"),
        ("--set-json", "metrics.prometheusRule.diskPausedShare=0.9"),
    ],
    ids=[
        "disk-floor",
        "lateness-threshold",
        "unowned-for",
        "kafka-unreachable-for",
        "disk-paused-share",
    ],
)
def test_promtool_unit_tests_follow_the_values(
    helm: str, tmp_path: Path, values: tuple[str, ...]
) -> None:
    """The unit tests must bite: changing a threshold the cases rely on fails them."""
    status, output = run_unit_tests(helm, tmp_path, *values)
    assert status != 0, f"promtool test rules passed with {values}:\n{output}"
    assert "FAILED" in output


def test_every_alert_has_a_runbook_and_a_severity(helm: str) -> None:
    rules = alerts(rule_groups(helm))
    assert {rule["alert"] for rule in rules} == ALERTS
    anchors = heading_anchors(OPERATIONS)
    for rule in rules:
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        notes = rule["annotations"]
        assert notes["summary"] and notes["description"], rule["alert"]
        base, _, anchor = notes["runbook_url"].partition("#")
        assert base.endswith("/docs/operations.md"), notes["runbook_url"]
        assert anchor == rule["alert"].lower()
        assert anchor in anchors, f"docs/operations.md has no section {rule['alert']}"


def test_rules_select_the_release_or_the_given_selector(helm: str) -> None:
    default = [rule["expr"] for rule in alerts(rule_groups(helm))]
    assert all('job="rel-delaybridge-metrics"' in expr for expr in default)
    chosen = 'namespace="kafka",service="db"'
    escaped = chosen.replace(",", "\\,")  # --set splits on unescaped commas
    custom = alerts(rule_groups(helm, "--set-string", f"metrics.prometheusRule.selector={escaped}"))
    assert all(chosen in rule["expr"] and "rel-delaybridge" not in rule["expr"] for rule in custom)
    labelled = alerts(rule_groups(helm, "--set", "metrics.prometheusRule.alertLabels.team=pay"))
    assert all(rule["labels"]["team"] == "pay" for rule in labelled)


def test_every_alert_has_a_case_that_fires_and_one_that_does_not() -> None:
    import yaml

    cases = yaml.safe_load((HERE / "rules_test.yaml").read_text())["tests"]
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in cases:
        for check in case["alert_rule_test"]:
            (fires if check["exp_alerts"] else quiet).add(check["alertname"])
    assert ALERTS - fires == set(), "alerts no case sees firing"
    assert ALERTS - quiet == set(), "alerts no case sees silent"

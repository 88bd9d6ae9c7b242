"""Command-line parsing for ``delaybridge reconcile``: times, durations, settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from delaybridge.cli import build_parser
from delaybridge.errors import ConfigError
from delaybridge.spark.cli import parse_time, settings_from_args
from delaybridge.spark.settings import DEFAULT_LATE_AFTER_MS, ReconcileSettings


def _settings(*argv: str) -> ReconcileSettings:
    args = build_parser().parse_args(["reconcile", *argv])
    result: ReconcileSettings = settings_from_args(args)
    return result


def test_parse_time_accepts_epoch_ms_rfc3339_and_durations_ago() -> None:
    assert parse_time("since", "1700000000000") == 1_700_000_000_000
    assert parse_time("since", "2026-01-31T08:00:00Z") == 1_769_846_400_000
    assert parse_time("since", "2h", now_ms=10_000_000) == 10_000_000 - 7_200_000
    assert parse_time("since", None) is None


def test_parse_time_names_the_option_when_it_cannot_parse() -> None:
    with pytest.raises(ConfigError, match="--until: 'yesterday'"):
        parse_time("until", "yesterday")


def test_defaults() -> None:
    s = _settings("--delay-topic", "delay")
    assert (s.bootstrap_servers, s.delay_topics, s.target_topics) == (
        "127.0.0.1:9092",
        ("delay",),
        (),
    )
    assert (s.window_ms, s.grace_ms, s.late_after_ms) == (60_000, 10_000, DEFAULT_LATE_AFTER_MS)
    assert (s.master, s.output_dir, s.chart, s.offline) == (
        "local[*]",
        Path("reconcile-report"),
        True,
        False,
    )


def test_options_reach_the_settings() -> None:
    s = _settings(
        "--bootstrap",
        "b:9092",
        "--delay-topic",
        "d1",
        "--delay-topic",
        "d2",
        "--target-topic",
        "t",
        "--window",
        "5m",
        "--grace",
        "30s",
        "--late-after",
        "250ms",
        "--since",
        "1000",
        "--until",
        "2000",
        "--no-chart",
        "--offline",
        "--master",
        "local[2]",
    )
    assert (s.delay_topics, s.target_topics) == (("d1", "d2"), ("t",))
    assert (s.window_ms, s.grace_ms, s.late_after_ms) == (300_000, 30_000, 250)
    assert (s.since_ms, s.until_ms, s.chart, s.offline, s.master) == (
        1000,
        2000,
        False,
        True,
        "local[2]",
    )


def test_sidecar_config_supplies_rules_brokers_and_tick(tmp_path: Path) -> None:
    config = tmp_path / "sidecar.yaml"
    config.write_text(
        "kafka: {bootstrap_servers: 'k:1'}\n"
        "delay_topics: [d]\nroutes: {d: orders}\nstore: {tick_ms: 250}\n"
    )
    s = _settings("--config", str(config))
    assert (s.bootstrap_servers, s.delay_topics, s.late_after_ms) == ("k:1", ("d",), 1_250)
    assert s.rules.routes == {"d": "orders"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "at least one delay topic"),
        (("--delay-topic", "d", "--window", "0s"), "window_ms must be > 0"),
        (("--delay-topic", "d", "--window", "soon"), "--window"),
        (("--delay-topic", "d", "--since", "2000", "--until", "1000"), "must be before"),
        (("--delay-topic", "d", "--target-topic", "d"), "both delay and target"),
    ],
)
def test_bad_options_are_config_errors(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _settings(*argv)

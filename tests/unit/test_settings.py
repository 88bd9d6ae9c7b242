"""Settings: file + environment, validation errors that name the setting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from delaybridge.bridge.tuning import store_settings_for
from delaybridge.errors import ConfigError
from delaybridge.settings import is_loopback, load


def test_env_beats_file_and_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("store:\n  tick_ms: 50\nkafka:\n  bootstrap_servers: a:1\n")
    monkeypatch.setenv("DELAYBRIDGE_STORE__TICK_MS", "20")
    monkeypatch.setenv("DELAYBRIDGE_KAFKA__CLIENT", '{"sasl.password": "s3cret"}')
    s = load(path)
    assert s.store.tick_ms == 20
    assert s.kafka.bootstrap_servers == "a:1"
    assert s.delivery.max_in_flight_records == 20_000
    assert s.kafka.redacted_client() == {"sasl.password": "***"}
    assert "s3cret" not in repr(s.kafka.redacted_client())


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("store:\n  tick_ms: -1\n", "store.tick_ms"),
        ("store:\n  bogus: 1\n", "store.bogus"),
        ("nope: 1\n", "nope"),
        ("delay_topic_pattern: '('\n", "delay_topic_pattern"),
        ("http:\n  host: 0.0.0.0\n", "admin_token"),
        ("- a list\n", "top level must be a mapping"),
    ],
)
def test_errors_name_the_setting(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")) as info:
        load(path)
    assert str(path) in str(info.value)


def test_subscription_pattern() -> None:
    assert load(None, delay_topic_pattern="delay\\..*").subscription() == ["^delay\\..*"]
    assert load(None, delay_topics=["a", "b"]).subscription() == ["a", "b"]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("::1", True),
        ("localhost", True),
        ("127.evil.example", False),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("example.org", False),
    ],
)
def test_one_loopback_rule_for_settings_and_server(host: str, loopback: bool) -> None:
    # A host name that merely starts with "127." may resolve anywhere: it needs a token,
    # in the settings exactly as in the HTTP server's own check.
    assert is_loopback(host) is loopback
    if loopback:
        assert load(None, http={"host": host}).http.host == host
    else:
        with pytest.raises(ConfigError, match="admin_token"):
            load(None, http={"host": host})


def test_cancel_grace_reaches_the_stores_and_the_feed() -> None:
    """``store.cancel_grace_ms`` was fixed at the store's 60 s: a test of a replica down
    for twice the grace (issue 10) had to wait minutes, and operators could not tune it."""
    assert store_settings_for(load(None)).cancel_grace_ms == 60_000
    assert store_settings_for(load(None, store={"cancel_grace_ms": 2_000})).cancel_grace_ms == 2_000
    with pytest.raises(ConfigError, match=r"store\.cancel_grace_ms"):
        load(None, store={"cancel_grace_ms": -1})


def test_the_documented_defaults_are_the_defaults() -> None:
    """docs/configuration.md shows every setting with its default: it names each one,
    and loads to exactly what an empty file gives (settings added later had fallen out)."""
    doc = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
    block = yaml.safe_load(doc.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert load(None, **block).model_dump(mode="json") == load(None).model_dump(mode="json")
    assert set(_paths(block)) == set(_paths(load(None).model_dump(mode="json")))


def _paths(tree: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for name, value in tree.items():
        if isinstance(value, dict) and name not in ("client", "routes", "rate_limits_per_s"):
            out += _paths(value, f"{prefix}{name}.")
        else:
            out.append(prefix + name)
    return out

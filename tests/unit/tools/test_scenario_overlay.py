"""Extra sidecar settings for a benchmark (``tools/scenario/overlay.py``): ``--set`` and
``--overlay`` parsed by the real command line, merged at every depth into the settings
``bench roll`` writes for a replica, and accepted by the sidecar's settings schema."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from delaybridge.cli import build_parser
from delaybridge.connectors import KafkaSettings
from delaybridge.settings import load
from delaybridge.tools.bench_roll import replica_config
from delaybridge.tools.scenario.overlay import load_overlay, merged, parse_set


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("store.cancel_grace_ms=2000", {"store": {"cancel_grace_ms": 2000}}),
        ("changelog.enabled=false", {"changelog": {"enabled": False}}),
        ("kafka.instance_id='007'", {"kafka": {"instance_id": "007"}}),
        ("a.b.c=x=y", {"a": {"b": {"c": "x=y"}}}),
        ("workers=", {"workers": ""}),
    ],
)
def test_set_reads_a_dotted_path_and_a_yaml_value(text: str, expected: object) -> None:
    assert parse_set(text) == expected


@pytest.mark.parametrize("text", ["store.tick_ms", "=1", ".a=1", "a..b=1", "a=[1"])
def test_set_refuses_what_is_not_a_path_and_a_value(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_set(text)


def test_merged_lays_overlays_over_the_base_at_every_depth_in_order() -> None:
    base = {"store": {"data_dir": "/d", "tick_ms": 100}, "kafka": {"client": {"a": "1"}}}
    first = {"store": {"tick_ms": 10}, "kafka": {"client": {"b": "2"}}}
    second = {"store": {"tick_ms": 20}, "workers": 2}
    assert merged(base, [first, second]) == {
        "store": {"data_dir": "/d", "tick_ms": 20},
        "kafka": {"client": {"a": "1", "b": "2"}},
        "workers": 2,
    }
    assert base["store"] == {"data_dir": "/d", "tick_ms": 100}  # unchanged
    assert merged({"store": {"tick_ms": 1}}, [{"store": 5}]) == {"store": 5}


def test_an_overlay_file_is_a_mapping(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("store:\n  cancel_grace_ms: 1500\n")
    assert load_overlay(good) == {"store": {"cancel_grace_ms": 1500}}
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_overlay(empty) == {}
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n")
    for path in (listed, tmp_path / "missing.yaml"):
        with pytest.raises(argparse.ArgumentTypeError, match=path.name):
            load_overlay(path)


def test_bench_roll_hands_the_settings_to_each_replica_over_its_own(tmp_path: Path) -> None:
    overlay = tmp_path / "horizon.yaml"
    overlay.write_text(
        "store:\n  cancel_grace_ms: 1500\n  tick_ms: 50\ndelivery:\n  linger_ms: 1\n"
    )
    args = build_parser().parse_args(
        ["bench", "roll", "--overlay", str(overlay), "--set", "store.cancel_grace_ms=2500"]
    )
    config = replica_config(
        KafkaSettings(bootstrap_servers="127.0.0.1:9"),
        tmp_path / "r1",
        "roll.delay",
        4242,
        [*args.overlay, *args.set],
    )
    settings = load(None, **config)  # what the replica's `delaybridge run` validates
    assert settings.store.cancel_grace_ms == 2500  # --set wins over the file
    assert settings.store.tick_ms == 50
    assert settings.delivery.linger_ms == 1
    assert settings.store.data_dir == tmp_path / "r1" / "data"  # its own, kept
    assert settings.http.port == 4242
    assert settings.kafka.bootstrap_servers == "127.0.0.1:9"

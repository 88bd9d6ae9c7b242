"""``delaybridge bench idle``'s parts that need no broker: the names of its variants and
the disk it counts (sparse files count the blocks they hold, not their length)."""

from __future__ import annotations

from pathlib import Path

from delaybridge.tools.bench_idle import _disk_bytes, _named
from delaybridge.tools.scenario.overlay import parse_set


def test_a_variant_is_named_by_its_settings() -> None:
    assert _named(parse_set("workers=1")) == "workers=1"
    assert _named(parse_set("store.tick_ms=50")) == "store.tick_ms=50"
    assert _named({"a": {"b": 1, "c": {"d": "x"}}, "e": 2}) == "a.b=1,a.c.d=x,e=2"


def test_disk_counts_blocks_not_lengths(tmp_path: Path) -> None:
    store = tmp_path / "data" / "delay-0"
    store.mkdir(parents=True)
    with (store / "wheel").open("wb") as f:
        f.truncate(64 << 20)  # 64 MiB long, nothing written: a hole
    (store / "log").write_bytes(b"x" * 8192)
    used = _disk_bytes(tmp_path / "data")
    assert 8192 <= used < 1 << 20
    assert _disk_bytes(tmp_path / "absent") == 0

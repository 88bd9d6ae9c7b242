"""The one atomic write: temp file, fsync, rename, fsync the directory; nothing half done."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from delaybridge.durable import replacing, write_atomic


def test_write_atomic_fsyncs_the_file_then_renames_then_fsyncs_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")
    steps: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        steps.append(f"fsync {Path(os.readlink(f'/proc/self/fd/{fd}')).name}")
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        steps.append(f"replace {Path(src).name} -> {Path(dst).name}")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomic(target, "new ✓")
    assert steps == [
        "fsync report.json.tmp",
        "replace report.json.tmp -> report.json",
        f"fsync {tmp_path.name}",
    ]
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "chart.png"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="renderer died"), replacing(target) as tmp:
        tmp.write_bytes(b"half a chart")
        raise RuntimeError("renderer died")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["chart.png"]


def test_unique_temporaries_keep_the_suffix_and_do_not_collide(tmp_path: Path) -> None:
    target = tmp_path / "kafka.jar"
    with (
        replacing(target, suffix=".part", unique=True) as a,
        replacing(target, suffix=".part", unique=True) as b,
    ):
        assert a != b and a.name.endswith(".part") and b.name.endswith(".part")
        assert a.parent == b.parent == tmp_path
        a.write_bytes(b"a")
        b.write_bytes(b"b")
    assert target.read_bytes() == b"a"  # the outer block finished last
    assert [p.name for p in tmp_path.iterdir()] == ["kafka.jar"]

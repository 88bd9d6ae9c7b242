"""The transactional.id outlives the process, so a restart fences its own zombie."""

from __future__ import annotations

from pathlib import Path

from delaybridge.bridge.transactions import ID_FILE, transactional_id


def test_explicit_then_static_member_then_kept_in_the_data_dir(tmp_path: Path) -> None:
    assert transactional_id("mine", "g", "pod-0", tmp_path) == "mine"
    assert transactional_id("", "g", "pod-0", tmp_path) == "g-pod-0"
    first = transactional_id("", "g", "", tmp_path / "data")
    assert first.startswith("g-") and (tmp_path / "data" / ID_FILE).read_text() == first
    assert transactional_id("", "g", "", tmp_path / "data") == first  # the restart
    assert transactional_id("", "g", "", tmp_path / "other") != first  # another replica

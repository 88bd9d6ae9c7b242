"""The sidecar process's collector settings (``bridge/cli/gc_tuning.py``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from delaybridge.bridge.cli import gc_tuning


@pytest.fixture
def restored() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


@pytest.mark.usefixtures("restored")
def test_tune_raises_the_young_threshold_and_freeze_takes_startup_out() -> None:
    gc_tuning.tune()
    assert gc.get_threshold() == gc_tuning.THRESHOLDS
    assert gc.get_threshold()[0] > 700  # CPython's default, which cost 10-15 % of the loop
    survivor = [object() for _ in range(10)]  # alive at "start-up"
    gc_tuning.freeze_startup()
    assert gc.get_freeze_count() > len(survivor)

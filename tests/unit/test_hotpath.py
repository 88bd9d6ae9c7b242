"""Which hot path runs (``delaybridge/hotpath.py``): the compiled build only when it
was made from the sources as they are, pure Python otherwise, and never silently the
fallback where the compiled build was expected."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from delaybridge import hotpath
from delaybridge.contract import classifier, classify
from delaybridge.timerlog import commit_codec, commit_record
from tests.unit.hot_impl import compiled


def test_the_compiled_build_is_the_one_imported_where_it_was_expected() -> None:
    """scripts/test sets DELAYBRIDGE_EXPECT_COMPILED=1 where the toolchain to build it
    exists: then a missing, stale or unselected build fails here, so no CI run (and no
    benchmark) measures the fallback by accident -- nor a stray DELAYBRIDGE_PURE_PYTHON."""
    if os.environ.get(hotpath.EXPECT_COMPILED_ENV) != "1":
        # Nothing expected: whatever was chosen, the facades use what select() chose.
        assert classify._core in (classifier, compiled() and compiled().classify)  # type: ignore[union-attr]
        return
    built = compiled()
    assert built is not None, (
        f"{hotpath.EXPECT_COMPILED_ENV}=1 but {hotpath.PACKAGE} is missing or stale: "
        "run scripts/bootstrap (python -m delaybridge.tools.build_compiled)"
    )
    assert classify._core is built.classify, hotpath.choices()
    assert commit_codec._core is built.codec, hotpath.choices()
    assert hotpath.implementation() == built.name == "mypyc"


def _fake_build(tmp: Path, name: str, stamp: str) -> None:
    """A stand-in for a compiled package: a module carrying a stamp (the loader does
    not care whether the module is an extension)."""
    pkg = tmp / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "classifier.py").write_text(f"SOURCE_SHA256 = {stamp!r}\nCOMPILER = 'fake'\n")


def test_a_build_of_another_source_version_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(hotpath.FORCE_PURE_ENV, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    _fake_build(tmp_path, "stale_build_pkg", "0" * 64)
    assert hotpath.select(classifier, package="stale_build_pkg") is classifier
    _fake_build(tmp_path, "fresh_build_pkg", hotpath.source_hash(str(classifier.__file__)))
    chosen = hotpath.select(classifier, package="fresh_build_pkg")
    assert chosen is sys.modules["fresh_build_pkg.classifier"]


def test_the_reason_for_a_stale_build_names_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(hotpath.FORCE_PURE_ENV, raising=False)
    sys.path.insert(0, str(tmp_path))
    try:
        _fake_build(tmp_path, "stale_reason_pkg", "1" * 64)
        module, impl, reason = hotpath._pick(classifier, "stale_reason_pkg")
    finally:
        sys.path.remove(str(tmp_path))
    assert (module, impl) == (classifier, "pure")
    assert "stale compiled build" in reason and str(classifier.__file__) in reason


def test_no_build_means_pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(hotpath.FORCE_PURE_ENV, raising=False)
    module, impl, reason = hotpath._pick(commit_record, "no_such_compiled_pkg")
    assert (module, impl) == (commit_record, "pure") and "no compiled build" in reason


def test_the_switch_forces_pure_python_even_with_a_current_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    _fake_build(tmp_path, "forced_pure_pkg", hotpath.source_hash(str(classifier.__file__)))
    monkeypatch.setenv(hotpath.FORCE_PURE_ENV, "1")
    module, impl, reason = hotpath._pick(classifier, "forced_pure_pkg")
    assert (module, impl) == (classifier, "pure") and hotpath.FORCE_PURE_ENV in reason


def test_under_the_switch_this_process_runs_pure_python() -> None:
    """The CI step that runs the hot-path tests with DELAYBRIDGE_PURE_PYTHON=1 really
    runs them on the fallback."""
    if hotpath.forced_pure():
        assert classify._core is classifier and commit_codec._core is commit_record
        assert hotpath.implementation() == "pure"
    else:
        assert hotpath.implementation() in ("pure", "mypyc", "mixed")


def test_the_running_implementation_is_reported() -> None:
    impl = hotpath.implementation()
    assert set(hotpath.choices()) == set(hotpath.SOURCES)
    assert {c.implementation for c in hotpath.choices().values()} == {impl}


def test_a_benchmark_can_switch_between_both_in_one_process() -> None:
    saved = classify._core, commit_codec._core, dict(hotpath._choices)
    try:
        assert hotpath.switch(compiled=False) == "pure"
        assert classify._core is classifier and commit_codec._core is commit_record
        built = compiled()
        expected = built.name if built is not None else "pure"
        if hotpath.forced_pure() or built is None:
            assert hotpath.switch(compiled=True) in (expected, "pure")
        else:
            assert hotpath.switch(compiled=True) == expected
            assert classify._core is built.classify and commit_codec._core is built.codec
    finally:
        classify._core, commit_codec._core = saved[0], saved[1]
        hotpath._choices.clear()
        hotpath._choices.update(saved[2])

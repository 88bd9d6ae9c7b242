"""Which implementation of the hot path runs: compiled with mypyc, or pure Python.

Two modules hold the per-record work of the sidecar: ``contract/classifier.py`` (the
header contract) and ``timerlog/commit_record.py`` (the commit-log record and its codec).
They are plain typed Python, and ``python -m delaybridge.tools.build_compiled`` (run by
``scripts/bootstrap`` and the image's build stage) compiles a *copy* of each with mypyc
into the separate package :data:`PACKAGE` (``delaybridge_compiled/``, never into the
source tree, ignored by git), stamping the copy with the SHA-256 of the source it was
made from. :func:`select` imports the compiled copy only if that stamp matches the
source file next to it, so an edited ``.py`` can never be shadowed by a stale build: it
falls back to the source (with a warning) until the build is redone.

Pure Python whenever the build is missing (no C compiler, a platform without a wheel)
or ``DELAYBRIDGE_PURE_PYTHON=1``. Which one runs is logged once per process and shown
by ``delaybridge version`` and the ``hot_path`` label of ``delaybridge_build_info``.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

PACKAGE = "delaybridge_compiled"
"""The top-level package the compiled copies are built into (next to ``delaybridge``)."""
FORCE_PURE_ENV = "DELAYBRIDGE_PURE_PYTHON"
"""Set to 1 to run the pure-Python hot path although a compiled one is installed."""
EXPECT_COMPILED_ENV = "DELAYBRIDGE_EXPECT_COMPILED"
"""Set to 1 (scripts/test does, where it built the compiled path) so that a test fails
when the compiled modules are not the ones imported."""
SOURCES = ("delaybridge.contract.classifier", "delaybridge.timerlog.commit_record")
"""The modules compiled, as the pure source modules' names."""
_FACADES = {
    "delaybridge.contract.classifier": "delaybridge.contract.classify",
    "delaybridge.timerlog.commit_record": "delaybridge.timerlog.commit_codec",
}


@dataclass(frozen=True)
class Choice:
    """What :func:`select` chose for one module, and why."""

    module: str
    implementation: str
    """``mypyc`` (or the compiler named by the build's stamp) or ``pure``."""
    reason: str


_choices: dict[str, Choice] = {}
_compiled: dict[str, ModuleType] = {}
"""The current compiled module of each source, whether or not the switch forced pure."""


def source_hash(path: str | Path) -> str:
    """The stamp a compiled copy of the module at ``path`` must carry."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def forced_pure() -> bool:
    return os.environ.get(FORCE_PURE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def select(pure: ModuleType, package: str = PACKAGE) -> ModuleType:
    """The compiled copy of ``pure`` from ``package`` if it is there and was built from
    exactly ``pure``'s source, else ``pure``; records the choice (:func:`choices`)."""
    module, impl, reason = _pick(pure, package)
    if package == PACKAGE and module is not pure:
        _compiled[pure.__name__] = module
    elif package == PACKAGE and forced_pure():
        with_build = _pick_ignoring_switch(pure, package)
        if with_build is not pure:
            _compiled[pure.__name__] = with_build
    choice = Choice(pure.__name__, impl, reason)
    if package == PACKAGE and _choices.get(pure.__name__) != choice:
        _choices[pure.__name__] = choice
        level = logging.WARNING if reason.startswith("stale") else logging.DEBUG
        log.log(level, "hot path: %s runs %s (%s)", pure.__name__, impl, reason)
    return module


def _pick(pure: ModuleType, package: str) -> tuple[ModuleType, str, str]:
    if forced_pure():
        return pure, "pure", f"{FORCE_PURE_ENV} is set"
    short = pure.__name__.rsplit(".", 1)[-1]
    name = f"{package}.{short}"
    try:
        compiled = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        return pure, "pure", f"no compiled build ({exc}); scripts/bootstrap makes one"
    except Exception as exc:  # a build for another interpreter, a damaged file: never fatal
        return pure, "pure", f"stale compiled build: {name} does not load: {exc!r}"
    source = pure.__file__
    want = source_hash(source) if source else ""
    have = getattr(compiled, "SOURCE_SHA256", None)
    if have != want:
        return (
            pure,
            "pure",
            f"stale compiled build: {compiled.__file__} was built from another version of "
            f"{source} (run python -m delaybridge.tools.build_compiled)",
        )
    return compiled, str(getattr(compiled, "COMPILER", "compiled")), f"{compiled.__file__}"


def _pick_ignoring_switch(pure: ModuleType, package: str) -> ModuleType:
    saved = os.environ.pop(FORCE_PURE_ENV, None)
    try:
        return _pick(pure, package)[0]
    finally:
        if saved is not None:
            os.environ[FORCE_PURE_ENV] = saved


def switch(compiled: bool) -> str:
    """Point the imported facades at the compiled build (if there is a current one) or at
    pure Python, in this process; returns :func:`implementation`. For benchmarks that
    compare both in one run (``bench store --hot-path``); the sidecar never switches."""
    for source, facade in _FACADES.items():
        module = sys.modules.get(facade)
        if module is None:
            continue
        chosen = _compiled.get(source) if compiled else None
        setattr(module, "_core", chosen or sys.modules[source])  # noqa: B010
        impl = str(getattr(chosen, "COMPILER", "compiled")) if chosen else "pure"
        _choices[source] = Choice(source, impl, "switched by a benchmark")
    return implementation()


def choices() -> dict[str, Choice]:
    """What each hot-path module runs in this process (those imported so far)."""
    return dict(_choices)


def implementation() -> str:
    """One word for the whole hot path: the compiler's name, ``pure``, or ``mixed``.

    Imports the hot-path modules first (each chooses when imported), so the answer is
    the same in a process that has not classified anything yet (the supervisor)."""
    for name in SOURCES:  # their facades (headers, commit_codec) select on import
        importlib.import_module(_FACADES[name])
    kinds = {c.implementation for c in _choices.values()}
    if len(kinds) == 1:
        return kinds.pop()
    return "mixed" if kinds else "pure"


def announce() -> str:
    """Log (once per call: once per process, at start) which hot path runs, and why."""
    impl = implementation()
    why = "; ".join(f"{c.module}: {c.implementation} ({c.reason})" for c in _choices.values())
    log.info("hot path: %s -- %s", impl, why)
    return impl

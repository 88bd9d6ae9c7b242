"""The hot path's implementations available to the tests: pure Python always, and the
compiled build (``delaybridge_compiled``) when it is installed and current.

:func:`use` points ``classify.classify`` and the ``commit_codec`` functions at one of
them; tests of classify and the codecs run once per implementation through the
``hot_impl`` fixture (``tests/unit/conftest.py``), so the fallback stays tested where
the compiled build is in use, and the compiled build is tested wherever it was built.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType

from delaybridge import hotpath
from delaybridge.contract import classifier, classify
from delaybridge.timerlog import commit_codec, commit_record


@dataclass(frozen=True)
class Impl:
    name: str
    classify: ModuleType
    codec: ModuleType


PURE = Impl("pure", classifier, commit_record)


def compiled() -> Impl | None:
    """The compiled build, if installed and built from the sources as they are now."""
    try:
        cls = importlib.import_module(f"{hotpath.PACKAGE}.classifier")
        cod = importlib.import_module(f"{hotpath.PACKAGE}.commit_record")
    except ImportError:
        return None
    for mod, pure in ((cls, classifier), (cod, commit_record)):
        if getattr(mod, "SOURCE_SHA256", None) != hotpath.source_hash(str(pure.__file__)):
            return None
    return Impl(str(getattr(cls, "COMPILER", "compiled")), cls, cod)


def available() -> list[Impl]:
    built = compiled()
    return [PURE] if built is None else [PURE, built]


@contextmanager
def use(impl: Impl) -> Iterator[Impl]:
    """Run ``classify.classify`` and ``commit_codec`` on ``impl`` inside the block."""
    saved = classify._core, commit_codec._core
    classify._core, commit_codec._core = impl.classify, impl.codec
    try:
        yield impl
    finally:
        classify._core, commit_codec._core = saved

"""Fixtures shared by the unit tests of several parts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.hot_impl import Impl, available, use


@pytest.fixture(scope="module", params=available(), ids=lambda impl: impl.name)
def hot_impl(request: pytest.FixtureRequest) -> Iterator[Impl]:
    """Each available hot-path implementation in turn (pure, and the compiled build
    where it is installed): the module's tests run once per implementation. Module
    scope, so hypothesis tests may use it."""
    with use(request.param) as impl:
        yield impl

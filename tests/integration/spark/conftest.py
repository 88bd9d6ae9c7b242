"""One real PySpark session for the whole test session, with the pinned Kafka connector.

Starting a JVM costs seconds, so every reconciliation test shares this session
(``local[2]``, the settings ``delaybridge reconcile`` uses). The connector jars are
fetched and verified through :func:`delaybridge.spark.connector.connector_jars`, exactly
as the CLI does; a missing Java or an unreachable Maven repository fails loudly.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from delaybridge.spark.connector import connector_jars
from delaybridge.spark.session import local_session
from delaybridge.spark.settings import default_jar_cache


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None:
        pytest.fail("PySpark needs a Java runtime on PATH (Java 17); none found")
    session = local_session(
        connector_jars(default_jar_cache(), progress=False),
        master="local[2]",
        driver_memory="1g",
        shuffle_partitions=2,
    )
    yield session
    session.stop()

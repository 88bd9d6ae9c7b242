"""Session-wide test setup: the shared Kafka cluster and the line that says which one it is.

``kafka`` is session-scoped and lazy: only tests that ask for it start a broker, so
``pytest tests/unit`` never does. Backends and their order: tests/kafka_backends.py and
docs/testing.md. If no backend works, every test that needs Kafka ERRORs with the
reason each backend failed; none is skipped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kafka_backends import BackendUnavailable, start_cluster
from tests.kafka_cluster import KafkaCluster

_used = pytest.StashKey[str]()


def pytest_report_header(config: pytest.Config) -> list[str]:
    forced = os.environ.get("DELAYBRIDGE_TEST_BACKEND")
    external = os.environ.get("DELAYBRIDGE_TEST_BOOTSTRAP")
    if forced:
        plan = f"{forced} (DELAYBRIDGE_TEST_BACKEND)"
    elif external:
        plan = f"external {external} (DELAYBRIDGE_TEST_BOOTSTRAP)"
    else:
        plan = "container, else local"
    image = os.environ.get("DELAYBRIDGE_KAFKA_IMAGE", "(local image if built, else public)")
    engine = os.environ.get("DOCKER_HOST", "(podman socket if running)")
    return [f"kafka backend: {plan}; image {image}; engine {engine}"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses the broker ``kafka``; refuse it under tests/unit."""
    unit_dir = Path(__file__).parent / "unit"
    misplaced = []
    for item in items:
        if "kafka" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)
            if item.path.is_relative_to(unit_dir):
                misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError(
            "unit tests must not need a broker; move these to tests/integration: "
            + ", ".join(misplaced)
        )


def _say(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    # Fixture setup runs with output captured; this line belongs in the live output.
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        reporter.ensure_newline()
        reporter.write_line(line, bold=True)


@pytest.fixture(scope="session")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    """The session's Kafka cluster (see tests/kafka_cluster.py for its API)."""
    try:
        cluster, failures = start_cluster(tmp_path_factory.mktemp("kafka"))
    except BackendUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    used = f"kafka backend: {cluster.backend.value} — {cluster.description}"
    if failures:
        used += " (not used: " + "; ".join(failures) + ")"
    request.config.stash[_used] = used
    _say(request.config, used)
    yield cluster
    cluster.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    used = terminalreporter.config.stash.get(_used, None)
    if used is not None:
        terminalreporter.write_line(used)

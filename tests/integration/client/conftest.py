"""The sidecar tests' fixtures (tests/integration/sidecar/conftest.py): this test's
topics, a real sidecar on them, a watcher of the targets and the dead-letter topic."""

from tests.integration.sidecar.conftest import make_settings, sidecar, topics, watcher

__all__ = ["make_settings", "sidecar", "topics", "watcher"]

"""Where the local broker keeps its jars and its data, and which Kafka it runs.

* Jars: ``$DELAYBRIDGE_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/delaybridge/jars``
  (``~/.cache/delaybridge/jars``). Shared by every data dir and by
  ``delaybridge kafka fetch``; safe to delete (it is refilled from Maven Central).
* Data: ``$DELAYBRIDGE_HOME/kafka`` if set, else
  ``$XDG_STATE_HOME/delaybridge/kafka`` (``~/.local/state/delaybridge/kafka``).
  A per-user location rather than ``./var/kafka`` so that ``kafka down`` and
  ``kafka status`` find the broker whatever the current directory is.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

KAFKA_VERSION = "4.3.1"
"""The Apache Kafka release the lock pins (``org.apache.kafka:kafka_2.13``)."""

LOCK_NAME = f"kafka-{KAFKA_VERSION}.lock"


def lock_file() -> Path:
    """The packaged lock of the broker's runtime classpath (package data)."""
    return Path(str(resources.files(__package__ or __name__).joinpath(LOCK_NAME)))


def default_cache_dir() -> Path:
    if explicit := os.environ.get("DELAYBRIDGE_CACHE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "delaybridge" / "jars"


def default_data_dir() -> Path:
    if home := os.environ.get("DELAYBRIDGE_HOME"):
        return Path(home) / "kafka"
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "delaybridge" / "kafka"

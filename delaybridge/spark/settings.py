"""What one reconciliation run reads, how it judges, and where it writes.

:class:`ReconcileSettings` is a plain frozen dataclass so that the CLI, ``spark-submit``
and Python callers (tests, the README demo) build it the same way; :meth:`from_sidecar`
derives it from the sidecar's own settings so the job classifies delay-topic records with
exactly the rules the sidecar used (routes, delay levels, maximum delay).

Judgement, per scheduled message (docs/reconciliation.md has the full table):

* *due* when ``due_ms <= as_of_ms - grace_ms`` — the grace leaves the sidecar time to
  deliver what fell due just before the snapshot;
* *early* when delivered before ``due_ms``; *late* when delivered more than
  ``late_after_ms`` after it (default: one 100 ms tick plus 1 s of processing);
* *duplicated* when delivered more than once: reported, and a failure of the run when
  the sidecar runs exactly-once (``exactly_once``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from delaybridge.connectors import KafkaSettings
from delaybridge.contract.rules import HeaderRules
from delaybridge.errors import ConfigError
from delaybridge.settings import DEFAULT_DELAY_LEVELS, Settings

DEFAULT_WINDOW_MS = 60_000
DEFAULT_GRACE_MS = 10_000
DEFAULT_TICK_MS = 100
DEFAULT_LATE_AFTER_MS = DEFAULT_TICK_MS + 1_000
DEFAULT_MAX_DELAY_MS = 365 * 86_400_000


def default_jar_cache() -> Path:
    """Where connector jars are cached: the same cache as the local broker's jars."""
    if explicit := os.environ.get("DELAYBRIDGE_CACHE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "delaybridge" / "jars"


@dataclass(frozen=True)
class ReconcileSettings:
    """One reconciliation run. Times are epoch milliseconds, durations milliseconds."""

    bootstrap_servers: str
    delay_topics: tuple[str, ...]
    # Empty: every target topic the delay topics' schedules name.
    target_topics: tuple[str, ...] = ()
    # The sidecar's dead-letter topic: its "expired" dead letters count as expired, not
    # missing (contract/expiry.py). None: not read.
    dead_letter_topic: str | None = None
    rules: HeaderRules = field(
        default_factory=lambda: HeaderRules.from_strings(DEFAULT_DELAY_LEVELS, DEFAULT_MAX_DELAY_MS)
    )
    # librdkafka-style client settings (security.protocol, sasl.*, ssl.*), passed to the
    # snapshot's admin client and, prefixed with "kafka.", to Spark's Kafka source.
    kafka_options: dict[str, str] = field(default_factory=dict)
    # Time range of the delay topics by record timestamp; None: earliest / the snapshot.
    since_ms: int | None = None
    until_ms: int | None = None
    # The judgement's "now"; None: the wall clock when the offsets are snapshotted.
    as_of_ms: int | None = None
    window_ms: int = DEFAULT_WINDOW_MS
    grace_ms: int = DEFAULT_GRACE_MS
    late_after_ms: int = DEFAULT_LATE_AFTER_MS
    output_dir: Path | None = Path("reconcile-report")
    chart: bool = True
    # Spark: local[*] suits a laptop; under spark-submit the cluster's settings win.
    master: str = "local[*]"
    driver_memory: str = "2g"
    shuffle_partitions: int = 4
    jar_cache_dir: Path = field(default_factory=default_jar_cache)
    offline: bool = False
    # How many offending ids per kind the JSON report lists (all of them go to Parquet).
    examples: int = 20
    # The sidecar runs exactly-once: a duplicate fails the run (targets are read
    # read_committed either way, so aborted transactions never count).
    exactly_once: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        if not self.delay_topics:
            raise ConfigError("reconcile: at least one delay topic is needed (--delay-topic)")
        for name, value in (
            ("window_ms", self.window_ms),
            ("shuffle_partitions", self.shuffle_partitions),
        ):
            if value <= 0:
                raise ConfigError(f"reconcile: {name} must be > 0, got {value}")
        for name, value in (("grace_ms", self.grace_ms), ("late_after_ms", self.late_after_ms)):
            if value < 0:
                raise ConfigError(f"reconcile: {name} must be >= 0, got {value}")
        if (
            self.since_ms is not None
            and self.until_ms is not None
            and self.since_ms >= self.until_ms
        ):
            raise ConfigError(
                f"reconcile: since ({self.since_ms}) must be before until ({self.until_ms})"
            )
        overlap = set(self.delay_topics) & set(self.target_topics)
        if overlap:
            raise ConfigError(f"reconcile: {sorted(overlap)} named as both delay and target topic")

    def kafka(self) -> KafkaSettings:
        """The cluster as the Kafka edge takes it (the snapshot's admin client)."""
        return KafkaSettings(bootstrap_servers=self.bootstrap_servers, client=self.kafka_options)

    @classmethod
    def from_sidecar(cls, sidecar: Settings, **overrides: object) -> ReconcileSettings:
        """Settings that judge with the sidecar's own rules, brokers and tick."""
        values: dict[str, object] = {
            "bootstrap_servers": sidecar.kafka.bootstrap_servers,
            "delay_topics": tuple(sidecar.delay_topics),
            "dead_letter_topic": sidecar.dead_letter_topic,
            "rules": HeaderRules.from_settings(sidecar),
            "kafka_options": dict(sidecar.kafka.client),
            "late_after_ms": sidecar.store.tick_ms + 1_000,
            "exactly_once": sidecar.delivery.exactly_once,
        }
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

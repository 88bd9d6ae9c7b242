"""The sidecar's settings: one YAML file plus ``DELAYBRIDGE_*`` environment overrides.

Precedence, highest first: environment variables, the YAML file, the defaults here.
Nested settings use ``__`` in the variable name, e.g. ``DELAYBRIDGE_KAFKA__BOOTSTRAP_SERVERS``
or ``DELAYBRIDGE_STORE__TICK_MS``. Every duration and size carries its unit in its name.
pydantic-settings does the parsing, validation and env mapping (docs/dependencies.md says
why it was chosen over hand-written code); errors name the setting at fault.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from delaybridge.connectors.settings import KafkaSettings as KafkaSettings  # Settings.kafka
from delaybridge.errors import ConfigError

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DAY_MS = 86_400_000


class _Section(BaseModel):
    """A settings section: unknown keys are errors (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid")


class StoreSettingsModel(_Section):
    data_dir: Path = Path("var/delaybridge")
    tick_ms: int = Field(default=100, gt=0)
    # The wheel's window is tick_ms * wheel_slots; longer delays are rolled.
    wheel_slots: int = Field(default=0, ge=0, description="0 = the store's default")
    max_delay_ms: int = Field(default=365 * DAY_MS, gt=0)
    flush_interval_ms: int = Field(default=200, gt=0)
    max_pending_messages: int = Field(default=50_000_000, gt=0)
    # Ingest pauses while the data directory has less free space than this, or when a
    # write finds no room (delivery goes on, and frees space); it resumes by itself
    # (bridge/disk_pause.py).
    min_free_bytes: int = Field(default=256 * 1024 * 1024, ge=0)
    # Hysteresis: a disk pause ends once this much more than min_free_bytes (plus what
    # the refused records need) is free -- at most an eighth of the volume is asked --
    # and the pause has lasted its wait (1 s, doubling to 10 s while resumes do not
    # hold); short of the margin, after 30 s once the refused records fit.
    resume_margin_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    # Size of a commit-log segment file. Space inside a segment comes back as messages
    # finish (holes punched out: docs/storage.md); a segment file is deleted whole once
    # nothing in it is live. Smaller files cost more files and descriptors, give back
    # the same space, and matter only on a file system without hole punching.
    commit_segment_bytes: int = Field(default=64 * 1024 * 1024, ge=4096)
    # How long a cancel that matched nothing waits for its message (it may still arrive
    # from a lagging delay-topic partition), and how far back a replica's cancel feed
    # reads on its very first start (later starts resume where it stopped).
    cancel_grace_ms: int = Field(default=60_000, ge=0)


class DeliverySettings(_Section):
    batch_max_records: int = Field(default=5_000, gt=0)
    # 20k in flight keeps a 1M-message tick at full speed under 300 MB RSS (bench e2e).
    max_in_flight_records: int = Field(default=20_000, gt=0)
    # A target topic that does not exist is retried with backoff this long, then dead-lettered.
    missing_topic_retry_ms: int = Field(default=60_000, ge=0)
    # Retryable failures (a broker restarting, timeouts, not enough replicas) are retried
    # with backoff this long, then dead-lettered as target-unavailable.
    retry_unavailable_ms: int = Field(default=3_600_000, ge=0)
    # Optional per-target-topic rate limits, messages per second.
    rate_limits_per_s: dict[str, float] = Field(default_factory=dict)
    # Optional per-target-topic expiry: a one-off message without a delay-expire-after
    # header is dead-lettered as "expired" once it is this long past due and not
    # delivered (contract/expiry.py).
    expire_after_ms: dict[str, int] = Field(default_factory=dict)
    # A recurring schedule's occurrences missed by more than this (the sidecar was down)
    # are skipped; those within it are caught up at once (contract/series.py).
    series_misfire_ms: int = Field(default=60_000, ge=0)

    @field_validator("expire_after_ms")
    @classmethod
    def _expiry_not_negative(cls, v: dict[str, int]) -> dict[str, int]:
        for topic, after in v.items():
            if after < 0:
                raise ValueError(f"expire_after_ms[{topic!r}] = {after}: expected >= 0 ms")
        return v

    # Exactly-once (Kafka transactions, docs/design/exactly-once.md): deliveries,
    # changelog writes, side writes and the delay-topic offsets commit together, every
    # transaction_interval_ms. Needs the changelog.
    exactly_once: bool = False
    transaction_interval_ms: int = Field(default=100, gt=0)
    # A transaction not committed within this is aborted by the broker (a hung replica
    # cannot hold read_committed consumers back for longer). Must not exceed the
    # broker's transaction.max.timeout.ms (default 15 min).
    transaction_timeout_ms: int = Field(default=10_000, ge=1_000)
    # The producer's transactional.id; empty: "<group>-<kafka.instance_id>" with static
    # membership, else "<group>-<uuid>" kept in the data directory (transactional-id).
    transactional_id: str = ""
    linger_ms: int = Field(default=5, ge=0)
    compression_type: str = "lz4"


class ChangelogSettings(_Section):
    """The changelog topics that make every store rebuildable from Kafka (DESIGN §5)."""

    enabled: bool = True
    # One compacted topic per delay topic, same partition count; {group} and {topic} are
    # replaced (as Kafka Streams names <application.id>-<store>-changelog).
    topic_template: str = "{group}-{topic}-changelog"
    # -1: the broker's default.replication.factor.
    replication_factor: int = Field(default=-1)
    # Compaction may rewrite a segment this long after its last write at the earliest.
    min_compaction_lag_ms: int = Field(default=0, ge=0)
    # Tombstones stay this long: a restore reading from the start within it sees them.
    delete_retention_ms: int = Field(default=86_400_000, gt=0)
    # Small segments and a low dirty ratio keep the uncompacted head, which a restore
    # reads in full, short.
    segment_ms: int = Field(default=3_600_000, gt=0)
    min_cleanable_dirty_ratio: float = Field(default=0.1, gt=0, lt=1)
    # A stored message's value is written this long after it was stored, at a flush
    # (bridge/state/changelog.py rule 2): one delivered or cancelled sooner costs the changelog
    # nothing (no value, no tombstone), as Kafka Streams' cache within commit.interval.ms.
    # The delay-topic offset commit waits for the values (a replica that lost its disk
    # re-reads up to this much). 0: at the next flush. Ignored in exactly-once mode
    # (every transaction writes all).
    write_behind_ms: int = Field(default=5_000, ge=0)
    # Values held back in all (~190 B each: a commit-log position); past it, the older
    # half of the storing partition's are written at once. Above what a steady stream
    # keeps waiting (20k msg/s of 1-5 s delays: ~60,000), and the 1M-in-one-tick RSS
    # stays under 300 MB (docs/benchmarks.md, fifth issue-13 session).
    write_behind_max_records: int = Field(default=80_000, gt=0)
    # Changelog records restored per loop turn (the loop keeps delivering meanwhile).
    restore_batch_records: int = Field(default=50_000, gt=0)
    # Warm standbys per partition: replicas that do not own a partition but keep its
    # store by tailing its changelog, so a failover catches up instead of restoring
    # (Kafka Streams' num.standby.replicas). 0: none.
    standby_replicas: int = Field(default=0, ge=0)

    def topic_for(self, group_id: str, delay_topic: str) -> str:
        return self.topic_template.format(group=group_id, topic=delay_topic)

    def topic_config(self) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "min.compaction.lag.ms": str(self.min_compaction_lag_ms),
            "delete.retention.ms": str(self.delete_retention_ms),
            "segment.ms": str(self.segment_ms),
            "min.cleanable.dirty.ratio": str(self.min_cleanable_dirty_ratio),
            "max.message.bytes": "10485760",
        }


class CancelSettings(_Section):
    # A bulk cancel by id prefix of more pending messages than this must be confirmed:
    # the admin API answers 409 with the count and wants confirm=<count>; a
    # delay-cancel-prefix header, which cannot confirm, is dead-lettered as
    # prefix-over-cap (counted in the stores of the replica that reads it:
    # docs/design/cancels.md).
    prefix_confirm_above: int = Field(default=1_000, ge=0)
    # Timer-log entries a prefix cancel's count, and then its sweep, examine per loop
    # turn (a few ms per 65,536 at 10M pending, docs/benchmarks.md).
    prefix_sweep_entries: int = Field(default=65_536, gt=0)


class CancelHorizonSettings(_Section):
    # A message due at T goes out only once every delay-topic partition's cancels appended
    # up to T are known to its store, or once T is this far in the past: then it goes
    # out anyway, counted (delaybridge_deliveries_past_horizon_total). Longer than a
    # session timeout (45 s) plus a takeover, so a replica that dies loses no cancel;
    # the price: a replica lost for good holds due messages back this long once.
    # 0: the rule is off (docs/design/cancel-horizon.md).
    bound_ms: int = Field(default=60_000, ge=0)
    # How often an owner checks that its partitions are read through, and publishes
    # their horizons for the other replicas, whose deliveries wait for them (half of it,
    # on average); messages due in the owner itself ask for a check at once. Only while
    # a message is due within a second somewhere; otherwise once a second (checks on
    # demand, docs/design/cancel-horizon.md).
    interval_ms: int = Field(default=50, gt=0)
    # The compacted topic owners publish their partitions' horizons to;
    # "" = "<cancel_topic>.horizon".
    topic: str = ""


class HttpSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    # Required when host is not a loopback address: the admin API then needs
    # "Authorization: Bearer <token>". /metrics, /healthz and /readyz stay open.
    admin_token: str = ""


class Settings(BaseSettings):
    """Everything the sidecar reads at start-up."""

    model_config = SettingsConfigDict(
        env_prefix="DELAYBRIDGE_", env_nested_delimiter="__", extra="forbid"
    )

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    # Delay topics: an explicit list, or a regex (librdkafka "^..." subscription).
    delay_topics: list[str] = Field(default_factory=lambda: ["delay"])
    delay_topic_pattern: str = ""
    # delay topic -> target topic, for records without a target header.
    routes: dict[str, str] = Field(default_factory=dict)
    dead_letter_topic: str = "delaybridge.dead-letter"
    # Cancels are re-published here so that every sidecar sees every cancel, whichever
    # delay-topic partition it landed in (DESIGN §2).
    cancel_topic: str = "delaybridge.cancels"
    delay_levels: str = DEFAULT_DELAY_LEVELS
    # Optional allow-list: a regex a target topic's whole name must match (empty: any
    # topic that is not one of the sidecar's own or a Kafka-internal one).
    target_topic_allow: str = ""
    # A CreateTime stamp further than this from the sidecar's clock is handled by
    # timestamp_policy: clamp (the delay counts from the edge of the window), dead-letter
    # (reason clock-skew) or trust. LogAppendTime stamps are always trusted.
    max_timestamp_skew_ms: int = Field(default=300_000, ge=0)
    timestamp_policy: Literal["clamp", "dead-letter", "trust"] = "clamp"
    store: StoreSettingsModel = Field(default_factory=StoreSettingsModel)
    delivery: DeliverySettings = Field(default_factory=DeliverySettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    changelog: ChangelogSettings = Field(default_factory=ChangelogSettings)
    cancel_horizon: CancelHorizonSettings = Field(default_factory=CancelHorizonSettings)
    cancels: CancelSettings = Field(default_factory=CancelSettings)
    shutdown_grace_ms: int = Field(default=30_000, gt=0)
    # Worker processes under one `delaybridge run`, each a group member with its own
    # stores (bridge/workers/identity.py, supervisor.py); 0 (the default): one per usable
    # core, as many as the memory limit has room for. 1: a single process.
    workers: int = Field(default=0, ge=0)
    max_delivery_backlog: int = Field(default=200_000, gt=0)

    @field_validator("delay_topic_pattern", "target_topic_allow")
    @classmethod
    def _pattern_compiles(cls, value: str) -> str:
        if value:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _exactly_once_needs_changelog(self) -> Settings:
        if self.delivery.exactly_once and not self.changelog.enabled:
            raise ValueError(
                "delivery.exactly_once=true needs changelog.enabled=true: the committed "
                "changelog is what says which messages are still pending after a restart"
            )
        return self

    @model_validator(mode="after")
    def _admin_token_off_loopback(self) -> Settings:
        if not is_loopback(self.http.host) and not self.http.admin_token:
            raise ValueError(
                f"http.host={self.http.host!r} is not a loopback address, so "
                "http.admin_token must be set (DELAYBRIDGE_HTTP__ADMIN_TOKEN)"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment beats the file (passed as init kwargs by load()).
        return (env_settings, init_settings)

    @property
    def horizon_topic(self) -> str:
        """The cancel horizon's topic (``cancel_horizon.topic``, or the cancel topic's
        name with ``.horizon``)."""
        return self.cancel_horizon.topic or f"{self.cancel_topic}.horizon"

    def subscription(self) -> list[str]:
        """Topics (or one ``^regex``) for the consumer's subscribe()."""
        if self.delay_topic_pattern:
            pattern = self.delay_topic_pattern
            return [pattern if pattern.startswith("^") else "^" + pattern]
        return list(self.delay_topics)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any loopback IP literal (127.0.0.0/8, ::1).

    The one rule for "the admin API may go without a token"; the settings and the
    HTTP server both apply it. Any other host name (``127.evil.example`` included)
    may resolve anywhere, so it counts as off loopback.
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load(path: Path | None = None, **overrides: Any) -> Settings:
    """Read the YAML file (if any), apply env overrides and ``overrides``; validate.

    ``path`` defaults to ``$DELAYBRIDGE_CONFIG`` when that is set.
    """
    if path is None and os.environ.get("DELAYBRIDGE_CONFIG"):
        path = Path(os.environ["DELAYBRIDGE_CONFIG"])
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file {path}: top level must be a mapping")
        data = loaded or {}
    data.update(overrides)
    try:
        return Settings(**data)
    except ValidationError as exc:
        where = f" in {path}" if path else ""
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"invalid settings{where}: {problems}") from exc

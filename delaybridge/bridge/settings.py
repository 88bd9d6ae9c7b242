"""The sidecar's settings: one YAML file plus ``DELAYBRIDGE_*`` environment overrides.

Precedence, highest first: environment variables, the YAML file, the defaults here.
Nested settings use ``__`` in the variable name, e.g. ``DELAYBRIDGE_KAFKA__BOOTSTRAP_SERVERS``
or ``DELAYBRIDGE_STORE__TICK_MS``. Every duration and size carries its unit in its name.
pydantic-settings does the parsing, validation and env mapping (docs/dependencies.md says
why it was chosen over hand-written code); errors name the setting at fault.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from delaybridge.errors import ConfigError

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DAY_MS = 86_400_000

# librdkafka keys whose values are secrets: never logged, never shown by `status`.
SECRET_KEYS = ("sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.key.pem")


class _Section(BaseModel):
    """A settings section: unknown keys are errors (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid")


class KafkaSettings(_Section):
    bootstrap_servers: str = "127.0.0.1:9092"
    group_id: str = "delaybridge"
    # Static membership (group.instance.id); the Helm chart sets it from the pod name.
    instance_id: str = ""
    # Passed verbatim to librdkafka for every client: security.protocol, sasl.*, ssl.*, ...
    client: dict[str, str] = Field(default_factory=dict)
    session_timeout_ms: int = Field(default=45_000, gt=0)
    request_timeout_ms: int = Field(default=30_000, gt=0)

    def redacted_client(self) -> dict[str, str]:
        return {k: ("***" if k in SECRET_KEYS else v) for k, v in self.client.items()}


class StoreSettingsModel(_Section):
    data_dir: Path = Path("var/delaybridge")
    tick_ms: int = Field(default=100, gt=0)
    # The wheel's window is tick_ms * wheel_slots; longer delays are rolled.
    wheel_slots: int = Field(default=0, ge=0, description="0 = the store's default")
    max_delay_ms: int = Field(default=365 * DAY_MS, gt=0)
    flush_interval_ms: int = Field(default=200, gt=0)
    max_pending_messages: int = Field(default=50_000_000, gt=0)


class DeliverySettings(_Section):
    batch_max_records: int = Field(default=5_000, gt=0)
    # 20k in flight keeps a 1M-message tick at full speed under 300 MB RSS (bench e2e).
    max_in_flight_records: int = Field(default=20_000, gt=0)
    # A target topic that does not exist is retried with backoff this long, then dead-lettered.
    missing_topic_retry_ms: int = Field(default=60_000, ge=0)
    # Optional per-target-topic rate limits, messages per second.
    rate_limits_per_s: dict[str, float] = Field(default_factory=dict)
    exactly_once: bool = False
    linger_ms: int = Field(default=5, ge=0)
    compression_type: str = "lz4"


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
    store: StoreSettingsModel = Field(default_factory=StoreSettingsModel)
    delivery: DeliverySettings = Field(default_factory=DeliverySettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    shutdown_grace_ms: int = Field(default=30_000, gt=0)
    max_delivery_backlog: int = Field(default=200_000, gt=0)

    @field_validator("delay_topic_pattern")
    @classmethod
    def _pattern_compiles(cls, value: str) -> str:
        if value:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _admin_token_off_loopback(self) -> Settings:
        if not _is_loopback(self.http.host) and not self.http.admin_token:
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

    def subscription(self) -> list[str]:
        """Topics (or one ``^regex``) for the consumer's subscribe()."""
        if self.delay_topic_pattern:
            pattern = self.delay_topic_pattern
            return [pattern if pattern.startswith("^") else "^" + pattern]
        return list(self.delay_topics)


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


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

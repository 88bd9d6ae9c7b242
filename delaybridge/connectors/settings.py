"""How delaybridge reaches Kafka: brokers, consumer group, and librdkafka client settings.

:class:`KafkaSettings` is the ``kafka:`` section of the sidecar's settings file, and the
only input of :class:`~delaybridge.connectors.clients.KafkaClients`, which turns it into
librdkafka configurations. Whatever a deployment needs to reach its cluster — TLS, SASL,
timeouts — goes into ``client`` once and then reaches every client delaybridge builds:
the sidecar's, the CLI's, the demo's, the benchmarks' and the Spark job's snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

# librdkafka keys whose values are secrets: never logged, never shown by `status`.
SECRET_KEYS = ("sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.key.pem")
REDACTED = "***"

V = TypeVar("V")


def redact(config: Mapping[str, V]) -> dict[str, V | str]:
    """``config`` with the value of every :data:`SECRET_KEYS` key replaced by ``***``."""
    return {k: (REDACTED if k in SECRET_KEYS else v) for k, v in config.items()}


class KafkaSettings(BaseModel):
    """Brokers, group and client settings; unknown keys are errors (typos must not pass)."""

    model_config = ConfigDict(extra="forbid")

    bootstrap_servers: str = "127.0.0.1:9092"
    group_id: str = "delaybridge"
    # Static membership (group.instance.id); the Helm chart sets it from the pod name.
    # Empty: a static id generated once and kept in the sidecar's data directory
    # (bridge/workers/membership.py), unless static_membership is false.
    instance_id: str = ""
    # False: a dynamic member when instance_id is empty (after a lost session, Kafka
    # hands its partitions out again only once the old member id expires).
    static_membership: bool = True
    # Passed verbatim to librdkafka for every client: security.protocol, sasl.*, ssl.*, ...
    client: dict[str, str] = Field(default_factory=dict)
    session_timeout_ms: int = Field(default=45_000, gt=0)
    request_timeout_ms: int = Field(default=30_000, gt=0)

    def redacted_client(self) -> dict[str, str]:
        """``client`` fit for a log line or the ``status`` command: secrets are ``***``."""
        return redact(self.client)

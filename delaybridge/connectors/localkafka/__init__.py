"""A local Apache Kafka 4.x broker for development and tests, from pinned Maven jars.

``LocalKafka(data_dir, port=..., controller_port=...).start()`` fetches the
pinned runtime classpath (``kafka-<version>.lock``), formats KRaft storage and
runs a single-node broker+controller on 127.0.0.1 until ``stop()``. The CLI is
``delaybridge kafka up|down|status|fetch``; docs/local-kafka.md has the details.
"""

from delaybridge.connectors.localkafka.broker import (
    BrokerState,
    BrokerStatus,
    LocalKafka,
    StartOutcome,
)
from delaybridge.connectors.localkafka.errors import (
    BrokerStartError,
    JavaNotFoundError,
    LocalKafkaError,
    PortInUseError,
)
from delaybridge.connectors.localkafka.paths import (
    KAFKA_VERSION,
    default_cache_dir,
    default_data_dir,
    lock_file,
)

__all__ = [
    "KAFKA_VERSION",
    "BrokerStartError",
    "BrokerState",
    "BrokerStatus",
    "JavaNotFoundError",
    "LocalKafka",
    "LocalKafkaError",
    "PortInUseError",
    "StartOutcome",
    "default_cache_dir",
    "default_data_dir",
    "lock_file",
]

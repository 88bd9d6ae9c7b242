"""The changelog topics: one per delay topic, created and checked by the sidecar.

``changelog.topic_template`` names them (default ``{group}-{topic}-changelog``, as Kafka
Streams names ``<application.id>-<store>-changelog``); each has its delay topic's
partition count (partition p's store has its changelog in partition p), and the topic
configuration of :meth:`ChangelogSettings.topic_config`: compacted, tombstones kept for
``delete_retention_ms``, small segments and a low dirty ratio so the uncompacted head a
restore must read stays short. An existing topic with another partition count is an
error: the sidecar refuses to start rather than mix up stores.
"""

from __future__ import annotations

from delaybridge.connectors import ensure_topics
from delaybridge.connectors.edge import AdminEdge, ConsumerEdge
from delaybridge.errors import ConfigError
from delaybridge.settings import ChangelogSettings


class ChangelogTopics:
    def __init__(self, settings: ChangelogSettings, group_id: str) -> None:
        self.settings = settings
        self._group = group_id
        self._ensured: set[str] = set()
        self._names: dict[str, str] = {}

    def topic_for(self, delay_topic: str) -> str:
        """The changelog topic of ``delay_topic`` (asked once per delivered record:
        formatting the template each time was ~4 % of a drain, docs/benchmarks.md)."""
        name = self._names.get(delay_topic)
        if name is None:
            name = self._names[delay_topic] = self.settings.topic_for(self._group, delay_topic)
        return name

    def ensure(self, admin: AdminEdge, metadata: ConsumerEdge, delay_topic: str) -> str:
        """Create the delay topic's changelog if missing; check its partition count."""
        topic = self.topic_for(delay_topic)
        if topic in self._ensured:
            return topic
        partitions = partition_count(metadata, delay_topic)
        ensure_topics(
            admin,
            {topic: self.settings.topic_config()},
            partitions=partitions,
            replication_factor=self.settings.replication_factor,
        )
        have = partition_count(metadata, topic)
        if have != partitions:
            raise ConfigError(
                f"changelog topic {topic!r} has {have} partitions, delay topic "
                f"{delay_topic!r} has {partitions}: they must match (one store per partition)"
            )
        self._ensured.add(topic)
        return topic


def partition_count(metadata: ConsumerEdge, topic: str) -> int:
    found = metadata.list_topics(topic, timeout=30).topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        why = "not found" if found is None else (found.error or "no partitions")
        raise ConfigError(f"topic {topic!r}: {why}")
    return len(found.partitions)

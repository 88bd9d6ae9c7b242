"""The sidecar's state in Kafka, put together from the settings (DESIGN §5).

:func:`build` makes the three parts the ``changelog`` settings call for: the changelog
writer (``bridge/state/changelog.py``), the restore hook of the partition life cycle
(``bridge/state/restore_hook.py``) and, with ``standby_replicas``, the warm standbys
(``bridge/state/standby.py``), each restore consumer with its own throw-away group id (they
assign partitions themselves and never commit).
"""

from __future__ import annotations

from dataclasses import dataclass

from delaybridge.bridge.flow import FlowControl
from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.bridge.produce.resend import Resender
from delaybridge.bridge.state.changelog import Changelog
from delaybridge.bridge.state.restore_hook import RestoreHook
from delaybridge.bridge.state.restorer import CONSUMER_SETTINGS, Restorer
from delaybridge.bridge.state.standby import GroupView, Standbys
from delaybridge.bridge.state.topics import ChangelogTopics
from delaybridge.connectors.edge import AdminEdge, ClientFactory, ConsumerEdge
from delaybridge.settings import Settings
from delaybridge.timerlog import Clock, StoreSettings


@dataclass(frozen=True)
class KafkaState:
    changelog: Changelog
    restoring: RestoreHook
    standbys: Standbys | None


def build(
    settings: Settings,
    clients: ClientFactory,
    outbox: Outbox,
    resender: Resender,
    clock: Clock,
    admin: AdminEdge,
    flow: FlowControl,
    store_settings: StoreSettings,
) -> KafkaState | None:
    """The parts, or None when ``changelog.enabled`` is off."""
    cl = settings.changelog
    group = settings.kafka.group_id
    if not cl.enabled:
        return None
    changelog = Changelog(
        ChangelogTopics(cl, group), outbox, resender, clock, settings.delivery.max_in_flight_records
    )

    def reader(purpose: str) -> Restorer:
        overrides = {"group.id": f"{group}.{purpose}", **CONSUMER_SETTINGS}

        def new_consumer() -> ConsumerEdge:
            return clients.consumer(overrides, group=False)

        return Restorer(new_consumer(), cl.restore_batch_records, new_consumer)

    restoring = RestoreHook(changelog, reader("restore"), admin, flow)
    standbys = None
    if cl.standby_replicas:
        standbys = Standbys(
            cl.standby_replicas,
            settings.kafka.instance_id,
            GroupView(admin, group, clock),
            reader("standby"),
            restoring,
            store_settings,
            clock,
        )
    return KafkaState(changelog, restoring, standbys)

"""The sidecar's state in Kafka: every store rebuildable from a changelog (DESIGN §5).

- ``changelog``: values written behind, tombstones, progress records (:class:`Changelog`);
- ``held_values``: values waiting to be written, as commit-log positions;
- ``seeding``: a store older than its changelog written to it; values to write again
  after a crash;
- ``topics``: the changelog topics, created and checked;
- ``restorer``: reading a changelog into a store (:class:`Restorer`, restore tasks);
- ``restore_hook``: the partition life cycle's restore hook (:class:`RestoreHook`);
- ``standby``: warm standbys of partitions owned elsewhere (:class:`Standbys`);
- ``assembly``: the parts the settings call for, put together (:func:`assembly.build`).
"""

from delaybridge.bridge.state.changelog import Changelog
from delaybridge.bridge.state.restore_hook import RestoreHook
from delaybridge.bridge.state.restorer import Restorer
from delaybridge.bridge.state.standby import Standbys

__all__ = ["Changelog", "RestoreHook", "Restorer", "Standbys"]

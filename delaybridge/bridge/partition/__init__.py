"""One owned delay-topic partition: its store, offsets, delivery pipeline and role.

- ``state``: :class:`PartitionState`, its :class:`Role`, and :func:`open_partition`
  (recover the store, decide where consumption resumes);
- ``pipeline``: the partition's due records on their way out (:class:`DeliveryPipeline`);
- ``copies``: a stored message's copies (a parked copy's state, each copy's generation).
"""

from delaybridge.bridge.partition.pipeline import Batch, DeliveryPipeline
from delaybridge.bridge.partition.state import PartitionState, PartKey, Role, open_partition

__all__ = ["Batch", "DeliveryPipeline", "PartKey", "PartitionState", "Role", "open_partition"]

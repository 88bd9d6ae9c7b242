"""Due records out: taken from the stores in bounded batches, produced, accounted for.

- ``deliverer``: the pump and the hot loop (:class:`Deliverer`);
- ``attempts``: a record whose first try failed, and its parked copy (:class:`Attempt`);
- ``failure_rules``: what a failure becomes, a retry or a dead letter (:func:`judge`);
- ``occurrences``: a recurring schedule's next occurrence, spawned once (:class:`Spawner`);
- ``rate_limits``: per-target-topic token buckets.
"""

from delaybridge.bridge.delivery.deliverer import Deliverer

__all__ = ["Deliverer"]

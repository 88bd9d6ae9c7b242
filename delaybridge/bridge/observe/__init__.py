"""What the sidecar counts and exports to Prometheus.

- ``tally``: every counter declared once, as the field the loop counts into; counts
  since the last refresh, one drain protocol (:class:`Tally`);
- ``metrics``: the sidecar's Prometheus registry, one counter per declared field
  (:class:`Metrics`);
- ``partition_metrics``: series per delay-topic partition;
- ``lateness``: a histogram fed a whole batch per call;
- ``labels``: a metric's labels, and the budget that bounds topic labels.
"""

from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.observe.tally import Tally

__all__ = ["Metrics", "Tally"]

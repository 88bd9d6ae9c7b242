"""What the sidecar counts and exports to Prometheus.

- ``tally``: counts since the last refresh, one drain protocol (:class:`Tally`);
- ``metrics``: the sidecar's Prometheus registry (:class:`Metrics`);
- ``partition_metrics``: series per delay-topic partition;
- ``lateness``: a histogram fed a whole batch per call;
- ``labels``: topic labels with a budget.
"""

from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.observe.tally import Tally

__all__ = ["Metrics", "Tally"]

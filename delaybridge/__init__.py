"""delaybridge: arbitrary-delay and scheduled messages for Apache Kafka.

Parts (one subpackage each): ``bridge`` (service loop, control API), ``wheel`` (the
on-disk time wheel), ``timerlog`` (commit log, timer log, recovery), ``connectors``
(Kafka edges and the local development broker), ``spark`` (reconciliation jobs).
"""

from delaybridge.errors import DelayBridgeError

__version__ = "0.1.0"
__all__ = ["DelayBridgeError", "__version__"]

"""Whether Kafka is reachable, said once: one tracker fed by every client of the sidecar.

Public names:

* :class:`KafkaReachability` (``tracker.py``) — the state (reachable, checking,
  unreachable), the log lines that say it, the rate limit on client errors, the
  ``/readyz`` reason; :class:`Reachability`, :class:`Outage`.
* :class:`ReportingClients` (``clients.py``) — a client factory whose clients all report
  to the tracker (error callback and log lines) and whose idle clients it serves.
* :class:`TcpListenerProbe`, :class:`ListenerProbe`, :class:`ListenerCheck`
  (``probe.py``) — the TCP connect to the bootstrap servers that tells "back".
* :class:`RepeatLimiter` (``repeats.py``) — the first line of a kind per window.

docs/design/kafka-outage.md gives the rules and their reasons.
"""

from delaybridge.connectors.reachability.clients import ReportingClients
from delaybridge.connectors.reachability.probe import (
    ListenerCheck,
    ListenerProbe,
    TcpListenerProbe,
)
from delaybridge.connectors.reachability.repeats import RepeatLimiter
from delaybridge.connectors.reachability.tracker import KafkaReachability, Outage, Reachability

__all__ = [
    "KafkaReachability",
    "ListenerCheck",
    "ListenerProbe",
    "Outage",
    "Reachability",
    "RepeatLimiter",
    "ReportingClients",
    "TcpListenerProbe",
]

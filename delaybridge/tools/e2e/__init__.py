"""``delaybridge bench e2e``: the sidecar end to end, against a passthrough forwarder.

Three measurements, one broker, one run (issue 4):

1. **throughput** — N records (100-byte values) whose due times are spread over a
   minute that has just passed are put in the delay topic; the sidecar (a real
   ``delaybridge run`` child process) is started and timed from its first stored record
   to the last delivery acknowledgement. The passthrough forwarder
   (``tools/passthrough.py``, same client settings, no store) moves the same N records
   between two topics: the ceiling. The ratio is the headline number. The sidecar runs
   twice on the same data, with the changelog on (the default) and off:
   ``changelog_cost_ratio`` is on / off.
2. **lateness** — a producer sends a steady 5k msg/s for ``--steady-s`` seconds with
   delays of 1–5 s; a consumer of the target topic computes lateness = broker
   timestamp − ``delay-due-ms`` for every record: p50/p99/max and the early count,
   with the changelog on, then off (keys ending ``_no_changelog``).
3. **one tick** — dequeue is paused through the admin API, 1M records all due at the
   same millisecond are stored, dequeue is resumed: drain rate and the sidecar's peak
   RSS (``VmHWM``).

Modules: ``run`` (the command: broker, measurements, JSON, table), ``measure`` (the
three measurements), ``sidecar`` (the sidecar as a child process), ``traffic`` (bulk
producing and counting what arrived). Every client comes from one
:class:`~delaybridge.connectors.KafkaClients`, so ``--config`` (TLS, SASL) reaches all.
"""

from delaybridge.tools.e2e.run import run_e2e

__all__ = ["run_e2e"]

"""Traffic and judgement for the operations scenarios of issue 25 (a rolling restart of
the replicas, Kafka unreachable), shared by the scenario tests on the real broker and
the benchmark of the rolling restart.

- :mod:`~delaybridge.tools.scenario.load` — a steady stream of schedules, a share of them
  cancelled from a random partition, every acknowledgement kept;
- :mod:`~delaybridge.tools.scenario.arrivals` — the target topics read on a thread, each
  delivery with the moment it was seen;
- :mod:`~delaybridge.tools.scenario.verdict` — lost, early, cancelled delivered,
  duplicates and lateness from those two, without a broker.
"""

"""Traffic and judgement for the operations scenarios of issue 25 (a rolling restart of
the replicas, Kafka unreachable): ``delaybridge bench roll`` and the scenario tests on the
real broker share them.

- :mod:`~delaybridge.tools.scenario.load` — a steady stream of schedules, a share of them
  cancelled from a random partition, every acknowledgement kept;
- :mod:`~delaybridge.tools.scenario.arrivals` — the target topics read on a thread, each
  delivery with the moment it was seen;
- :mod:`~delaybridge.tools.scenario.verdict` — lost, early, cancelled delivered,
  duplicates and lateness from those two, without a broker;
- :mod:`~delaybridge.tools.scenario.roll_report` — what ``bench roll`` reports: restart
  times, lateness by window, the verdict's counts;
- :mod:`~delaybridge.tools.scenario.replica` — a ``delaybridge run`` replica with its own
  data directory, stopped, killed and started again;
- :mod:`~delaybridge.tools.scenario.overlay` — extra sidecar settings from the command
  line (``--set key=value``, ``--overlay FILE``).
"""

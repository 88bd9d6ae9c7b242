"""Tools around the product: the README's demo, the end-to-end benchmark, the passthrough.

The top of the package graph (tools -> spark | bridge -> contract -> settings -> timerlog
-> wheel): the demo runs the sidecar and then the Spark reconciliation, and the benchmark
drives a sidecar child process, so they may import any part and no part imports them.

* :func:`delaybridge.tools.demo.run_demo` — ``delaybridge demo``;
* :func:`delaybridge.tools.e2e.run_e2e` — ``delaybridge bench e2e``;
* :func:`delaybridge.tools.passthrough.run_passthrough` — the benchmark's ceiling;
* :func:`delaybridge.tools.bench_roll.run_roll_bench` — ``delaybridge bench roll``, on the
  traffic and verdict of :mod:`delaybridge.tools.scenario` (shared with the scenario tests);
* :mod:`delaybridge.tools.bench_kit` — the cluster (given, or a local broker) and the
  JSON and table that every ``bench`` command shares.

``delaybridge.tools.cli`` registers the two commands. (The repository's top-level
``tools/`` directory holds maintainers' scripts; it is not this package.)
"""

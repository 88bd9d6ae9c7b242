"""etf1/kafka-message-scheduler, the Go peer of issue 26, as a benchmark child process.

``scripts/build-etf1`` builds it (v0.0.9, ``./cmd/kafka``). It is configured only by
environment variables (``config/config.go`` of its module); the benchmark sets those that
name its Kafka resources and ports and leaves every other setting at its default:

===========================  =============================================================
variable                     set to
===========================  =============================================================
``BOOTSTRAP_SERVERS``        the benchmark's cluster
``SCHEDULES_TOPICS``         the run's fresh schedules topic (etf1's "delay topic")
``GROUP_ID``                 ``bench-<schedules topic>``: its own consumer group
``HISTORY_TOPIC``            the run's fresh history topic (a copy of every delivery)
``METRICS_ADDR``             a free loopback port: Prometheus ``/metrics``
``SERVER_ADDR``              a free loopback port: its REST API
``CONFIGURATION_FILE``       only when the cluster has client settings (TLS, SASL): they
                             go to ``kafka.common.configuration``
===========================  =============================================================

Its debug server listens on ``:6060`` whatever the settings; when that port is taken it
logs the error and runs on. What it does with a schedule (headers ``scheduler-epoch``,
``scheduler-target-topic``, ``scheduler-target-key``; the record key is its id): plans it
in memory when it is due today, produces it to the target at its second with the
schedule's own headers plus ``scheduler-timestamp``/``-key``/``-topic``, then a copy to
the history topic and a tombstone to the schedules topic.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path

from delaybridge.connectors import KafkaSettings
from delaybridge.errors import DelayBridgeError
from delaybridge.tools.e2e.sidecar import (
    free_port,
    tree_cpu_seconds,
    tree_status_mb,
    wait_for_child,
)

#: The Prometheus sample of schedules planned (taken in memory to fire at their second).
_PLANNED = re.compile(
    r'^kafka_scheduler_event_total\{type="kafka_scheduler_planned_schedule"\} (\S+)$', re.M
)


class Etf1Process:
    """etf1's scheduler binary in a child process, on one schedules topic.

    Started by the constructor (not yet known to consume: the caller waits for a
    schedule to go through); :meth:`stop` sends SIGTERM, as its ``main`` expects."""

    def __init__(
        self, binary: Path, kafka: KafkaSettings, work: Path, schedules: str, history: str
    ) -> None:
        if not os.access(binary, os.X_OK):
            raise DelayBridgeError(
                f"etf1 scheduler binary {binary} is not an executable file (build it with "
                "scripts/build-etf1)"
            )
        work.mkdir(parents=True, exist_ok=True)
        self.metrics_port = free_port()
        env = {
            **os.environ,
            "BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
            "SCHEDULES_TOPICS": schedules,
            "GROUP_ID": f"bench-{schedules}",
            "HISTORY_TOPIC": history,
            "METRICS_ADDR": f"127.0.0.1:{self.metrics_port}",
            "SERVER_ADDR": f"127.0.0.1:{free_port()}",
        }
        if kafka.client:
            # YAML is a superset of JSON. The file may hold client secrets: `work` is
            # inside the benchmark's private temporary directory (mode 0700).
            config = work / "etf1-config.json"
            config.write_text(json.dumps({"kafka.common.configuration": kafka.client}))
            env["CONFIGURATION_FILE"] = str(config)
        self.log = (work / "etf1.log").open("wb")
        self.proc = subprocess.Popen(
            [str(binary)], stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=work
        )

    def planned(self) -> int:
        """Schedules etf1 has taken in memory so far (its ``planned`` counter), or 0 while
        its metrics do not answer."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return 0
        found = _PLANNED.search(text)
        return int(float(found.group(1))) if found else 0

    def cpu_seconds(self) -> float:
        """CPU time (user + system, every thread) the scheduler used so far."""
        return tree_cpu_seconds(self.proc.pid)

    def peak_rss_mb(self) -> float:
        """Peak RSS (``VmHWM``) of the scheduler process."""
        return tree_status_mb(self.proc.pid, "VmHWM:") or float("nan")

    def wait_for(self, cond: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Poll ``cond`` until it holds; fail early if the scheduler exits."""
        wait_for_child(self.proc, "etf1 scheduler", self.log.name, cond, timeout_s, what)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()

"""Every panel query and alert expression, run by a real Prometheus on a real sidecar.

Prometheus (Debian's package, ``scripts/install-promtool``) is started by the test on a
free port with a generated config that scrapes two in-process sidecar ports every second.
A first sidecar gets a small load: a few hundred delayed messages, a cancel, a record
without a target (dead letter) and one bound for a topic that does not exist (retries,
then a dead letter). Then two sidecars on empty disks, in the same group with
``changelog.standby_replicas: 1``, share the delay topic: each restores its partitions
from the changelog and keeps a warm standby of the other's. Then, through Prometheus'
HTTP API (``/api/v1/query``):

* every dashboard query (Grafana's variables filled in) is valid and returns data;
* every alert expression is valid, and every series it reads exists;
* the alerts the load can trip, rendered with thresholds set to trip, return data.
"""

from __future__ import annotations

import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from delaybridge.bridge.http.server import HttpServer
from delaybridge.client import DelayClient
from tests.integration.chart_config import helm_binary
from tests.integration.monitoring.assets import (
    alert_queries,
    concrete,
    dashboard,
    panel_queries,
    rule_groups,
    tool,
)
from tests.integration.sidecar.harness import InProcessSidecar, Topics, Watcher, settings_for
from tests.support import free_port, wait_until

pytestmark = pytest.mark.kafka

JOB = "delaybridge-test"
MESSAGES = 300
#: Alert thresholds set so that this test's load trips them (values of the chart).
TRIPWIRES = (
    "--set",
    "metrics.prometheusRule.latenessP99Seconds=0",
    "--set",
    "metrics.prometheusRule.deadLetterRatePerSecond=0",
    "--set",
    "metrics.prometheusRule.diskFreeMinBytes=1000000000000000000",
    "--set-string",
    f'metrics.prometheusRule.selector=job="{JOB}"',
)
TRIPPED = {"DelaybridgeLatenessHigh", "DelaybridgeDeadLetters", "DelaybridgeDiskFreeLow"}


@dataclass(frozen=True)
class Prometheus:
    url: str
    log: Path

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; an invalid expression fails the test with Prometheus' error."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                body = orjson.loads(reply.read())
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"Prometheus rejected {expr!r}: {exc.read().decode()}") from exc
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result


@pytest.fixture
def topics(kafka: Any) -> Topics:
    return Topics(
        delay=kafka.create_topic("prom-delay", partitions=3),
        targets=[kafka.create_topic("prom-orders", partitions=2)],
        dead_letter=kafka.create_topic("prom-dlt"),
        cancels=kafka.create_topic("prom-cancels"),
    )


@pytest.fixture
def sidecar_ports() -> tuple[int, int]:
    """The two ports Prometheus scrapes: the first is used by the loaded sidecar, then by
    one of the two that share the group (same target, so its counters continue)."""
    return free_port(), free_port()


def start_sidecar(
    kafka: Any, topics: Topics, data_dir: Path, port: int, standbys: int = 0
) -> tuple[InProcessSidecar, HttpServer]:
    settings = settings_for(
        kafka.bootstrap_servers,
        topics,
        data_dir,
        f"g-{topics.delay}",
        delivery={"missing_topic_retry_ms": 2_000},
        http={"port": port},
        changelog={"standby_replicas": standbys},
    )
    sidecar = InProcessSidecar.start(settings)
    http = HttpServer(settings.http, sidecar.service.control, sidecar.service.metrics)
    http.start()
    return sidecar, http


@pytest.fixture
def prometheus(sidecar_ports: tuple[int, int], tmp_path: Path) -> Iterator[Prometheus]:
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        orjson.dumps(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [
                    {
                        "job_name": JOB,
                        "scrape_interval": "1s",
                        "scrape_timeout": "1s",
                        "static_configs": [
                            {"targets": [f"127.0.0.1:{port}" for port in sidecar_ports]}
                        ],
                    }
                ],
            }
        ).decode(),  # JSON is YAML
        encoding="utf-8",
    )
    log = tmp_path / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                tool("prometheus"),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Prometheus(f"http://127.0.0.1:{port}", log)
    try:

        def ready() -> bool:
            assert proc.poll() is None, f"prometheus exited:\n{log.read_text()}"
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as reply:
                return bool(reply.status == 200)

        wait_until(ready, 60, "Prometheus ready", retry_on=(OSError,))
        yield server
    finally:
        proc.terminate()
        proc.wait(30)


def send_load(bootstrap: str, topics: Topics) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    target = topics.targets[0]
    for i in range(MESSAGES):
        headers: list[tuple[str, str | bytes | None]] = [
            ("delay-target-topic", target),
            ("delay-ms", str(500 + (i % 20) * 100)),
            ("delay-id", f"m-{i}"),
        ]
        producer.produce(topics.delay, b"payload", f"k{i}".encode(), headers=headers)
    producer.produce(
        topics.delay,
        b"to be cancelled",
        b"c",
        headers=[("delay-target-topic", target), ("delay-ms", "600000"), ("delay-id", "cxl-1")],
    )
    producer.produce(
        topics.delay,
        b"stays pending",
        b"p",
        headers=[("delay-target-topic", target), ("delay-ms", "3600000"), ("delay-id", "later-1")],
    )
    producer.produce(topics.delay, b"no target", b"bad", headers=[("delay-ms", "100")])
    producer.produce(
        topics.delay,
        b"nowhere",
        b"missing",
        headers=[("delay-target-topic", f"{target}-absent"), ("delay-ms", "100")],
    )
    assert producer.flush(30) == 0


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bdelaybridge_[a-z_]+\b", expr))


def test_every_dashboard_and_alert_query_runs_on_real_prometheus(
    kafka: Any,
    topics: Topics,
    sidecar_ports: tuple[int, int],
    prometheus: Prometheus,
    tmp_path: Path,
) -> None:
    def scraped(expr: str) -> bool:
        return any(float(s["value"][1]) > 0 for s in prometheus.query(expr))

    # 1. The load, on a first sidecar.
    sidecar, http = start_sidecar(kafka, topics, tmp_path / "first", sidecar_ports[0])
    watcher = Watcher(kafka.bootstrap_servers, [topics.targets[0], topics.dead_letter])
    try:
        # Counters must be scraped before the load too, or a rate sees no increase.
        wait_until(
            lambda: scraped(f'count_over_time(delaybridge_build_info{{job="{JOB}"}}[5m]) >= 2'),
            60,
            "Prometheus to scrape the idle sidecar",
            interval_s=0.2,
        )
        send_load(kafka.bootstrap_servers, topics)
        with DelayClient.connect(sidecar.service.settings.kafka, topics.delay) as client:
            client.cancel("cxl-1")
        watcher.until(
            lambda arrivals: len(arrivals) >= MESSAGES + 2, 60, "deliveries and dead letters"
        )
        wait_until(
            lambda: (
                scraped(f'sum(delaybridge_delivered_total{{job="{JOB}"}}) >= {MESSAGES}')
                and scraped(f'sum(delaybridge_cancelled_total{{job="{JOB}"}})')
                and scraped(f'sum(delaybridge_delivery_retries_total{{job="{JOB}"}})')
            ),
            60,
            "Prometheus to scrape the load",
            interval_s=0.5,
        )
    finally:
        watcher.close()
        http.stop()
        sidecar.stop()
    # 2. Two sidecars on empty disks restore the pending message from the changelog
    # (restore progress gets series too) and, sharing the delay topic's partitions, each
    # keeps a standby of the other's (standby lag gets series).
    with ExitStack() as stack:
        for name, port in zip(("second", "third"), sidecar_ports, strict=True):
            sidecar, http = start_sidecar(kafka, topics, tmp_path / name, port, standbys=1)
            stack.callback(sidecar.stop)
            stack.callback(http.stop)
        wait_until(
            lambda: (
                scraped(
                    f'count_over_time(delaybridge_restored_records_total{{job="{JOB}"}}[5m]) >= 2'
                )
                and scraped(f'sum(delaybridge_pending_messages{{job="{JOB}"}})')
            ),
            60,
            "Prometheus to scrape the restore",
            interval_s=0.5,
        )
        wait_until(
            lambda: scraped(f'count(delaybridge_standby_lag_records{{job="{JOB}"}})'),
            60,
            "Prometheus to scrape a standby's lag",
            interval_s=0.5,
        )
        check_queries(prometheus)


def check_queries(prometheus: Prometheus) -> None:
    empty: list[str] = []
    for query in panel_queries(dashboard()):
        result = prometheus.query(concrete(query.expr, JOB, window="5m"))
        if not result:
            empty.append(f"{query.where}: {query.expr}")
    helm = helm_binary()
    groups = rule_groups(helm, *TRIPWIRES)
    for query in alert_queries(groups):
        result = prometheus.query(query.expr)
        alert = query.where.removeprefix("alert ")
        if alert in TRIPPED and not result:
            signal = prometheus.query(query.expr.rsplit(">", 1)[0].rsplit("<", 1)[0])
            empty.append(f"{query.where} (set to trip): {query.expr} (without the test: {signal})")
        for name in metric_names(query.expr):
            if not prometheus.query(f'{name}{{job="{JOB}"}}'):
                empty.append(f"{query.where} reads {name}, which has no series")
    assert empty == [], "queries without data:\n" + "\n".join(empty)

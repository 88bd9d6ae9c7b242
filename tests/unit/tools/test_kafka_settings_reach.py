"""A security setting given once reaches every Kafka client every entry point builds.

Each entry point runs against the ``fake_kafka`` fixture (conftest.py): the edge's
constructors build the project's in-memory fakes and record every client's librdkafka
configuration, so no connection is opened. Each test checks the client *count* as well,
so a client built around the edge would show up as one missing.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from rich.console import Console

from delaybridge import cli
from delaybridge.connectors import KafkaClients, KafkaSettings, header_text
from delaybridge.settings import Settings, load
from tests.unit.tools.conftest import Captured, WatchedCluster

SECURITY = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "delaybridge",
}
CONFIG = """\
kafka:
  bootstrap_servers: broker-1:9093
  client:
    security.protocol: SASL_SSL
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: delaybridge
delay_topics: [delays]
"""


def secured(**kafka: Any) -> KafkaSettings:
    return KafkaSettings(bootstrap_servers="broker-1:9093", client=SECURITY, **kafka)


def assert_all_secured(seen: Captured, kinds: list[str]) -> None:
    assert sorted(kind for kind, _ in seen.built) == sorted(kinds)
    for kind, conf in seen.built:
        assert {k: conf.get(k) for k in SECURITY} == SECURITY, f"{kind} without security: {conf}"
        assert conf["bootstrap.servers"] == "broker-1:9093", kind


def quiet() -> Console:
    return Console(file=io.StringIO(), width=150)


def test_sidecar_builds_admin_producer_cancel_feed_restore_and_group_consumers(
    fake_kafka: Captured, tmp_path: Path
) -> None:
    from delaybridge.bridge.service import Service

    fake_kafka.cluster.create_topic("delay")

    settings = load(
        None,
        kafka=secured(instance_id="pod-0").model_dump(),
        store={"data_dir": tmp_path / "store"},
    )
    service = Service(settings)
    service.run(on_ready=service.stop)

    # group, cancel feed, cancel scout, restore
    kinds = ["AdminClient", "Producer", "Consumer", "Consumer", "Consumer", "Consumer"]
    assert_all_secured(fake_kafka, kinds)
    consumers = [conf for kind, conf in fake_kafka.built if kind == "Consumer"]
    (group,) = [conf for conf in consumers if "group.instance.id" in conf]  # only the member
    assert group["group.instance.id"] == "pod-0"
    assert group["isolation.level"] == "read_committed"
    assert group["partition.assignment.strategy"] == "cooperative-sticky"
    assert group["enable.auto.commit"] is False


@pytest.mark.parametrize(
    "argv",
    [
        ["send", "--to", "orders", "--delay", "30s", "--id", "o-1", "hello"],
        ["cancel", "--to", "orders", "o-1"],
    ],
    ids=["send", "cancel"],
)
def test_cli_send_and_cancel_take_the_run_settings(
    fake_kafka: Captured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    fake_kafka.cluster.create_topic("delays")
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    monkeypatch.setenv("DELAYBRIDGE_CONFIG", str(config))

    assert cli.main(argv) == 0

    assert_all_secured(fake_kafka, ["Producer"])
    (record,) = fake_kafka.cluster.records("delays")  # the settings' first delay topic
    assert ("delay-target-topic", b"orders") in (record.headers() or [])


def test_cli_send_env_and_options_override_the_file(
    fake_kafka: Captured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_kafka.cluster.create_topic("d2")
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    monkeypatch.setenv("DELAYBRIDGE_KAFKA__CLIENT", '{"sasl.password": "s3cret"}')
    argv = ["send", "--config", str(config), "--bootstrap", "other:9093", "--topic", "d2"]

    assert cli.main([*argv, "--to", "orders", "--delay", "1s", "v"]) == 0

    ((_, conf),) = fake_kafka.built
    assert conf["bootstrap.servers"] == "other:9093"
    assert conf["sasl.password"] == "s3cret"
    assert conf["security.protocol"] == "SASL_SSL"  # env merges into the file's client
    assert len(fake_kafka.cluster.records("d2")) == 1


def test_cli_send_help_names_the_settings(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["send", "--help"])
    out = capsys.readouterr().out
    assert "--config" in out and "DELAYBRIDGE_CONFIG" in out and "--bootstrap" in out


def test_demo_clients_and_its_sidecar_settings(
    fake_kafka: Captured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from delaybridge.tools import demo
    from delaybridge.tools.demo_messages import DELAY_TOPIC

    started: list[Settings] = []

    class StubSidecar:
        def __init__(self, settings: Settings) -> None:
            started.append(settings)
            self.control = SimpleNamespace(ready=lambda: (True, ""))

        def run(self, on_ready: Any = None) -> None:
            pass

        def stop(self) -> None:
            pass

    monkeypatch.setattr(demo, "Service", StubSidecar)
    monkeypatch.setattr(demo, "CANCEL_AFTER_MS", 0)
    monkeypatch.setattr(demo, "ARRIVALS_TIMEOUT_S", 0.2)
    monkeypatch.setattr(demo, "WATCH_MS", 0)
    settings = demo.demo_settings("broker-1:9093", tmp_path)
    settings = settings.model_copy(update={"kafka": secured(group_id="demo-sidecar")})

    demo._with_broker(quiet(), settings, tmp_path, report=False)

    # admin (topics), watcher, producer of the messages, producer of the cancel
    assert_all_secured(fake_kafka, ["AdminClient", "Consumer", "Producer", "Producer"])
    assert [kind for kind, _ in fake_kafka.built][-1] == "Producer"  # the cancel, at the end
    assert started and started[0].kafka.client == SECURITY
    records = fake_kafka.cluster.records(DELAY_TOPIC)
    cancels = [m for m in records if m.key() == b"order-1003"]
    assert len(cancels) == 2  # the message, then its cancel


class ForwardingSidecar:
    """Stands in for the sidecar child process: delivers each record at once."""

    cluster: WatchedCluster
    configs: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, kafka: KafkaSettings, work: Path, delay: str, **overrides: Any) -> None:
        from delaybridge.tools.e2e.sidecar import sidecar_config

        self.configs.append(sidecar_config(kafka, work, delay, port=0, **overrides))
        self.delay = delay
        self.peak_anon_mb = self.peak_file_mb = 0.0
        for offset in range(self.cluster.end(delay, 0)):
            self.forward(delay, 0, offset)
        self.cluster.on_append.append(self.forward)

    def forward(self, topic: str, partition: int, offset: int) -> None:
        if topic != self.delay:
            return
        msg = self.cluster.message(topic, partition, offset)
        target = header_text(msg)["delay-target-topic"]
        due = [("delay-due-ms", str(msg.timestamp()[1]))]
        self.cluster.append(target, 0, msg.key(), msg.value(), due)

    def stored(self) -> int:
        return self.cluster.end(self.delay, 0)

    def get(self, path: str, method: str = "GET") -> Any:
        return None

    def wait_for(self, cond: Any, timeout_s: float, what: str) -> None:
        assert cond(), what

    def peak_rss_mb(self) -> float:
        return 0.0

    def cpu_seconds(self) -> float:
        return 0.0

    def stop(self) -> None:
        self.cluster.on_append.remove(self.forward)


def test_bench_e2e_every_client_and_the_sidecar_child(
    fake_kafka: Captured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from delaybridge.tools.e2e import lateness as lateness_module
    from delaybridge.tools.e2e import measure, run_e2e

    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    monkeypatch.setattr(ForwardingSidecar, "cluster", fake_kafka.cluster, raising=False)
    monkeypatch.setattr(ForwardingSidecar, "configs", [])
    monkeypatch.setattr(measure, "SidecarProcess", ForwardingSidecar)
    monkeypatch.setattr(lateness_module, "SidecarProcess", ForwardingSidecar)
    args = argparse.Namespace(
        config=config,
        bootstrap=None,
        messages=3,
        steady_s=1,
        rate=4,
        tick_messages=3,
        json=tmp_path / "e2e.json",
        only=None,
        workers=(1,),  # the fake forwarder is one process: no group to settle
    )

    assert run_e2e(args) == 0

    # Fill both delay topics and the source, the passthrough, two sidecars' arrivals.
    throughput = ["AdminClient", "Producer", "Producer", "Producer", "Consumer", "Producer"]
    throughput += ["Consumer", "Consumer"]
    # changelog on, then off: topics, traffic, arrivals, the changelog's watermarks
    lateness = ["AdminClient", "Producer", "Consumer", "Consumer"] * 2
    tick = ["AdminClient", "Producer", "Consumer"] * 2  # changelog on, then off
    assert_all_secured(fake_kafka, throughput + lateness + tick)
    changelogs = [child.get("changelog") for child in ForwardingSidecar.configs]
    assert changelogs == [None, {"enabled": False}] * 3  # throughput, lateness, tick: on, off
    for child in ForwardingSidecar.configs:
        assert child["kafka"]["client"] == SECURITY
        assert child["kafka"]["bootstrap_servers"] == "broker-1:9093"
    results = json.loads(args.json.read_text())
    assert results["throughput"]["delivered"] == 3
    assert results["lateness"]["delivered"] == results["lateness"]["delivered_no_changelog"] == 4
    assert results["lateness"]["lateness_p99_target_ms"] == 150
    assert results["lateness"]["changelog_records_no_changelog"] is None  # no such topic
    assert results["tick"]["delivered"] == 3
    assert "drain_msgs_per_s_no_changelog" in results["tick"]


def test_passthrough(fake_kafka: Captured) -> None:
    from delaybridge.tools.passthrough import run_passthrough

    cluster = fake_kafka.cluster
    cluster.create_topic("src")
    cluster.create_topic("dst")
    for i in range(5):
        cluster.append("src", 0, f"k{i}".encode(), b"v", [("h", b"1")])

    result = run_passthrough(secured(instance_id="pod-0"), "src", "dst", 5, timeout_s=10)

    assert result["messages"] == 5 and len(cluster.records("dst")) == 5
    assert_all_secured(fake_kafka, ["Consumer", "Producer"])
    consumer = fake_kafka.built[0][1]
    assert consumer["group.id"].startswith("delaybridge-passthrough-")
    assert "group.instance.id" not in consumer  # its own group, never the sidecar's member id


def test_spark_snapshot(fake_kafka: Captured) -> None:
    from delaybridge.spark.settings import ReconcileSettings
    from delaybridge.spark.snapshot import take_snapshot

    fake_kafka.cluster.create_topic("delays")
    fake_kafka.cluster.append("delays", 0, None, b"v")
    recon = ReconcileSettings(
        bootstrap_servers="broker-1:9093", delay_topics=("delays",), kafka_options=SECURITY
    )

    (ranges,) = take_snapshot(recon.kafka(), ["delays"])

    assert ranges.records == 1
    assert_all_secured(fake_kafka, ["AdminClient"])
    assert fake_kafka.built[0][1]["allow.auto.create.topics"] is False


def test_spark_bench_seed_and_reuse_check(fake_kafka: Captured, tmp_path: Path) -> None:
    from delaybridge.spark import bench

    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    kafka = bench._cluster(config, None)

    bench.seed(kafka, "d", "t", 4, 1, quiet())
    assert bench._seeded(kafka, ["d", "t"], 4)

    assert_all_secured(fake_kafka, ["AdminClient", "Producer", "AdminClient"])
    assert len(fake_kafka.cluster.records("d")) == len(fake_kafka.cluster.records("t")) == 4


def test_the_edge_is_the_only_place_clients_are_built() -> None:
    """No module but connectors/clients.py calls confluent-kafka's client constructors."""
    import ast

    import delaybridge

    root = Path(delaybridge.__file__).parent
    constructors = {"Producer", "Consumer", "AdminClient", "SerializingProducer"}
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "connectors" / "clients.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                if name in constructors:
                    offenders.append(f"{path.relative_to(root)}:{node.lineno} {name}(...)")
    assert offenders == []


def test_clients_repr_redacts_secrets() -> None:
    clients = KafkaClients(KafkaSettings(client={"sasl.password": "s3cret", **SECURITY}))
    assert "s3cret" not in repr(clients) and "SASL_SSL" in repr(clients)

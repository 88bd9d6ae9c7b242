"""The Helm chart, checked with the real ``helm`` binary (issue 6).

No cluster is needed: the chart is linted and rendered, the rendered objects are
checked for what the chart promises (volume per replica, probes, static membership,
drain time, secrets kept out of the ConfigMap), the ConfigMap is loaded by the
sidecar's own settings loader, and scripts/check-chart validates every manifest with
kubeconform against Kubernetes' schemas. helm missing is a failure, not a skip:
``scripts/install-helm`` builds it. That `config` mirrors the sidecar's settings (keys,
bounds, defaults) needs no helm: tests/unit/test_settings_chart.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from delaybridge.cli import build_parser
from delaybridge.settings import ChangelogSettings, Settings, load
from delaybridge.spark.cli import settings_from_args
from tests.integration.chart_config import (
    CHART,
    ROOT,
    Manifest,
    by_kind,
    helm_binary,
    one,
    pod_config,
    render,
    run_helm,
    sidecar_config,
)

CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
INVALID_VALUES = sorted((CHART / "ci" / "invalid").glob("*.yaml"))


@pytest.fixture(scope="module")
def helm() -> str:
    return helm_binary()


def container_env(statefulset: Manifest) -> dict[str, dict[str, Any]]:
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    return {env["name"]: env for env in container["env"]}


def load_rendered_config(
    manifests: list[Manifest], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """Load the ConfigMap's file with the sidecar's loader and the pod's env vars,
    secrets replaced by placeholders."""
    config = tmp_path / "config.yaml"
    config.write_text(sidecar_config(manifests), encoding="utf-8")
    for name, env in container_env(one(manifests, "StatefulSet")).items():
        source = env.get("valueFrom", {})
        if "secretKeyRef" in source:
            monkeypatch.setenv(name, f"secret:{source['secretKeyRef']['key']}")
        elif "fieldRef" in source:
            monkeypatch.setenv(name, "rel-delaybridge-0")
    return load(config)


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name)
@pytest.mark.parametrize("strict", [False, True], ids=["lint", "lint-strict"])
def test_lint(helm: str, values: Path, strict: bool) -> None:
    args = ["lint", str(CHART), "-f", str(values)] + (["--strict"] if strict else [])
    done = run_helm(helm, *args)
    assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    assert "0 chart(s) failed" in done.stdout


def test_default_resources_fit_one_worker_per_core(helm: str, tmp_path: Path) -> None:
    # Issue 26: every core by default. The rendered limits, seen as the pod's cgroup
    # files, give the automatic count 2 workers, and their memory holds 2 of them.
    from delaybridge.bridge.workers.identity import WORKER_MEMORY_BYTES, automatic_workers

    manifests = render(helm, "--set", "config.kafka.bootstrap_servers=kafka:9092")
    container = one(manifests, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    limits = container["resources"]["limits"]
    assert limits["cpu"] == "2" and limits["memory"] == "1Gi"
    assert container["resources"]["requests"]["cpu"] == limits["cpu"]
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("200000 100000\n")  # what limits.cpu "2" becomes
    memory_max = tmp_path / "memory.max"
    memory_max.write_text(f"{2**30}\n")  # 1Gi
    workers = automatic_workers(cpu_max, memory_max)
    assert workers == min(2, len(os.sched_getaffinity(0)))
    assert 2 * WORKER_MEMORY_BYTES < 2**30


def test_default_values_render_a_hardened_statefulset(helm: str) -> None:
    manifests = render(helm, "--set", "config.kafka.bootstrap_servers=kafka:9092")
    kinds = sorted(m["kind"] for m in manifests)
    assert kinds == [
        "ConfigMap",
        "PodDisruptionBudget",
        "Secret",
        "Service",
        "Service",
        "ServiceAccount",
        "StatefulSet",
    ]
    sts = one(manifests, "StatefulSet")
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert spec["replicas"] == 1
    assert spec["serviceName"] == "rel-delaybridge-headless"
    assert [c["metadata"]["name"] for c in spec["volumeClaimTemplates"]] == ["data"]
    assert spec["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "10Gi"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"data": "/var/lib/delaybridge", "config": "/etc/delaybridge", "tmp": "/tmp"}
    assert container["args"] == ["run", "--config", "/etc/delaybridge/config.yaml"]
    assert build_parser().parse_args(container["args"]).command == "run"
    # 30 s of drain (shutdown_grace_ms) + 15 s margin.
    assert pod["terminationGracePeriodSeconds"] == 45
    assert container_env(sts)["DELAYBRIDGE_KAFKA__INSTANCE_ID"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.name"}
    }
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["runAsNonRoot"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["fsGroup"] == 10001
    annotations = spec["template"]["metadata"]["annotations"]
    assert len(annotations["checksum/config"]) == 64
    services = {s["metadata"]["name"]: s["spec"] for s in by_kind(manifests, "Service")}
    assert services["rel-delaybridge-headless"]["clusterIP"] == "None"
    assert services["rel-delaybridge-metrics"]["ports"][0]["name"] == "http-metrics"
    assert one(manifests, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1


def test_rendered_config_loads_in_the_sidecar(
    helm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests = render(helm, "--set", "config.kafka.bootstrap_servers=kafka:9092")
    settings = load_rendered_config(manifests, tmp_path, monkeypatch)
    assert settings.kafka.bootstrap_servers == "kafka:9092"
    assert settings.kafka.instance_id == "rel-delaybridge-0"
    assert str(settings.store.data_dir) == "/var/lib/delaybridge"
    assert settings.http.host == "0.0.0.0"
    assert settings.http.admin_token == "secret:admin-token"
    pod = pod_config(helm, "--set", "config.kafka.bootstrap_servers=kafka:9092")
    assert pod.env["DELAYBRIDGE_KAFKA__INSTANCE_ID"] == "field:metadata.name"
    assert pod.http_port == settings.http.port == 8080


def test_ha_values_render_sasl_servicemonitor_and_cronjob(
    helm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = CHART / "ci" / "ha-values.yaml"
    manifests = render(helm, "-f", str(values), "--api-versions", "monitoring.coreos.com/v1")
    sts = one(manifests, "StatefulSet")
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 75
    password = container_env(sts)["DELAYBRIDGE_KAFKA__CLIENT__SASL.PASSWORD"]
    assert password["valueFrom"]["secretKeyRef"] == {"name": "kafka-credentials", "key": "password"}
    assert by_kind(manifests, "Secret") == [], "existing Secrets must not be recreated"
    configmap = sidecar_config(manifests)
    assert "password" not in configmap
    settings = load_rendered_config(manifests, tmp_path, monkeypatch)
    assert settings.kafka.client["sasl.password"] == "secret:password"
    assert settings.kafka.client["security.protocol"] == "SASL_SSL"
    assert settings.delivery.rate_limits_per_s == {"orders": 2000.0}
    monitor = one(manifests, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["endpoints"][0]["port"] == "http-metrics"
    cron = one(manifests, "CronJob")
    job = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert job["containers"][0]["image"] == "delaybridge-spark:0.1.0"
    # The job's arguments must parse with the real CLI and, with the rendered config
    # and the job's env, give the reconciliation the release's brokers and secrets.
    args = build_parser().parse_args(job["containers"][0]["args"])
    (tmp_path / "etc").mkdir()
    config = tmp_path / "etc" / "config.yaml"
    config.write_text(sidecar_config(manifests), encoding="utf-8")
    args.config = config
    reconcile = settings_from_args(args)
    assert reconcile.bootstrap_servers == settings.kafka.bootstrap_servers
    assert reconcile.kafka_options["sasl.password"] == "secret:password"
    assert reconcile.delay_topics == ("orders.delay",)
    assert reconcile.target_topics == ("orders",)
    assert reconcile.window_ms == 300_000
    assert reconcile.offline is True
    assert str(reconcile.output_dir) == "/reports"
    # The job's pods must not be mistaken for sidecar pods by the Services and the PDB.
    selector = sts["spec"]["selector"]["matchLabels"]
    job_labels = cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert not selector.items() <= job_labels.items()


def test_servicemonitor_needs_the_crd(helm: str) -> None:
    manifests = render(
        helm,
        "--set",
        "config.kafka.bootstrap_servers=kafka:9092",
        "--set",
        "metrics.serviceMonitor.enabled=true",
    )
    assert by_kind(manifests, "ServiceMonitor") == []


def test_dashboard_and_rules_are_off_by_default_and_need_the_crd_for_rules(helm: str) -> None:
    base = ("--set", "config.kafka.bootstrap_servers=kafka:9092")
    kinds = [m["kind"] for m in render(helm, *base, "--api-versions", "monitoring.coreos.com/v1")]
    assert "PrometheusRule" not in kinds and kinds.count("ConfigMap") == 1
    without_crd = render(helm, *base, "--set", "metrics.prometheusRule.enabled=true")
    assert by_kind(without_crd, "PrometheusRule") == []


def test_dashboard_configmap_embeds_the_dashboard_file(helm: str) -> None:
    manifests = render(
        helm,
        "--set",
        "config.kafka.bootstrap_servers=kafka:9092",
        "--set",
        "metrics.dashboard.enabled=true",
        "--set",
        "metrics.dashboard.namespace=monitoring",
        "--set",
        "metrics.dashboard.annotations.grafana_folder=Kafka",
    )
    (board,) = [m for m in by_kind(manifests, "ConfigMap") if "delaybridge.json" in m["data"]]
    assert board["metadata"]["name"] == "rel-delaybridge-dashboard"
    assert board["metadata"]["namespace"] == "monitoring"
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert board["metadata"]["annotations"] == {"grafana_folder": "Kafka"}
    shipped = (CHART / "dashboards" / "delaybridge.json").read_text(encoding="utf-8")
    assert json.loads(board["data"]["delaybridge.json"]) == json.loads(shipped)


def test_config_change_rolls_the_pods(helm: str) -> None:
    def checksum(*extra: str) -> str:
        sts = one(
            render(helm, "--set", "config.kafka.bootstrap_servers=k:9092", *extra), "StatefulSet"
        )
        value: str = sts["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        return value

    assert checksum() == checksum()
    assert checksum() != checksum("--set", "config.store.tick_ms=50")


def test_persistence_off_puts_the_stores_on_an_emptydir(helm: str) -> None:
    emptydir = ("-f", str(CHART / "ci" / "emptydir-values.yaml"))
    spec = one(render(helm, *emptydir), "StatefulSet")["spec"]
    assert not {"volumeClaimTemplates", "persistentVolumeClaimRetentionPolicy"} & spec.keys()
    volumes = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {"sizeLimit": "4Gi"}}
    container = spec["template"]["spec"]["containers"][0]
    assert {"name": "data", "mountPath": "/var/lib/delaybridge"} in container["volumeMounts"]
    sts = one(render(helm, *emptydir, "--set", "persistence.emptyDir.sizeLimit="), "StatefulSet")
    assert {"name": "data", "emptyDir": {}} in sts["spec"]["template"]["spec"]["volumes"]


@pytest.mark.parametrize(
    "changelog_off",
    [
        ("--set", "config.changelog.enabled=false"),
        (
            "--set",
            "extraEnv[0].name=DELAYBRIDGE_CHANGELOG__ENABLED",
            "--set-string",
            "extraEnv[0].value=off",
        ),
    ],
    ids=["config", "extraEnv"],
)
def test_emptydir_is_refused_with_the_changelog_off(
    helm: str, changelog_off: tuple[str, ...]
) -> None:
    """An emptyDir would then hold the only copy of the pending messages."""
    base = ("template", "rel", str(CHART), "--set", "config.kafka.bootstrap_servers=k:9092")
    done = run_helm(helm, *base, "--set", "persistence.enabled=false", *changelog_off)
    assert done.returncode != 0, "persistence.enabled=false accepted with the changelog off"
    assert "persistence.enabled=false puts each replica's stores on an emptyDir" in done.stderr
    assert "turn the changelog on or keep persistence.enabled=true" in done.stderr
    with_claims = render(helm, *base[3:], *changelog_off)
    assert "volumeClaimTemplates" in one(with_claims, "StatefulSet")["spec"]


def test_changelog_settings_reach_the_sidecar(
    helm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = render(helm, "--set", "config.kafka.bootstrap_servers=k:9092")
    assert load_rendered_config(default, tmp_path, monkeypatch).changelog == ChangelogSettings()
    manifests = render(
        helm,
        "-f",
        str(CHART / "ci" / "emptydir-values.yaml"),
        "--set",
        "config.changelog.topic_template=state-{topic}",
        "--set-json",
        "config.changelog.min_cleanable_dirty_ratio=0.25",
    )
    changelog = load_rendered_config(manifests, tmp_path, monkeypatch).changelog
    assert changelog == ChangelogSettings(
        topic_template="state-{topic}",
        standby_replicas=1,
        restore_batch_records=20_000,
        min_cleanable_dirty_ratio=0.25,
    )
    assert changelog.topic_for("delaybridge", "delay") == "state-delay"


@pytest.mark.parametrize("values", INVALID_VALUES, ids=lambda p: p.name)
def test_bad_values_are_rejected_with_a_clear_message(helm: str, values: Path) -> None:
    expect = [
        line.removeprefix("# expect: ")
        for line in values.read_text(encoding="utf-8").splitlines()
        if line.startswith("# expect: ")
    ]
    assert expect, f"{values} needs a '# expect: <message>' line"
    done = run_helm(helm, "template", "rel", str(CHART), "-f", str(values))
    assert done.returncode != 0, f"{values} was accepted"
    assert expect[0] in done.stderr, f"{values}: wanted {expect[0]!r} in:\n{done.stderr}"


def test_check_chart_validates_every_manifest_offline() -> None:
    """scripts/check-chart: lint, render, kubeconform -strict against Kubernetes'
    schemas for the oldest supported and a current version, bad values rejected."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "check-chart")],
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )
    assert done.returncode == 0, f"scripts/check-chart failed:\n{done.stdout}\n{done.stderr}"
    assert "all chart checks passed" in done.stderr
    assert "ServiceMonitor" in done.stderr and "CronJob" in done.stderr
    assert "PrometheusRule" in done.stderr and "2 ConfigMap" in done.stderr


def test_console_is_off_by_default_and_renders_with_its_own_labels(
    helm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = render(helm, "--set", "config.kafka.bootstrap_servers=kafka:9092")
    assert by_kind(default, "Deployment") == []
    assert all("console" not in m["metadata"]["name"] for m in default)
    manifests = render(helm, "-f", str(CHART / "ci" / "ha-values.yaml"))
    deployment = one(manifests, "Deployment")
    assert deployment["metadata"]["name"] == "rel-delaybridge-console"
    spec = deployment["spec"]
    assert spec["replicas"] == 1, "sessions live in the pod's memory"
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    sts = one(manifests, "StatefulSet")
    assert container["image"] == sts["spec"]["template"]["spec"]["containers"][0]["image"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    env = {e["name"]: e for e in container["env"]}
    assert env["DELAYBRIDGE_HTTP__ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "delaybridge-admin",
        "key": "token",
    }
    # The arguments parse with the real CLI and, with the rendered config and the pod's
    # secrets, give the console the release's replicas, cluster and token.
    args = build_parser().parse_args(container["args"])
    assert args.command == "console"
    (tmp_path / "etc").mkdir()
    config = tmp_path / "etc" / "config.yaml"
    config.write_text(sidecar_config(manifests), encoding="utf-8")
    args.config = config
    for name, item in env.items():
        source = item.get("valueFrom", {})
        if "secretKeyRef" in source:
            monkeypatch.setenv(name, f"secret:{source['secretKeyRef']['key']}")
    from delaybridge.console.cli import settings_from_args as console_settings

    settings = console_settings(args)
    assert settings.service == "rel-delaybridge-headless.ns.svc:8080"
    assert settings.token == "secret:token"
    assert settings.kafka.client["sasl.password"] == "secret:password"
    assert settings.dead_letter_topic == "delaybridge.dead-letter"
    assert (settings.host, settings.port) == ("0.0.0.0", 8081)
    assert settings.value_preview and not settings.read_only and settings.secure_cookie
    assert settings.proxy_hops == 1
    # The console's pods are no sidecar: no sidecar Service, PDB or StatefulSet selects
    # them, and the console's Service selects only them.
    console_labels = spec["template"]["metadata"]["labels"]
    for m in manifests:
        selector = m["spec"].get("selector") if m["kind"] in ("Service", "StatefulSet") else None
        if m["kind"] == "PodDisruptionBudget":
            selector = m["spec"]["selector"]
        if selector is None:
            continue
        labels = selector.get("matchLabels", selector)
        selects_console = labels.items() <= console_labels.items()
        assert selects_console == m["metadata"]["name"].endswith("-console"), m["metadata"]["name"]
    service = next(
        s for s in by_kind(manifests, "Service") if s["metadata"]["name"].endswith("-console")
    )
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 8081, "targetPort": "http", "protocol": "TCP"}
    ]

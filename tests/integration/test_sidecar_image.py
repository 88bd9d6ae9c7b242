"""The sidecar image end to end: run it the way the Helm chart runs a pod, against the
session's Kafka, and watch delayed messages come out on time.

The image is ``$DELAYBRIDGE_SIDECAR_IMAGE`` (``eval "$(scripts/build-sidecar-image)"``,
which scripts/test does). The container gets what the rendered chart gives a pod: the
ConfigMap's config file read-only at its mount path, the container's args, its env (the
admin token Secret resolved to a test token, the pod name for the static member id), the
pod's user and group, the container's security context (read-only root filesystem, no
capabilities, no privilege escalation), a writable store volume owned by the fsGroup and
a size-limited tmpfs ``/tmp``. Only the Kafka address, topic names, consumer group,
HTTP port and drain time are overridden, with ``--set`` on the chart like a user would.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.chart_config import (
    RELEASE,
    Manifest,
    PodConfig,
    by_kind,
    helm_binary,
    one,
    pod_config,
    render,
)
from tests.integration.sidecar.harness import Arrival, Topics, Watcher, now_ms, produce
from tests.kafka_backends import ENGINE_TIMEOUT_S, OWNER_LABEL, container_engine_env
from tests.kafka_cluster import KafkaCluster
from tests.support import free_port, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.container, pytest.mark.slow]

IMAGE_VARIABLE = "DELAYBRIDGE_SIDECAR_IMAGE"
BUILD_HINT = 'run eval "$(scripts/build-sidecar-image)" first (scripts/test does)'
POD_NAME = f"{RELEASE}-delaybridge-0"
READY_TIMEOUT_S = 120.0
DRAIN_MS = 10_000


@dataclass(frozen=True)
class ChartPod:
    """The parts of the rendered StatefulSet that decide how the container runs."""

    config: PodConfig
    uid: int
    gid: int
    fs_group: int
    read_only_root: bool
    cap_drop: list[str]
    no_new_privileges: bool
    mounts: dict[str, str]  # volume name -> mount path in the container
    tmp_size_mib: int
    grace_s: int
    secret_data: dict[str, str]  # key -> decoded value, over the Secrets the chart renders


def chart_pod(helm: str, *args: str) -> ChartPod:
    manifests = render(helm, *args)
    pod_spec: Manifest = one(manifests, "StatefulSet")["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    pod_sc = pod_spec["securityContext"]
    sc = container["securityContext"]
    tmp = next(v for v in pod_spec["volumes"] if v["name"] == "tmp")
    size = re.fullmatch(r"(\d+)Mi", tmp["emptyDir"]["sizeLimit"])
    assert size, f"tmp emptyDir sizeLimit {tmp['emptyDir']['sizeLimit']!r} is not <n>Mi"
    return ChartPod(
        config=pod_config(helm, *args),
        uid=int(sc.get("runAsUser", pod_sc["runAsUser"])),
        gid=int(sc.get("runAsGroup", pod_sc["runAsGroup"])),
        fs_group=int(pod_sc["fsGroup"]),
        read_only_root=bool(sc["readOnlyRootFilesystem"]),
        cap_drop=list(sc["capabilities"]["drop"]),
        no_new_privileges=sc["allowPrivilegeEscalation"] is False,
        mounts={m["name"]: m["mountPath"] for m in container["volumeMounts"]},
        tmp_size_mib=int(size.group(1)),
        grace_s=int(pod_spec["terminationGracePeriodSeconds"]),
        secret_data={
            key: base64.b64decode(value).decode()
            for secret in by_kind(manifests, "Secret")
            for key, value in secret.get("data", {}).items()
        },
    )


def pod_env(config: PodConfig, secrets_by_key: dict[str, str]) -> dict[str, str]:
    """The env the kubelet would give the container: Secret keys and fields resolved."""
    env: dict[str, str] = {}
    for name, source in config.env.items():
        kind, _, ref = source.partition(":")
        if kind == "secret" and ref in secrets_by_key:
            env[name] = secrets_by_key[ref]
        elif source == "field:metadata.name":
            env[name] = POD_NAME
        elif kind in ("secret", "field"):
            pytest.fail(f"env {name} comes from {source}, which this test cannot resolve")
        else:
            env[name] = source
    return env


def sidecar_image() -> str:
    """``$DELAYBRIDGE_SIDECAR_IMAGE``, which must exist in the engine; else the test FAILS."""
    container_engine_env()
    from testcontainers.core.docker_client import DockerClient

    client = DockerClient(timeout=ENGINE_TIMEOUT_S).client
    image = os.environ.get(IMAGE_VARIABLE, "").strip()
    if not image:
        pytest.fail(f"{IMAGE_VARIABLE} is not set: {BUILD_HINT}", pytrace=False)
    try:
        client.images.get(image)
    except Exception as exc:  # docker.errors.ImageNotFound, or an engine error
        pytest.fail(
            f"image {image} ({IMAGE_VARIABLE}) is not in the engine: {exc}; {BUILD_HINT}",
            pytrace=False,
        )
    return image


class Http:
    """The sidecar's HTTP port on this host; every call has a short timeout."""

    def __init__(self, port: int, token: str) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.token = token

    def call(self, method: str, path: str, *, auth: bool = False) -> tuple[int, bytes]:
        request = urllib.request.Request(self.base + path, method=method)
        if auth:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def delivered_total(self) -> float:
        status, body = self.call("GET", "/metrics")
        assert status == 200, f"GET /metrics answered {status}: {body[:200]!r}"
        return sum(
            sample.value
            for family in text_string_to_metric_families(body.decode())
            for sample in family.samples
            if sample.name == "delaybridge_delivered_total"
        )


def logs(container: Any, lines: int = 80) -> str:
    try:
        stdout, stderr = container.get_logs()
    except Exception as exc:  # the logs are a diagnostic; their absence must not hide the failure
        return f"(no container logs: {exc})"
    return "\n".join((stdout + stderr).decode(errors="replace").splitlines()[-lines:])


@contextlib.contextmanager
def logs_on_failure(container: Any) -> Iterator[None]:
    """A failed assertion or wait says what the sidecar in the container logged."""
    try:
        yield
    except (AssertionError, TimeoutError) as exc:
        raise AssertionError(
            f"{exc}\n--- sidecar container logs (last lines) ---\n{logs(container)}"
        ) from exc


def await_ready(container: Any, http: Http) -> None:
    def ready() -> bool:
        container.reload()
        assert container.status not in ("exited", "dead"), f"container {container.status}"
        status, _ = http.call("GET", "/readyz")
        return status == 200

    what = f"{http.base}/readyz to answer 200"
    wait_until(ready, READY_TIMEOUT_S, what, interval_s=0.25, retry_on=(OSError,))


def test_sidecar_image_runs_like_a_chart_pod_and_delivers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    from testcontainers.core.container import DockerContainer

    image = sidecar_image()
    # Asked for only now, so a missing image fails at once instead of after a broker start.
    kafka: KafkaCluster = request.getfixturevalue("kafka")
    topics = Topics(
        delay=kafka.create_topic("img-delay", partitions=3),
        targets=[kafka.create_topic("img-orders", partitions=2), kafka.create_topic("img-later")],
        dead_letter=kafka.create_topic("img-dlt"),
        cancels=kafka.create_topic("img-cancels"),
    )
    port = free_port()
    token = secrets.token_urlsafe(24)
    pod = chart_pod(
        helm_binary(),
        "--set",
        f"config.kafka.bootstrap_servers={kafka.bootstrap_servers}",
        "--set",
        f"config.kafka.group_id=g-{topics.delay}",
        "--set",
        f"config.delay_topics[0]={topics.delay}",
        "--set",
        f"config.dead_letter_topic={topics.dead_letter}",
        "--set",
        f"config.cancel_topic={topics.cancels}",
        "--set",
        f"config.http.port={port}",
        "--set",
        f"config.shutdown_grace_ms={DRAIN_MS}",
        "--set",
        f"adminToken.value={token}",
    )
    assert pod.config.http_port == port
    assert token in pod.secret_data.values(), "the chart's Secret does not hold adminToken.value"

    # The pod's volumes: the ConfigMap as a read-only directory, the store's claim as a
    # directory owned by the fsGroup (what Kubernetes' fsGroup does to a fresh volume).
    config_dir = tmp_path / "configmap"
    data_dir = tmp_path / "data"
    config_dir.mkdir(mode=0o755)
    (config_dir / "config.yaml").write_text(pod.config.config_yaml)
    data_dir.mkdir(mode=0o770)
    os.chown(data_dir, pod.uid, pod.fs_group)

    # Host networking: the fixture's broker advertises 127.0.0.1:<port> (its container
    # publishes that port on the host's loopback; the local and external backends listen
    # there too), and a container on podman's bridge network would reach its own
    # loopback instead. On the host's network the sidecar reaches every backend at the
    # fixture's address, and its HTTP port is a free host port, so no port mapping.
    sidecar = DockerContainer(
        image,
        docker_client_kw={"timeout": ENGINE_TIMEOUT_S},
        labels={OWNER_LABEL: str(os.getpid())},
        network_mode="host",
        user=f"{pod.uid}:{pod.gid}",
        group_add=[str(pod.fs_group)],
        read_only=pod.read_only_root,
        cap_drop=pod.cap_drop,
        security_opt=["no-new-privileges"] if pod.no_new_privileges else [],
    )
    sidecar.with_command(pod.config.args)
    sidecar.with_envs(**pod_env(pod.config, pod.secret_data))
    sidecar.with_volume_mapping(config_dir, pod.mounts["config"], "ro")
    sidecar.with_volume_mapping(data_dir, pod.mounts["data"], "rw")
    sidecar.with_tmpfs_mount(pod.mounts["tmp"], f"size={pod.tmp_size_mib}m")
    watcher = Watcher(kafka.bootstrap_servers, [*topics.targets, topics.dead_letter])
    try:
        try:
            sidecar.start()
        except Exception as exc:  # docker.errors.DockerException, or the engine's socket
            pytest.fail(f"starting a container of {image}: {exc}", pytrace=False)
        with logs_on_failure(sidecar):
            http = Http(port, token)
            await_ready(sidecar, http)
            check_confinement(sidecar, pod)
            deliver_cancel_and_dead_letter(kafka, topics, http, watcher)
            wait_until(
                lambda: http.delivered_total() >= 3,
                15,
                "delaybridge_delivered_total >= 3 on /metrics",
                retry_on=(Exception,),
            )
            stop_within_grace(sidecar, pod.grace_s)
        stored = list(data_dir.iterdir())
        assert stored, f"nothing written to the store volume {data_dir}"
        assert all(p.stat().st_uid == pod.uid for p in stored), "store files not the pod user's"
    finally:
        watcher.close()
        sidecar.stop()


def check_confinement(sidecar: Any, pod: ChartPod) -> None:
    """What the engine really applied, seen from inside: the sidecar process's ids,
    capabilities and no-new-privileges flag, and a root filesystem that refuses writes."""
    code, out = sidecar.exec(["cat", "/proc/1/status"])
    assert code == 0, f"reading /proc/1/status in the container: {out!r}"
    status = dict(
        (key, value.split())
        for key, _, value in (line.partition(":") for line in out.decode().splitlines())
    )
    assert status["Uid"][:2] == [str(pod.uid)] * 2, f"sidecar runs as uid {status['Uid']}"
    assert status["Gid"][:2] == [str(pod.gid)] * 2, f"sidecar runs as gid {status['Gid']}"
    if "ALL" in pod.cap_drop:
        assert int(status["CapEff"][0], 16) == 0, f"capabilities left: {status['CapEff']}"
        assert int(status["CapBnd"][0], 16) == 0, f"bounding set: {status['CapBnd']}"
    if pod.no_new_privileges:
        assert status["NoNewPrivs"] == ["1"], f"NoNewPrivs {status['NoNewPrivs']}"
    if pod.read_only_root:
        code, out = sidecar.exec(["touch", "/etc/delaybridge-probe"])
        assert code != 0 and b"Read-only file system" in out, f"root is writable: {out!r}"


def deliver_cancel_and_dead_letter(
    kafka: KafkaCluster, topics: Topics, http: Http, watcher: Watcher
) -> None:
    orders, later = topics.targets
    t0 = now_ms()
    due = {"img-short": t0 + 1_500, "img-mid": t0 + 3_000, "img-at": t0 + 4_500}
    cancel_due = t0 + 5_000
    produce(
        kafka.bootstrap_servers,
        topics.delay,
        [
            (
                b"a",
                b"short",
                [("delay-target-topic", orders), ("delay-ms", "1500"), ("delay-id", "img-short")],
            ),
            (
                b"b",
                b"mid",
                [("delay-target-topic", later), ("delay-sec", "3"), ("delay-id", "img-mid")],
            ),
            (
                b"c",
                b"at",
                [
                    ("delay-target-topic", orders),
                    ("deliver-at-ms", str(due["img-at"])),
                    ("delay-id", "img-at"),
                ],
            ),
            (
                b"d",
                b"doomed",
                [
                    ("delay-target-topic", orders),
                    ("deliver-at-ms", str(cancel_due)),
                    ("delay-id", "img-cancel"),
                ],
            ),
        ],
    )
    (bad_offset,) = produce(
        kafka.bootstrap_servers,
        topics.delay,
        [(b"bad", b"payload", [("delay-target-topic", orders), ("delay-ms", "soon")])],
        0,
    )

    # Cancel through the admin API, with the token the chart's Secret would hold.
    path = "/admin/messages/img-cancel"
    status, _ = http.call("GET", path)
    assert status == 401, f"admin GET without the token answered {status}, not 401"
    wait_until(
        lambda: http.call("GET", path, auth=True)[0] == 200,
        20,
        "img-cancel stored",
        retry_on=(Exception,),
    )
    status, body = http.call("DELETE", path, auth=True)
    assert status == 200, f"DELETE {path} answered {status}: {body!r}"
    assert json.loads(body)["matched_here"] is True, body

    watcher.until(
        lambda a: set(due) <= {x.id for x in a} and any(x.topic == topics.dead_letter for x in a),
        30,
        "the three delayed messages and the dead letter",
    )
    while now_ms() < cancel_due + 1_500:  # past the cancelled one's due time, still reading
        watcher.poll()
    got: dict[str, Arrival] = {a.id: a for a in watcher.arrivals if a.id in due}
    for id, at in due.items():
        arrival = got[id]
        assert arrival.due_ms >= at, f"{id}: delay-due-ms {arrival.due_ms} before {at}"
        assert arrival.timestamp_ms >= arrival.due_ms, f"{id} delivered before it was due"
        assert arrival.headers["delay-origin"].startswith(f"{topics.delay}/"), arrival.headers
    assert got["img-mid"].topic == later and got["img-short"].topic == orders
    assert "img-cancel" not in watcher.ids(), "the cancelled message was delivered"
    (dead,) = [a for a in watcher.arrivals if a.topic == topics.dead_letter]
    assert dead.headers["delay-error"] == "bad-time", dead.headers
    assert dead.headers["delay-error-detail"], dead.headers
    assert dead.headers["delay-origin"] == f"{topics.delay}/0/{bad_offset}", dead.headers
    assert (dead.key, dead.value) == (b"bad", b"payload")


def stop_within_grace(sidecar: Any, grace_s: int) -> None:
    """SIGTERM, as the kubelet sends it; the sidecar must drain and exit 0 in time."""
    wrapped = sidecar.get_wrapped_container()
    wrapped.kill(signal="SIGTERM")
    try:
        result = wrapped.wait(timeout=grace_s)
    except Exception as exc:  # requests' ReadTimeout: still running after the grace period
        raise AssertionError(f"still running {grace_s} s after SIGTERM ({exc})") from exc
    assert result["StatusCode"] == 0, f"exit status {result['StatusCode']} after SIGTERM"
    assert "Traceback" not in logs(sidecar, 10_000), "a traceback in the sidecar's log"

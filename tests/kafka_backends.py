"""Where the tests' Kafka cluster comes from: an external cluster, a container, or LocalKafka.

:func:`start_cluster` picks a backend:

1. ``DELAYBRIDGE_TEST_BACKEND=external|container|local`` forces one; nothing else is tried.
2. Else ``DELAYBRIDGE_TEST_BOOTSTRAP`` (``host:port,...``) names a running cluster, which
   is used and never silently replaced: if it does not answer, that is the error.
3. Else a testcontainers container of ``DELAYBRIDGE_KAFKA_IMAGE``, then, if no container
   engine works, delaybridge's own :class:`LocalKafka` on free ports.

Every backend must pass the same readiness check, a produce + consume round trip, before
it is used. If none works, :class:`BackendUnavailable` says why each one failed; the
``kafka`` fixture turns that into an ERROR for every test that needs Kafka (never a skip).

The container runs KRaft single-node with the same ``KAFKA_*`` variables the public
``apache/kafka`` image reads, so either image works. Networking: the engine's default
bridge network, with one free host port published 1:1 on 127.0.0.1 and advertised as
``127.0.0.1:<port>`` (docs/testing.md says why this is what works with podman here).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from tests.kafka_cluster import Backend, KafkaCluster
from tests.support import free_port

DEFAULT_PUBLIC_IMAGE = "apache/kafka:4.3.1"
LOCAL_IMAGE = "localhost/delaybridge-kafka:4.3.1"
PODMAN_SOCKET = Path("/run/podman/podman.sock")
OWNER_LABEL = "org.delaybridge.test.owner-pid"
"""Label on our containers: the pid of the pytest that started them (for reaping leftovers)."""

START_TIMEOUT_S = 180.0
READY_TIMEOUT_S = 30.0
ENGINE_TIMEOUT_S = 180


class BackendUnavailable(Exception):
    """No backend could provide a working cluster; the message says why for each."""


def start_cluster(tmp_root: Path) -> tuple[KafkaCluster, list[str]]:
    """Start (or connect to) the session's cluster; also return why earlier backends failed."""
    forced = os.environ.get("DELAYBRIDGE_TEST_BACKEND", "").strip().lower()
    if forced:
        try:
            order = [Backend(forced)]
        except ValueError:
            choices = ", ".join(b.value for b in Backend)
            raise BackendUnavailable(
                f"DELAYBRIDGE_TEST_BACKEND={forced!r} is not one of {choices}"
            ) from None
    elif os.environ.get("DELAYBRIDGE_TEST_BOOTSTRAP"):
        order = [Backend.EXTERNAL]
    else:
        order = [Backend.CONTAINER, Backend.LOCAL]
    failures: list[str] = []
    for backend in order:
        try:
            return start_backend(backend, tmp_root), failures
        except BackendUnavailable as exc:
            failures.append(f"{backend.value}: {exc}")
    raise BackendUnavailable(
        "no Kafka backend works for the integration tests:\n  - " + "\n  - ".join(failures)
    )


def start_backend(backend: Backend, tmp_root: Path) -> KafkaCluster:
    """Start one backend and check it round-trips a record; BackendUnavailable if not."""
    if backend is Backend.EXTERNAL:
        cluster = connect_external()
    elif backend is Backend.CONTAINER:
        cluster = start_container()
    else:
        cluster = start_local(tmp_root / "local-kafka")
    try:
        cluster.round_trip("delaybridge-test-ready", n=1, timeout_s=READY_TIMEOUT_S)
    except Exception as exc:
        cluster.stop()
        raise BackendUnavailable(
            f"{cluster.description} failed a produce/consume check: {exc}"
        ) from exc
    return cluster


# -- external -------------------------------------------------------------------------


def connect_external() -> KafkaCluster:
    bootstrap = os.environ.get("DELAYBRIDGE_TEST_BOOTSTRAP", "").strip()
    if not bootstrap:
        raise BackendUnavailable("DELAYBRIDGE_TEST_BOOTSTRAP is not set (host:port of a cluster)")
    cluster = KafkaCluster(
        bootstrap, Backend.EXTERNAL, f"external cluster {bootstrap} (DELAYBRIDGE_TEST_BOOTSTRAP)"
    )
    try:
        cluster.admin().list_topics(timeout=10)
    except Exception as exc:
        raise BackendUnavailable(
            f"{cluster.description} did not answer within 10 s: {exc}"
        ) from exc
    return cluster


# -- container --------------------------------------------------------------------------


def container_engine_env() -> None:
    """Point testcontainers at podman's socket if nothing else is configured.

    scripts/provision-podman starts the socket and prints these variables; setting them
    here too lets a plain ``pytest`` work after provisioning. Ryuk (testcontainers'
    reaper container) is an image from Docker Hub, which is unreachable here; leftovers
    are reaped by :func:`_reap_leftovers` instead.
    """
    if "DOCKER_HOST" not in os.environ and PODMAN_SOCKET.exists():
        os.environ["DOCKER_HOST"] = f"unix://{PODMAN_SOCKET}"
        os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
        os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")


def kafka_image(client: Any) -> str:
    """``DELAYBRIDGE_KAFKA_IMAGE``; else the locally built image if the engine has it;
    else the public ``apache/kafka`` image."""
    named = os.environ.get("DELAYBRIDGE_KAFKA_IMAGE", "").strip()
    if named:
        return named
    with contextlib.suppress(Exception):  # not built here: fall back to the public image
        client.images.get(LOCAL_IMAGE)
        return LOCAL_IMAGE
    return DEFAULT_PUBLIC_IMAGE


def kraft_env(port: int) -> dict[str, str]:
    """One combined broker/controller, as the apache/kafka image's variables say it."""
    return {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"PLAINTEXT://:{port},CONTROLLER://:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_LOG_DIRS": "/tmp/kraft-combined-logs",
        "KAFKA_NUM_PARTITIONS": "1",
        "KAFKA_DEFAULT_REPLICATION_FACTOR": "1",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_HEAP_OPTS": "-Xmx512m -Xms512m",
    }


def start_container(timeout_s: float = START_TIMEOUT_S) -> KafkaCluster:
    """Run the Kafka image with testcontainers; wait until the broker answers."""
    container_engine_env()
    try:
        from docker.errors import DockerException
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.docker_client import DockerClient
    except ImportError as exc:
        raise BackendUnavailable(f"testcontainers is not installed: {exc}") from exc
    engine = os.environ.get("DOCKER_HOST", "the default Docker socket")
    try:
        client = DockerClient(timeout=ENGINE_TIMEOUT_S).client
        client.ping()
    except Exception as exc:
        raise BackendUnavailable(
            f"no container engine answers at {engine} ({exc}); run scripts/provision-podman"
        ) from exc
    _reap_leftovers(client)
    image = kafka_image(client)
    port = free_port()
    # Removing a container deletes its whole vfs copy of the image; on a busy machine
    # that outlasts docker-py's default 60 s API timeout.
    container = DockerContainer(
        image,
        docker_client_kw={"timeout": ENGINE_TIMEOUT_S},
        labels={OWNER_LABEL: str(os.getpid())},
    )
    container.with_envs(**kraft_env(port))
    # Published on loopback only, same number inside and out, so the advertised
    # address works from the host (testcontainers' with_bind_ports cannot name an IP).
    container.ports[f"{port}/tcp"] = ("127.0.0.1", port)  # type: ignore[assignment]
    try:
        container.start()
    except DockerException as exc:
        container.stop()
        raise BackendUnavailable(f"starting a container of {image} via {engine}: {exc}") from exc
    short_id = container.get_wrapped_container().short_id
    cluster = KafkaCluster(
        f"127.0.0.1:{port}",
        Backend.CONTAINER,
        f"testcontainers container {short_id} of {image} at 127.0.0.1:{port} (engine {engine})",
        stop=container.stop,
        kill=lambda: container.get_wrapped_container().kill(),
        handle=container,
    )
    try:
        _await_container_broker(cluster, container, timeout_s)
    except BackendUnavailable:
        container.stop()
        raise
    return cluster


def _await_container_broker(cluster: KafkaCluster, container: Any, timeout_s: float) -> None:
    from confluent_kafka import KafkaException

    def answers() -> bool:
        container.reload()
        if container.status in ("exited", "dead"):
            raise _Exited(container.status)
        cluster.admin().list_topics(timeout=2)
        return True

    try:
        cluster.wait_for(
            answers,
            timeout_s,
            f"the broker in {cluster.description}",
            0.5,
            retry_on=(KafkaException,),
        )
    except (TimeoutError, _Exited) as exc:
        stdout, stderr = container.get_logs()
        tail = (stdout + stderr).decode(errors="replace").splitlines()[-15:]
        raise BackendUnavailable(f"{exc}; last log lines:\n      " + "\n      ".join(tail)) from exc


class _Exited(Exception):
    def __init__(self, status: str) -> None:
        super().__init__(f"the container exited (status {status})")


def _reap_leftovers(client: Any) -> None:
    """Remove Kafka containers of earlier pytest runs that died before cleaning up."""
    for old in client.containers.list(all=True, filters={"label": OWNER_LABEL}):
        pid = int(old.labels.get(OWNER_LABEL, "0"))
        if pid != os.getpid() and not _pid_alive(pid):
            old.remove(force=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- local ------------------------------------------------------------------------------


def start_local(data_dir: Path, timeout_s: float = START_TIMEOUT_S) -> KafkaCluster:
    """delaybridge's LocalKafka (pinned jars, this host's Java) on two free ports."""
    from delaybridge.connectors.localkafka import LocalKafka
    from delaybridge.errors import DelayBridgeError

    broker = LocalKafka(data_dir, port=free_port(), controller_port=free_port())
    try:
        broker.start(timeout_s=timeout_s, progress=False)
    except DelayBridgeError as exc:
        raise BackendUnavailable(f"LocalKafka in {data_dir}: {exc}") from exc
    return KafkaCluster(
        broker.bootstrap,
        Backend.LOCAL,
        f"LocalKafka (pinned jars, host Java) at {broker.bootstrap}, data dir {data_dir}",
        stop=lambda: broker.stop(timeout_s=30),
        kill=broker.kill,
        handle=broker,
    )

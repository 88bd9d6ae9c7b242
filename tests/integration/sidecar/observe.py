"""What a test sees of a running ``delaybridge run`` process: its log, HTTP server, metrics
and the offsets its group committed. Every wait fails at once if the process died."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from confluent_kafka import Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.http_client import Client
from tests.integration.sidecar.harness import SubprocessSidecar
from tests.support import wait_until

_HTTP = re.compile(r"delaybridge: HTTP on http://[^:/]+:(\d+)")


def alive(side: SubprocessSidecar) -> None:
    """Raise, with the log's tail, unless the process is running."""
    assert side.proc is not None, "sidecar never started"
    code = side.proc.poll()
    assert code is None, f"sidecar exited {code}:\n{side.tail()}"


def this_run(side: SubprocessSidecar) -> str:
    """The log written since the current process started (the file spans restarts)."""
    with side.log.open("rb") as f:
        f.seek(side.started_at)
        return f.read().decode(errors="replace")


def http(side: SubprocessSidecar, timeout_s: float = 60) -> Client:
    """A client of the current process's HTTP server (the port it printed at start)."""

    def port() -> str:
        alive(side)
        found = _HTTP.search(this_run(side))
        return found.group(1) if found else ""

    return Client(int(wait_until(port, timeout_s, "the sidecar's HTTP port", detail=side.tail)))


def metrics(client: Client) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of ``/metrics``: (name, labels) -> value."""
    reply = client("GET", "/metrics")
    assert reply.status == 200, reply
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(reply.body.decode())
        for sample in family.samples
    }


def metric(client: Client, name: str, **labels: str) -> float:
    """One series' value for the whole pod: summed over its worker processes (a pod of
    several workers labels each one's series ``worker``); 0 when it does not exist (yet)."""
    wanted = frozenset(labels.items())
    per_pod = "worker" not in labels  # asked for one worker: that worker's series only
    return sum(
        value
        for (sample, found), value in metrics(client).items()
        if sample == name
        and frozenset(kv for kv in found if not (per_pod and kv[0] == "worker")) == wanted
    )


def metric_by_worker(client: Client, name: str, **labels: str) -> dict[str, float]:
    """One series' value in each worker process of the pod (key "" without workers)."""
    out: dict[str, float] = {}
    for (sample, found), value in metrics(client).items():
        rest = dict(found)
        worker = rest.pop("worker", "")
        if sample == name and rest == labels:
            out[worker] = value
    return out


def metric_reaches(
    client: Client, name: str, value: float, timeout_s: float, **labels: str
) -> None:
    """Wait until a sample has ``value`` (metrics are published once per flush interval)."""
    seen: list[float] = []

    def reached() -> bool:
        seen.append(metric(client, name, **labels))
        return seen[-1] == value

    what = f"{name}{labels or ''} == {value}"
    wait_until(reached, timeout_s, what, detail=lambda: f"last value {seen[-1]}")


def settled(client: Client, topic: str, partitions: int, workers: int) -> bool:
    """Is the pod ready, with every partition of ``topic`` owned once and spread over as
    many of its ``workers`` as there are partitions for? The first worker to join takes
    every partition and the others take their share a rebalance later: until then a
    partition may still move, and pause for its handover."""
    if client("GET", "/readyz").status != 200:
        return False
    stats = client("GET", "/admin/stats").json()
    owned = [p for p in stats.get("partitions", []) if p.get("topic") == topic]
    keys = {p["partition"] for p in owned}
    holders = {str(p.get("worker", "0")) for p in owned}
    return len(keys) == len(owned) == partitions and len(holders) == min(workers, partitions)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offset of each partition (-1001: none), without joining it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return [tp.offset for tp in consumer.committed(tps, timeout=10)]
    finally:
        consumer.close()


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


def lookup(client: Client, id: str) -> dict[str, Any] | None:
    """The admin API's view of a pending message (None: no store of this process holds it)."""
    reply = client("GET", "/admin/messages/" + quote(id, safe=""))
    if reply.status == 404:
        return None
    assert reply.status == 200, reply
    found: dict[str, Any] = reply.json()
    return found

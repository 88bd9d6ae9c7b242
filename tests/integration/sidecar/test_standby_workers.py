"""Warm standbys with several workers per pod, on the real broker (issue 26, item 1).

Two pods (``delaybridge run`` with the default of every core: a supervisor and its
workers, each pod with its own data directory and static id) share a delay topic of four
partitions, with ``changelog.standby_replicas: 1``. The workers of a pod share its store
directory, so a standby must be kept in the *other* pod, by one of its workers, never by
a sibling of the owner. Then one pod is killed (``kill -9`` of its process group) and the
other takes its partitions over from its standbys.

Pass criteria: every partition has exactly one standby copy, in the pod that does not
own it; after the kill, the survivor owns all four partitions; of the 200 messages
pending at the kill, 0 lost, 0 early, 0 duplicates (none was due before the kill).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from delaybridge.bridge.workers.identity import worker_count
from tests.http_client import Client
from tests.integration.sidecar.harness import (
    SubprocessSidecar,
    Topics,
    Watcher,
    now_ms,
    produce,
    settings_for,
)
from tests.integration.sidecar.observe import alive, http, metrics
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
Headers = list[tuple[str, str | bytes | None]]
PARTITIONS = 4
N = 200
DUE_IN_MS = 45_000


def owners(pods: dict[str, Client], topic: str) -> dict[int, str]:
    """partition -> the pod that owns it (from each pod's /admin/stats)."""
    out: dict[int, str] = {}
    for name, client in pods.items():
        reply = client("GET", "/admin/stats")
        if reply.status != 200:
            continue
        for p in reply.json().get("partitions", []):
            if p.get("topic") == topic:
                out[int(p["partition"])] = name
    return out


def standbys(pods: dict[str, Client], topic: str) -> dict[int, list[tuple[str, str]]]:
    """partition -> (pod, worker) of every standby copy (its lag series)."""
    out: dict[int, list[tuple[str, str]]] = {}
    for name, client in pods.items():
        for (sample, labels), _ in metrics(client).items():
            found = dict(labels)
            if sample == "delaybridge_standby_lag_records" and found.get("topic") == topic:
                keeper = (name, found.get("worker", "0"))
                out.setdefault(int(found["partition"]), []).append(keeper)
    return out


def test_standbys_are_kept_per_pod_and_take_over_after_a_kill9(kafka: Any, tmp_path: Path) -> None:
    topics = Topics(
        delay=kafka.create_topic("delay-sw", partitions=PARTITIONS),
        targets=[kafka.create_topic("orders-sw", partitions=2)],
        dead_letter=kafka.create_topic("dlt-sw"),
        cancels=kafka.create_topic("cancels-sw"),
    )
    group = f"g-{topics.delay}"
    sides: dict[str, SubprocessSidecar] = {}
    for name in ("a", "b"):
        settings = settings_for(
            kafka.bootstrap_servers,
            topics,
            tmp_path / name / "data",
            group,
            kafka={"instance_id": f"pod-{name}"},
            changelog={"standby_replicas": 1},
        )
        (tmp_path / name).mkdir()
        sides[name] = SubprocessSidecar(settings, tmp_path / name, name)
    assert worker_count(settings) >= 2, "this test is about pods of several workers"
    watcher = Watcher(kafka.bootstrap_servers, [topics.targets[0]])
    try:
        for side in sides.values():
            side.start()
        pods = {name: http(side) for name, side in sides.items()}

        def settled() -> bool:
            for side in sides.values():
                alive(side)
            return len(owners(pods, topics.delay)) == PARTITIONS

        wait_until(settled, 120, "every partition owned", detail=sides["a"].tail)
        due_ms = now_ms() + DUE_IN_MS
        records: list[tuple[bytes | None, bytes | None, Headers]] = [
            (
                f"k{i}".encode(),
                f"m{i}".encode(),
                [
                    ("delay-target-topic", topics.targets[0]),
                    ("deliver-at-ms", str(due_ms + 10 * i)),
                    ("delay-id", f"m{i}"),
                ],
            )
            for i in range(N)
        ]
        produce(kafka.bootstrap_servers, topics.delay, records)

        def one_standby_each_in_the_other_pod() -> bool:
            own = owners(pods, topics.delay)
            kept = standbys(pods, topics.delay)
            if len(own) != PARTITIONS:
                return False
            return all(
                len(kept.get(p, [])) == 1 and kept[p][0][0] != own[p] for p in range(PARTITIONS)
            )

        wait_until(
            one_standby_each_in_the_other_pod,
            90,
            "one standby per partition, in the pod that does not own it",
            detail=lambda: (
                f"owners {owners(pods, topics.delay)}, standbys {standbys(pods, topics.delay)}"
            ),
        )
        assert now_ms() < due_ms, "the standbys took too long: messages fell due"
        sides["a"].kill9()  # the whole pod: its supervisor and its workers
        survivor = {"b": pods["b"]}
        wait_until(
            lambda: len(owners(survivor, topics.delay)) == PARTITIONS,
            90,
            "the survivor owns every partition",
            detail=sides["b"].tail,
        )
        watcher.until(
            lambda got: len({a.id for a in got}) >= N,
            DUE_IN_MS / 1000 + 90,
            "every message delivered",
        )
        watcher.settle(3.0)
    finally:
        for side in sides.values():
            if side.proc is not None and side.proc.poll() is None:
                side.terminate(60)
        watcher.close()
    counts = Counter(a.id for a in watcher.arrivals)
    assert set(counts) == {f"m{i}" for i in range(N)}, "lost or unexpected messages"
    assert max(counts.values()) == 1, counts.most_common(3)
    early = [a.id for a in watcher.arrivals if a.timestamp_ms < a.due_ms]
    assert early == []

"""A changelog written by commit 505b445 restores a store that delivers what it did then.

``fixtures/changelog_505b445.json`` holds a whole fake cluster as a sidecar of 505b445
left it (``fixtures/make_changelog_505b445.py``): its changelog carries compact and wide
commit records, 12- and 16-byte keys (a series' later occurrence), tombstones of
deliveries, cancels and a replace, and progress records. A sidecar with an empty disk
restores from it with today's code and must deliver exactly what a second sidecar of
505b445 delivered from the same cluster.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from delaybridge.timerlog import ManualClock
from tests.fakes import FakeCluster
from tests.unit.bridge.sidecar_kit import ORDERS, FakeSidecar

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "changelog_505b445.json").read_text())


def unhex(raw: str | None) -> bytes | None:
    return None if raw is None else bytes.fromhex(raw)


def cluster_of(state: dict[str, Any], clock: ManualClock) -> FakeCluster:
    cluster = FakeCluster(clock=clock)
    for name, topic in state["topics"].items():
        cluster.create_topic(name, len(topic["partitions"]), topic["config"])
        for p, log in enumerate(topic["partitions"]):
            for r in log:
                headers = r["headers"]
                cluster.append(
                    name,
                    p,
                    unhex(r["key"]),
                    unhex(r["value"]),
                    None if headers is None else [(n, unhex(v)) for n, v in headers],
                    r["timestamp_ms"],
                )
    for group, topic, partition, offset in state["committed"]:
        cluster.committed[(group, topic, partition)] = offset
    return cluster


def test_a_changelog_of_505b445_restores_and_delivers_what_it_did(tmp_path: Path) -> None:
    clock = ManualClock(FIXTURE["now_ms"])
    cluster = cluster_of(FIXTURE["cluster"], clock)
    before = [len(log) for log in cluster.topics[ORDERS]]
    side = FakeSidecar(tmp_path / "b", clock=clock, cluster=cluster)
    side.turns(4)
    assert all(p.role.value == "active" for p in side.service.partitions)
    for _ in range(40):  # as the fixture's second sidecar did
        side.turns(2, advance_ms=20_000)
    side.stop()
    got = [
        {
            "partition": p,
            "key": None if r.key is None else r.key.hex(),
            "value": None if r.value is None else r.value.hex(),
            "headers": [[n, None if v is None else v.hex()] for n, v in r.headers or []],
        }
        for p, log in enumerate(cluster.topics[ORDERS])
        for r in log[before[p] :]
    ]
    assert len(got) == 30  # 27 later*, the long id, the series' occurrences 4 and 5
    assert got == FIXTURE["restored"]

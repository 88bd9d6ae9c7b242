"""Warm standbys on the fakes: a failover catches up instead of restoring (issue 11)."""

from __future__ import annotations

from pathlib import Path

from delaybridge.bridge.partition.state import Role
from delaybridge.bridge.state.standby import pod_of, standby_keepers
from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule

STANDBY = {"standby_replicas": 1}


def test_keepers_are_the_same_for_everyone_and_never_the_owner() -> None:
    parts = [("t", p) for p in range(12)]
    members = ["a", "b", "c"]
    owners = {key: members[key[1] % 3] for key in parts}
    keepers = standby_keepers(parts, members, owners, 1)
    for key, who in keepers.items():
        assert len(who) == 1 and who[0] != owners[key]
    assert {who[0] for who in keepers.values()} == set(members)  # spread over everyone
    assert all(len(w) == 2 for w in standby_keepers(parts, members, owners, 5).values())


def test_keepers_are_chosen_per_pod_never_a_sibling_of_the_owner() -> None:
    # Issue 26: with several workers per pod (every core by default), the workers of a
    # pod share its store directory: a sibling of the owner must not keep a copy in it,
    # and a pod keeps at most one copy of a partition.
    assert [pod_of(m) for m in ["p", "p-w1", "p-w12", "sidecar-west", "x-w", "rdkafka-9f"]] == [
        "p",
        "p",
        "p",
        "sidecar-west",
        "x-w",
        "rdkafka-9f",
    ]
    parts = [("t", p) for p in range(24)]
    members = ["a", "a-w1", "b", "b-w1", "c", "c-w1"]
    owners = {key: members[key[1] % 6] for key in parts}
    keepers = standby_keepers(parts, members, owners, 2)
    for key, who in keepers.items():
        pods = [pod_of(m) for m in who]
        assert len(who) == 2 and len(set(pods)) == 2, who
        assert pod_of(owners[key]) not in pods
    assert {m for who in keepers.values() for m in who} == set(members)  # spread over all
    # One worker per pod: as many keepers as there are other pods, at most.
    assert all(len(w) == 2 for w in standby_keepers(parts, members, owners, 5).values())


def test_a_standby_takes_over_with_a_catch_up_not_a_restore(tmp_path: Path) -> None:
    a = FakeSidecar(tmp_path / "a", changelog=STANDBY)
    b = FakeSidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster, changelog=STANDBY)
    for side in (a, b):
        side.turns(2)
    owner_of_0 = a if (DELAY, 0) in a.service.partitions.by_key else b
    other = b if owner_of_0 is a else a
    for i in range(200):
        owner_of_0.send(schedule(f"later{i}", 600_000), partition=0)
    for _ in range(4):  # the group view refreshes, the standby opens and tails
        for side in (a, b):
            side.turns(2, advance_ms=3_000)
            side.checkpoint()
    standbys = other.service.partitions.standbys
    assert standbys is not None and (DELAY, 0) in standbys.parts
    assert standbys.parts[(DELAY, 0)].role is Role.STANDBY
    for _ in range(2):
        other.turns(2, advance_ms=6_000)  # the standby applies what it read
    assert standbys.parts[(DELAY, 0)].store.stats().pending == 200

    for part in owner_of_0.service.partitions:  # the owner is killed
        part.store.abandon()
    owner_of_0.consumer.crash()
    restoring = other.service.partitions.restoring
    assert restoring is not None
    restoring.progress()  # forget the restores of the start
    other.turns(3)
    part = other.service.partitions.by_key[(DELAY, 0)]
    assert part.role is Role.ACTIVE
    assert part.store.stats().pending == 200
    read = sum(n for p, _left, n in restoring.progress() if p.key == (DELAY, 0))
    assert read < 20  # a catch-up of the last few records, not a restore of 200
    assert (DELAY, 0) not in standbys.parts
    other.stop()

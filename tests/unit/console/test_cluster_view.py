"""Merging the replicas' /admin/stats and /admin/pending answers into one view."""

from __future__ import annotations

from typing import Any

from delaybridge.console.cluster_view import merge
from delaybridge.console.replicas import ReplicaError


def stats(*parts: tuple[str, int, str, int], paused: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "group": "g",
        "paused": list(paused),
        "backpressure": False,
        "in_flight": 1,
        "partitions": [
            {"topic": t, "partition": p, "role": role, "pending": n, "bytes_on_disk": 10}
            for t, p, role, n in parts
        ],
    }


def pending(by_topic: dict[str, int], minutes: list[int], hours: list[int]) -> dict[str, Any]:
    return {
        "pending": sum(by_topic.values()),
        "by_topic": by_topic,
        "histogram": {"by_minute": minutes, "by_hour": hours},
    }


def test_two_replicas_sum_bin_by_bin_and_name_owners() -> None:
    view = merge(
        {
            "http://a": stats(("d", 0, "active", 3), ("d", 1, "standby", 2), paused=("dequeue",)),
            "http://b": stats(("d", 1, "active", 2)),
        },
        {
            "http://a": pending({"orders": 3}, [1, 2], [3]),
            "http://b": pending({"orders": 1, "mail": 1}, [0, 1, 5], [1, 1]),
        },
        start_ms=7,
    )
    assert view.pending == 5 and view.by_topic == {"mail": 1, "orders": 4}
    assert view.by_minute == [1, 3, 5] and view.by_hour == [4, 1]
    assert view.complete and view.problems == []
    assert [(r.name, r.owner, r.role) for r in view.partitions] == [
        ("d-0", "http://a", "active"),
        ("d-1", "http://b", "active"),
        ("d-1", "http://a", "standby"),
    ]
    assert view.paused_anywhere("dequeue") == ["http://a"]
    assert [r.active_partitions for r in view.replicas] == [1, 1]


def test_a_replica_that_fails_is_named_and_left_out() -> None:
    down = ReplicaError("http://b", 0, "connection refused")
    view = merge(
        {"http://a": stats(("d", 0, "active", 3)), "http://b": down},
        {"http://a": pending({"orders": 3}, [3], []), "http://b": down},
        start_ms=0,
    )
    assert not view.complete
    assert view.pending == 3
    assert [r.error is not None for r in view.replicas] == [False, True]
    assert any("http://b" in p and "not counted" in p for p in view.problems)


def test_a_partition_owned_twice_is_a_problem_and_a_bad_answer_an_error() -> None:
    view = merge(
        {"http://a": stats(("d", 0, "active", 1)), "http://b": stats(("d", 0, "restoring", 1))},
        {"http://a": pending({"o": 1}, [], []), "http://b": pending({"o": 1}, [], [])},
        start_ms=0,
    )
    assert any("d-0 is owned by 2 replicas" in p for p in view.problems)
    broken = merge({"http://a": {"partitions": [{"topic": "d"}]}}, None, start_ms=0)
    assert broken.replicas[0].error is not None


def test_without_pending_counts() -> None:
    view = merge({"http://a": stats(("d", 0, "active", 1), paused=("enqueue",))}, None, 0)
    assert view.complete and view.pending == 0
    assert view.replicas[0].paused == ("enqueue",)

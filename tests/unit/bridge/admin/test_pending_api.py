"""The pending listing's admin routes, the replica merge and the CLI's merge.

Proves: bad parameters are 400s naming the parameter (and never reach the owner
thread); a replica merges its stores in position order with one cursor; the CLI merges
several replicas' pages -- including partial ones -- into exactly the union, once each,
and sums stats; a failing replica is named.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from delaybridge.bridge.admin.pending import PendingQuery, filter_fingerprint, list_replica
from delaybridge.bridge.admin.replicas import list_page, replicas, sum_stats
from delaybridge.bridge.partition.state import PartitionState, Role
from delaybridge.errors import DelayBridgeError
from delaybridge.timerlog import ManualClock, StoreSettings, TimerStore
from delaybridge.timerlog.list_cursor import Cursor
from delaybridge.timerlog.listing import Filter
from tests.http_client import Client
from tests.unit.bridge.http.test_http import TOKEN, FakeControl, serve
from tests.unit.timerlog.support import START_MS, rec

SMALL = StoreSettings(
    tick_ms=100,
    wheel_slots=64,
    commit_segment_bytes=8192,
    timer_segment_entries=64,
    cancel_grace_ms=0,
)


@pytest.fixture
def control() -> FakeControl:
    return FakeControl()


@pytest.fixture
def client(control: FakeControl) -> Iterator[Client]:
    from delaybridge.bridge.observe.metrics import Metrics

    yield from serve(control, Metrics(process=False), TOKEN)


def test_list_parameters_are_parsed(client: Client, control: FakeControl) -> None:
    reply = client("GET", "/admin/messages", TOKEN)
    assert reply.status == 200
    query = "?topic=orders&due_from_ms=5&due_to_ms=9&id_prefix=o-&limit=1000&values=true"
    assert client("GET", "/admin/messages" + query, TOKEN).status == 200
    first, second = control.queries
    assert first == PendingQuery(Filter(), 100, None, False)
    assert second == PendingQuery(Filter("orders", 5, 9, "o-"), 1000, None, True)


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("?limit=0", "limit"),
        ("?limit=1001", "limit"),
        ("?limit=ten", "limit"),
        ("?due_from_ms=soon", "due_from_ms"),
        ("?due_from_ms=9&due_to_ms=9", "due_to_ms"),
        ("?topic=", "topic"),
        ("?id_prefix=", "id_prefix"),
        ("?values=maybe", "values"),
        ("?cursor=!!!", "cursor"),
        ("?colour=red", "colour"),
        ("?limit=1&limit=2", "limit"),
    ],
)
def test_bad_list_parameters_are_400_naming_them(
    client: Client, control: FakeControl, query: str, parameter: str
) -> None:
    reply = client("GET", "/admin/messages" + query, TOKEN)
    assert (reply.status, reply.json()["parameter"]) == (400, parameter)
    assert control.queries == []


def test_a_cursor_of_other_filters_is_400(client: Client) -> None:
    cursor = Cursor(filters=filter_fingerprint(Filter(topic="a"))).encode()
    reply = client("GET", f"/admin/messages?topic=b&cursor={cursor}", TOKEN)
    assert (reply.status, reply.json()["parameter"]) == (400, "cursor")
    assert "other filters" in reply.json()["error"]
    assert client("GET", f"/admin/messages?topic=a&cursor={cursor}", TOKEN).status == 200


def test_listing_needs_the_token(client: Client) -> None:
    assert client("GET", "/admin/messages").status == 401
    assert client("GET", "/admin/pending").status == 401


def test_pending_stats_route(client: Client, control: FakeControl) -> None:
    assert client("GET", "/admin/pending", TOKEN).json() == {"pending": 0}
    assert client("GET", "/admin/pending?start_ms=12", TOKEN).status == 200
    reply = client("GET", "/admin/pending?start_ms=now", TOKEN)
    assert (reply.status, reply.json()["parameter"]) == (400, "start_ms")
    assert control.queries == [None, 12]


# --- merging -------------------------------------------------------------------------
def _part(tmp: Path, name: str, partition: int, n: int) -> PartitionState:
    store = TimerStore.open(tmp / name, SMALL, ManualClock(START_MS))
    store.append(
        [
            rec(f"{name}-{i}", START_MS + 1 + (i * 37) % 12_000, offset=i, topic=f"t{i % 2}")
            for i in range(n)
        ]
    )
    return cast(
        PartitionState,
        SimpleNamespace(
            topic="delay",
            partition=partition,
            name=f"delay-{partition}",
            store=store,
            role=Role.ACTIVE,
        ),
    )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[str, list[PartitionState]]]:
    """Two replicas: one with stores delay-0 and delay-2, one with delay-1."""
    parts = [_part(tmp_path, f"p{j}", j, 60 + 25 * j) for j in range(3)]
    yield {"http://r1": [parts[0], parts[2]], "http://r2": [parts[1]]}
    for p in parts:
        p.store.close()


def _fake_fetch(cluster: dict[str, list[PartitionState]], budget_cut: int = 0) -> Any:
    def fetch(url: str, path: str, params: dict[str, str]) -> dict[str, Any]:
        from delaybridge.bridge.admin import pending

        if url not in cluster:
            raise DelayBridgeError(f"replica {url}: cannot get {path}: refused")
        if path == "/admin/pending":
            return pending.stats_replica(cluster[url], int(params["start_ms"]))
        query = pending.parse_query(params)
        if budget_cut:
            return pending.list_replica(cluster[url], query, budget=budget_cut)
        return pending.list_replica(cluster[url], query)

    return fetch


def _all_ids(cluster: dict[str, list[PartitionState]], flt: Filter) -> list[str]:
    """What ``_part`` stored (nothing is due yet: the stores' clocks stand still)."""
    return [
        f"p{p.partition}-{i}"
        for parts in cluster.values()
        for p in parts
        for i in range(60 + 25 * p.partition)
        if flt.topic in (None, f"t{i % 2}")
    ]


@pytest.mark.parametrize("budget_cut", [0, 7])
@pytest.mark.parametrize("flt", [Filter(), Filter(topic="t1")])
def test_cli_merges_replicas_into_exactly_the_union(
    cluster: dict[str, list[PartitionState]], budget_cut: int, flt: Filter
) -> None:
    fetch = _fake_fetch(cluster, budget_cut)
    urls = list(cluster)
    got: list[dict[str, Any]] = []
    cursor, partial_seen = None, False
    while True:
        page = list_page(fetch, urls, flt, 13, cursor, False)
        assert len(page["messages"]) <= 13
        got += page["messages"]
        partial_seen |= page["partial"]
        cursor = page["cursor"]
        if cursor is None:
            break
    ids = [m["id"] for m in got]
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(_all_ids(cluster, flt))
    positions = [tuple(m["position"]) for m in got]
    assert positions == sorted(positions)
    assert partial_seen == bool(budget_cut)


def test_replica_page_merges_its_stores(cluster: dict[str, list[PartitionState]]) -> None:
    doc = list_replica(cluster["http://r1"], PendingQuery(Filter(), 50, None, True))
    assert doc["stores"] == ["delay-0", "delay-2"]
    assert len(doc["messages"]) == 50 and doc["cursor"] is not None
    assert {m["origin"].split("/")[1] for m in doc["messages"]} == {"0", "2"}
    assert all(m["value"] for m in doc["messages"])


def test_cli_sums_stats_and_names_a_failing_replica(
    cluster: dict[str, list[PartitionState]],
) -> None:
    fetch = _fake_fetch(cluster)
    answers = {url: fetch(url, "/admin/pending", {"start_ms": str(START_MS)}) for url in cluster}
    total = sum_stats(answers)
    assert total["pending"] == 60 + 85 + 110
    assert total["by_topic"] == {"t0": 128, "t1": 127}
    assert sum(total["by_hour"]) == sum(total["by_minute"]) <= total["pending"]
    with pytest.raises(DelayBridgeError, match="http://r9"):
        list_page(fetch, ["http://r1", "http://r9"], Filter(), 5, None, False)
    with pytest.raises(DelayBridgeError, match="http://bad"):
        sum_stats({"http://bad": {"by_topic": 3}})


def test_replica_addresses() -> None:
    assert replicas(["http://a:1/", "http://a:1"], None) == ["http://a:1"]
    assert replicas([], "localhost:8080")[0].endswith(":8080")
    with pytest.raises(DelayBridgeError, match="NAME:PORT"):
        replicas([], "nameonly")
    with pytest.raises(DelayBridgeError, match="--url"):
        replicas([], None)

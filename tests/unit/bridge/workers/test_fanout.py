"""The supervisor's port in front of two workers, each a real Router over a fake Control.

What it proves: ``/metrics`` carries every worker's series once per family with a
``worker`` label, plus ``delaybridge_worker_up``; ``/healthz`` and ``/readyz`` are 200
only when every worker is running and says so; the admin API merges the workers'
answers (stats, pending counts, listing), finds the worker holding a message, sends a
cancel to that one only, and checks the token itself; a worker being restarted makes
admin calls 503 naming it. One test goes through the real HTTP server.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from delaybridge.bridge.admin.control import ConfirmRequired
from delaybridge.bridge.flow import Direction
from delaybridge.bridge.http.routes import Request, Router
from delaybridge.bridge.http.server import HttpServer
from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.workers.fanout import FanOut
from delaybridge.bridge.workers.metrics_merge import SupervisorMetrics
from delaybridge.bridge.workers.worker_http import Answer
from delaybridge.settings import HttpSettings
from tests.http_client import Client

TOKEN = "t0ken"
#: The workers' cancels.prefix_confirm_above.
CAP = 2


@dataclass
class Worker:
    """A worker's Control: ``holds`` its messages; records cancels."""

    index: int
    holds: dict[str, dict[str, Any]] = field(default_factory=dict)
    healthy_now: bool = True
    readiness: tuple[bool, str] = (True, "")
    cancels: list[str] = field(default_factory=list)
    paused_now: set[Direction] = field(default_factory=set)

    def healthy(self) -> bool:
        return self.healthy_now

    def ready(self) -> tuple[bool, str]:
        return self.readiness

    def conditions(self) -> dict[str, str]:
        return {}

    def stats(self) -> dict[str, Any]:
        return {
            "group": "g",
            "paused": sorted(self.paused_now),
            "backpressure": False,
            "in_flight": 2,
            "partitions": [{"topic": "d", "partition": self.index}],
        }

    def lookup(self, id: str, values: bool = False) -> dict[str, Any] | None:
        found = self.holds.get(id)
        return found if found is None or not values else {**found, "value": "dg=="}

    def cancel(self, id: str, target_topic: str | None) -> dict[str, Any]:
        self.cancels.append(id)
        return {"id": id, "matched_here": int(id in self.holds)}

    def cancel_prefix(
        self, prefix: str, target_topic: str | None, confirm: int | None, dry_run: bool = False
    ) -> dict[str, Any]:
        """As the Control's: a dry run counts; above the cap, unconfirmed, refused."""
        count = sum(i.startswith(prefix) for i in self.holds)
        if dry_run:
            return {"id_prefix": prefix, "count": count, "dry_run": True, "confirm_above": CAP}
        if count > CAP and (confirm is None or confirm < count):
            raise ConfirmRequired(count, CAP)
        self.cancels.append(prefix)
        return {"id_prefix": prefix, "count": count}

    def list_pending(self, query: Any) -> dict[str, Any]:
        msgs = [
            {"id": i, "position": [0, m["due_ms"], f"d-{self.index}", 0]} | m
            for i, m in sorted(self.holds.items())
        ]
        return {"messages": msgs, "cursor": None, "partial": False}

    def pending_stats(self, start_ms: int | None) -> dict[str, Any]:
        return {
            "pending": len(self.holds),
            "by_topic": {"orders": len(self.holds)},
            "stores": [{"store": f"d-{self.index}", "pending": len(self.holds)}],
            "histogram": {
                "start_ms": start_ms,
                "by_minute": [1, 2],
                "by_hour": [3],
                "edge_ms": start_ms,
            },
        }

    def pause(self, what: Direction) -> None:
        self.paused_now.add(what)

    def resume(self, what: Direction) -> None:
        self.paused_now.discard(what)

    def paused(self) -> set[Direction]:
        return set(self.paused_now)


class Pod:
    """Two workers behind a FanOut; ``down`` marks a worker not running."""

    def __init__(self) -> None:
        self.workers = [Worker(0, {"a": {"due_ms": 10}}), Worker(1, {"b": {"due_ms": 5}})]
        self.metrics = [Metrics(process=False), Metrics(process=False)]
        self.routers = [
            Router(w, m.registry, TOKEN) for w, m in zip(self.workers, self.metrics, strict=True)
        ]
        self.down: set[int] = set()
        self.registry = CollectorRegistry()
        self.own = SupervisorMetrics(self.registry)
        self.fanout = FanOut(self._urls, self.registry, self.own, TOKEN, self._ask)

    def _urls(self) -> dict[str, str | None]:
        return {str(i): None if i in self.down else f"http://w{i}" for i in range(2)}

    def _ask(
        self, url: str, method: str, target: str, headers: Mapping[str, str], timeout: float
    ) -> Answer:
        parts = urlsplit(target)
        router = self.routers[int(url[len("http://w") :])]
        response = router.handle(
            Request(
                method,
                parts.path,
                parse_qs(parts.query),
                headers.get("Authorization"),
                headers.get("Accept"),
            )
        )
        return Answer(response.status, response.body, response.content_type)

    def __call__(self, method: str, path: str, token: str | None = TOKEN) -> Any:
        parts = urlsplit(path)
        auth = None if token is None else f"Bearer {token}"
        return self.fanout.handle(Request(method, parts.path, parse_qs(parts.query), auth))


def _json(response: Any) -> Any:
    import orjson

    return orjson.loads(response.body)


def test_metrics_carry_every_workers_series_with_a_worker_label() -> None:
    pod = Pod()
    pod.metrics[0].count(Tally(delivered=Counter({"orders": 3})))
    pod.metrics[1].count(Tally(delivered=Counter({"orders": 4})))
    text = pod("GET", "/metrics").body.decode()
    assert text.count("# TYPE delaybridge_delivered_total counter") == 1, "one family"
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    assert (
        samples[("delaybridge_delivered_total", (("target_topic", "orders"), ("worker", "0")))] == 3
    )
    assert (
        samples[("delaybridge_delivered_total", (("target_topic", "orders"), ("worker", "1")))] == 4
    )
    assert samples[("delaybridge_worker_up", (("worker", "0"),))] == 1
    pod.down.add(1)
    text = pod("GET", "/metrics").body.decode()
    assert 'delaybridge_worker_up{worker="1"} 0.0' in text
    assert 'target_topic="orders",worker="1"' not in text


def test_health_and_readiness_need_every_worker() -> None:
    pod = Pod()
    assert pod("GET", "/healthz").status == 200 and pod("GET", "/readyz").status == 200
    pod.workers[1].readiness = (False, "restoring from the changelog")
    answer = pod("GET", "/readyz")
    assert answer.status == 503
    assert _json(answer)["reason"] == "worker 1: restoring from the changelog"
    pod.down.add(0)
    assert pod("GET", "/healthz").status == 503
    assert "worker 0: not running" in _json(pod("GET", "/healthz"))["reason"]


def test_a_worker_without_kafka_makes_the_pod_not_ready_and_shows_in_metrics() -> None:
    """Each worker has its own clients and reachability tracker: the pod is not ready
    while any worker cannot reach Kafka, and says which and why; its gauge keeps the
    worker label (the dashboard and the alert take the lowest per pod); liveness holds."""
    pod = Pod()
    kafka_away = (
        "Kafka unreachable for 12 s: no bootstrap server accepts connections "
        "(k:9092: Connection refused)"
    )
    pod.workers[1].readiness = (False, kafka_away)
    pod.metrics[1].set_kafka_reachable(False)
    answer = pod("GET", "/readyz")
    assert answer.status == 503
    assert _json(answer)["reason"] == f"worker 1: {kafka_away}"
    assert pod("GET", "/healthz").status == 200
    text = pod("GET", "/metrics").body.decode()
    assert 'delaybridge_kafka_reachable{worker="0"} 1.0' in text
    assert 'delaybridge_kafka_reachable{worker="1"} 0.0' in text


def test_admin_answers_are_merged() -> None:
    pod = Pod()
    stats = _json(pod("GET", "/admin/stats"))
    assert stats["in_flight"] == 4 and stats["workers"] == 2
    assert [(p["partition"], p["worker"]) for p in stats["partitions"]] == [(0, "0"), (1, "1")]
    counts = _json(pod("GET", "/admin/pending?start_ms=1000"))
    assert counts["pending"] == 2 and counts["by_topic"] == {"orders": 2}
    assert counts["histogram"]["by_minute"] == [2, 4] and counts["histogram"]["start_ms"] == 1000
    page = _json(pod("GET", "/admin/messages?limit=10"))
    assert [m["id"] for m in page["messages"]] == ["b", "a"], "merged in due order"
    assert page["cursor"] is None


def test_a_message_is_found_and_cancelled_where_it_is() -> None:
    pod = Pod()
    assert _json(pod("GET", "/admin/messages/b"))["due_ms"] == 5
    assert pod("GET", "/admin/messages/zzz").status == 404
    assert _json(pod("GET", "/admin/messages/b?values=true"))["value"] == "dg==", "query kept"
    assert _json(pod("DELETE", "/admin/messages/b"))["matched_here"] == 1
    assert (pod.workers[0].cancels, pod.workers[1].cancels) == ([], ["b"])
    pod("DELETE", "/admin/messages/zzz")  # held nowhere: one worker publishes the cancel
    assert pod.workers[0].cancels == ["zzz"] and pod.workers[1].cancels == ["b"]


def test_a_prefix_cancel_is_capped_on_the_pods_sum_and_sent_once() -> None:
    # Each worker alone holds no more than the cap (1 and 2 of "acme-"), the pod 3: sent
    # to every worker as it was, both would have cancelled and none asked to confirm.
    pod = Pod()
    pod.workers[0].holds["acme-1"] = {"due_ms": 7}
    pod.workers[1].holds.update({"acme-2": {"due_ms": 8}, "acme-3": {"due_ms": 9}})
    dry = _json(pod("DELETE", "/admin/messages?id_prefix=acme-&dry_run=true"))
    assert (dry["count"], dry["workers"]) == (3, {"0": 1, "1": 2})
    refused = pod("DELETE", "/admin/messages?id_prefix=acme-")
    assert refused.status == 409
    assert (_json(refused)["count"], _json(refused)["confirm_above"]) == (3, CAP)
    assert pod("DELETE", "/admin/messages?id_prefix=acme-&confirm=2").status == 409
    assert pod.workers[0].cancels == pod.workers[1].cancels == []
    done = _json(pod("DELETE", "/admin/messages?id_prefix=acme-&confirm=3"))
    assert done["count"] == 3
    assert pod.workers[0].cancels + pod.workers[1].cancels == ["acme-"], "one worker publishes"
    assert pod("DELETE", "/admin/messages?id_prefix=").status == 400


def test_pause_goes_to_every_worker_and_errors_pass_through() -> None:
    pod = Pod()
    assert _json(pod("POST", "/admin/pause?direction=dequeue"))["paused"] == ["dequeue"]
    assert all(w.paused_now == {Direction.DEQUEUE} for w in pod.workers)
    assert pod("POST", "/admin/pause?direction=sideways").status == 400
    assert pod("GET", "/admin/nope").status == 404
    assert pod("GET", "/admin/messages?bogus=1").status == 400


def test_token_and_workers_down() -> None:
    pod = Pod()
    assert pod("GET", "/admin/stats", token=None).status == 401
    assert pod("GET", "/admin/stats", token="wrong").status == 401
    pod.down.add(1)
    answer = pod("GET", "/admin/stats")
    assert answer.status == 503 and "worker 1 not running" in _json(answer)["error"]


def test_served_over_http() -> None:
    pod = Pod()
    with HttpServer(HttpSettings(port=0, admin_token=TOKEN), router=pod.fanout) as server:
        client = Client(server.port)
        assert client("GET", "/healthz").status == 200
        assert client("GET", "/admin/stats", TOKEN).json()["workers"] == 2

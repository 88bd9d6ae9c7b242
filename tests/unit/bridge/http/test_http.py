"""The HTTP side over real sockets on 127.0.0.1, against a fake of the Control protocol."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from delaybridge.bridge.admin.control import ConfirmRequired, Control, ControlTimeout
from delaybridge.bridge.flow import Direction
from delaybridge.bridge.http.server import HttpServer
from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.observe.tally import Tally
from delaybridge.errors import ConfigError
from delaybridge.settings import HttpSettings
from tests.http_client import Client

TOKEN = "s3cret-token-value"
CONFIRM_ABOVE = 2


@dataclass
class FakeControl:
    """Records calls; answers from its fields. A double of the service's Control."""

    is_healthy: bool = True
    readiness: tuple[bool, str] = (True, "")
    conditions_now: dict[str, str] = field(default_factory=dict)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    cancels: list[tuple[str, str | None]] = field(default_factory=list)
    prefix_cancels: list[tuple[str, str | None]] = field(default_factory=list)
    paused_now: set[Direction] = field(default_factory=set)
    fail_with: Exception | None = None
    queries: list[Any] = field(default_factory=list)

    def _maybe_fail(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def healthy(self) -> bool:
        self._maybe_fail()
        return self.is_healthy

    def ready(self) -> tuple[bool, str]:
        return self.readiness

    def conditions(self) -> dict[str, str]:
        return self.conditions_now

    def stats(self) -> dict[str, Any]:
        self._maybe_fail()
        return {"partitions": {3: {"pending": 5}}, "paused": self.paused_now}

    def lookup(self, id: str, values: bool = False) -> dict[str, Any] | None:
        found = self.messages.get(id)
        return found if found is None or not values else {**found, "value": "dg=="}

    def cancel(self, id: str, target_topic: str | None) -> dict[str, Any]:
        self.cancels.append((id, target_topic))
        return {"id": id, "cancelled": id in self.messages}

    def cancel_prefix(
        self, prefix: str, target_topic: str | None, confirm: int | None, dry_run: bool = False
    ) -> dict[str, Any]:
        """As the service does: above CONFIRM_ABOVE, 409 until ``confirm`` covers it."""
        count = sum(1 for id in self.messages if id.startswith(prefix))
        if dry_run:
            return {"id_prefix": prefix, "count": count, "dry_run": True}
        if count > CONFIRM_ABOVE and (confirm is None or confirm < count):
            raise ConfirmRequired(count, CONFIRM_ABOVE)
        self.prefix_cancels.append((prefix, target_topic))
        return {"id_prefix": prefix, "target_topic": target_topic, "count": count}

    def list_pending(self, query: Any) -> dict[str, Any]:
        self.queries.append(query)
        return {"messages": [], "cursor": None}

    def pending_stats(self, start_ms: int | None) -> dict[str, Any]:
        self.queries.append(start_ms)
        return {"pending": 0}

    def pause(self, what: Direction) -> None:
        self.paused_now.add(what)

    def resume(self, what: Direction) -> None:
        self.paused_now.discard(what)

    def paused(self) -> set[Direction]:
        return set(self.paused_now)


@pytest.fixture
def control() -> FakeControl:
    return FakeControl(messages={"m-1": {"id": "m-1", "due_ms": 5}, "a/b": {"id": "a/b"}})


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(process=False)


def serve(control: Control, metrics: Metrics, token: str = "") -> Iterator[Client]:
    server = HttpServer(HttpSettings(host="127.0.0.1", port=0, admin_token=token), control, metrics)
    with server:
        assert server.port > 0
        yield Client(server.port)


@pytest.fixture
def open_client(control: FakeControl, metrics: Metrics) -> Iterator[Client]:
    yield from serve(control, metrics)


@pytest.fixture
def client(control: FakeControl, metrics: Metrics) -> Iterator[Client]:
    yield from serve(control, metrics, TOKEN)


# --- open endpoints ---
def test_metrics_exposition(client: Client, metrics: Metrics) -> None:
    metrics.count(Tally(delivered=Counter({"orders": 3})))
    reply = client("GET", "/metrics")
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/plain")
    text = reply.body.decode()
    assert 'delaybridge_delivered_total{target_topic="orders"} 3.0' in text
    assert "delaybridge_delivery_lateness_seconds_bucket" in text
    assert "delaybridge_pending_messages" in text


def test_metrics_speaks_openmetrics_when_asked(client: Client) -> None:
    reply = client("GET", "/metrics", Accept="application/openmetrics-text; version=1.0.0")
    assert reply.headers["content-type"].startswith("application/openmetrics-text")
    assert reply.body.rstrip().endswith(b"# EOF")


def test_healthz(client: Client, control: FakeControl) -> None:
    assert client("GET", "/healthz").status == 200
    control.is_healthy = False
    reply = client("GET", "/healthz")
    assert (reply.status, reply.json()) == (503, {"healthy": False})


def test_readyz_gives_the_reason(client: Client, control: FakeControl) -> None:
    assert client("GET", "/readyz").json() == {"ready": True}
    control.readiness = (False, "recovering delay-3")
    reply = client("GET", "/readyz")
    assert (reply.status, reply.json()) == (503, {"ready": False, "reason": "recovering delay-3"})


def test_readyz_tells_a_disk_pause_and_stays_ready(client: Client, control: FakeControl) -> None:
    control.conditions_now = {"disk": "ingest paused: the data volume is short of space"}
    reply = client("GET", "/readyz")
    assert (reply.status, reply.json()) == (
        200,
        {"ready": True, "conditions": {"disk": "ingest paused: the data volume is short of space"}},
    )


def test_wrong_method_and_unknown_path(client: Client) -> None:
    reply = client("POST", "/healthz")
    assert (reply.status, reply.headers["allow"]) == (405, "GET")
    assert client("GET", "/nope").status == 404


# --- auth ---
@pytest.mark.parametrize(
    "authorization",
    [None, f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN, "Bearer "],
)
def test_admin_rejects_missing_or_wrong_token(client: Client, authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    reply = client("GET", "/admin/stats", **headers)
    assert reply.status == 401
    assert reply.headers["www-authenticate"].startswith("Bearer")
    assert TOKEN.encode() not in reply.body


def test_admin_accepts_the_token(client: Client) -> None:
    assert client("GET", "/admin/stats", TOKEN).status == 200
    assert client("GET", "/admin/stats", Authorization=f"bearer {TOKEN}").status == 200


def test_unknown_admin_path_is_401_before_404(client: Client) -> None:
    assert client("GET", "/admin/secret-thing").status == 401
    assert client("GET", "/admin/secret-thing", TOKEN).status == 404


def test_metrics_and_health_stay_open_with_a_token(client: Client) -> None:
    for path in ("/metrics", "/healthz", "/readyz"):
        assert client("GET", path).status == 200, path


def test_no_token_configured_means_open_admin_on_loopback(open_client: Client) -> None:
    assert open_client("GET", "/admin/stats").status == 200


def test_off_loopback_without_token_refuses_to_start(
    control: FakeControl, metrics: Metrics
) -> None:
    with pytest.raises(ConfigError, match="admin_token"):
        HttpServer(HttpSettings(host="0.0.0.0", port=0), control, metrics)


def test_token_never_logged(client: Client, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="delaybridge"):
        client("GET", "/admin/stats", TOKEN)
        client("GET", "/admin/stats", TOKEN + "wrong")
    assert "/admin/stats" in caplog.text  # request lines are logged at debug
    assert TOKEN not in caplog.text


# --- admin endpoints ---
def test_stats_serialises_sets_and_int_keys(client: Client, control: FakeControl) -> None:
    control.paused_now = {Direction.ENQUEUE}
    reply = client("GET", "/admin/stats", TOKEN)
    assert reply.json() == {"partitions": {"3": {"pending": 5}}, "paused": ["enqueue"]}
    assert reply.headers["content-type"] == "application/json"


def test_lookup(client: Client) -> None:
    assert client("GET", "/admin/messages/m-1", TOKEN).json() == {"id": "m-1", "due_ms": 5}
    assert client("GET", "/admin/messages/a%2Fb", TOKEN).json() == {"id": "a/b"}
    reply = client("GET", "/admin/messages/missing", TOKEN)
    assert reply.status == 404
    assert "missing" in reply.json()["error"]


def test_lookup_with_values(client: Client) -> None:
    reply = client("GET", "/admin/messages/m-1?values=true", TOKEN)
    assert reply.json() == {"id": "m-1", "due_ms": 5, "value": "dg=="}
    bad = client("GET", "/admin/messages/m-1?values=maybe", TOKEN)
    assert bad.status == 400 and bad.json()["parameter"] == "values"
    assert client("GET", "/admin/messages/m-1?topic=x", TOKEN).status == 400


def test_lookup_without_id_is_400(client: Client) -> None:
    reply = client("GET", "/admin/messages/", TOKEN)
    assert (reply.status, reply.json()["parameter"]) == (400, "id")


def test_cancel(client: Client, control: FakeControl) -> None:
    reply = client("DELETE", "/admin/messages/m-1?target_topic=orders", TOKEN)
    assert (reply.status, reply.json()) == (200, {"id": "m-1", "cancelled": True})
    client("DELETE", "/admin/messages/other", TOKEN)
    assert control.cancels == [("m-1", "orders"), ("other", None)]


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("?target_topic=", "target_topic"),
        ("?topic=x", "topic"),
        ("?target_topic=a&target_topic=b", "target_topic"),
    ],
)
def test_cancel_bad_parameters(
    client: Client, control: FakeControl, query: str, parameter: str
) -> None:
    reply = client("DELETE", "/admin/messages/m-1" + query, TOKEN)
    assert (reply.status, reply.json()["parameter"]) == (400, parameter)
    assert control.cancels == []


def test_messages_wrong_method(client: Client) -> None:
    reply = client("POST", "/admin/messages/m-1", TOKEN)
    assert (reply.status, reply.headers["allow"]) == (405, "GET, DELETE")


def test_pause_resume_paused(client: Client, control: FakeControl) -> None:
    assert client("GET", "/admin/paused", TOKEN).json() == {"paused": []}
    reply = client("POST", "/admin/pause?direction=dequeue", TOKEN)
    assert reply.json() == {"paused": ["dequeue"]}
    client("POST", "/admin/pause?direction=ENQUEUE", TOKEN)
    assert control.paused_now == {Direction.ENQUEUE, Direction.DEQUEUE}
    assert client("GET", "/admin/paused", TOKEN).json() == {"paused": ["dequeue", "enqueue"]}
    reply = client("POST", "/admin/resume?direction=dequeue", TOKEN)
    assert reply.json() == {"paused": ["enqueue"]}


@pytest.mark.parametrize("query", ["", "?direction=sideways", "?direction=", "?dir=enqueue"])
def test_pause_bad_direction_names_the_parameter(client: Client, query: str) -> None:
    reply = client("POST", "/admin/pause" + query, TOKEN)
    assert reply.status == 400
    assert reply.json()["parameter"] in ("direction", "dir")


def test_pause_needs_post(client: Client) -> None:
    reply = client("GET", "/admin/pause?direction=enqueue", TOKEN)
    assert (reply.status, reply.headers["allow"]) == (405, "POST")


# --- failures inside the service ---
def test_control_timeout_is_503(client: Client, control: FakeControl) -> None:
    control.fail_with = ControlTimeout("owner thread did not answer within 2000 ms")
    reply = client("GET", "/admin/stats", TOKEN)
    assert (reply.status, reply.json()["error"]) == (
        503,
        "owner thread did not answer within 2000 ms",
    )


def test_a_bug_in_the_service_is_500_and_the_server_survives(
    client: Client, control: FakeControl, caplog: pytest.LogCaptureFixture
) -> None:
    control.fail_with = ZeroDivisionError("boom")
    reply = client("GET", "/admin/stats", TOKEN)
    assert (reply.status, reply.json()) == (500, {"error": "internal error"})
    assert "ZeroDivisionError" in caplog.text
    control.fail_with = None
    assert client("GET", "/admin/stats", TOKEN).status == 200


def test_stop_closes_the_port(control: FakeControl, metrics: Metrics) -> None:
    server = HttpServer(HttpSettings(host="127.0.0.1", port=0), control, metrics)
    server.start()
    port = server.port
    assert Client(port)("GET", "/healthz").status == 200
    server.stop()
    with pytest.raises(ConnectionRefusedError):
        Client(port)("GET", "/healthz")


def test_port_in_use_is_a_config_error(
    client: Client, control: FakeControl, metrics: Metrics
) -> None:
    taken = HttpServer(HttpSettings(host="127.0.0.1", port=client.port), control, metrics)
    with pytest.raises(ConfigError, match=f"http.port={client.port}"):
        taken.start()


def test_head_answers_like_get_without_a_body(client: Client, control: FakeControl) -> None:
    reply = client("HEAD", "/healthz")
    assert (reply.status, reply.body) == (200, b"")
    assert int(reply.headers["content-length"]) > 0
    control.is_healthy = False
    assert client("HEAD", "/healthz").status == 503

"""The console's Flask app with fake replicas: the gate, the pages, the changes.

The replicas are a fake transport (:class:`FakeGroup`) behind the real
:class:`~delaybridge.console.replicas.Replicas`, so the admin calls the console makes
are checked as requests (method, path, query, token), and the Kafka parts are stand-ins
that record what they were asked. The browser test runs the same app against real
sidecars (tests/integration/console/).
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from flask.testing import FlaskClient

from delaybridge.connectors import KafkaSettings, RecordRef
from delaybridge.console.app import create_app
from delaybridge.console.audit import Audit
from delaybridge.console.auth import COOKIE, LoginThrottle, SessionStore
from delaybridge.console.context import ConsoleContext
from delaybridge.console.dead_letters import Cursor, Page, decode
from delaybridge.console.metrics_history import MetricsHistory
from delaybridge.console.replicas import Replicas
from delaybridge.console.reschedule import Replacement
from delaybridge.console.settings import ConsoleSettings

TOKEN = "unit-admin-token"
HOST = "http://console.test"
MESSAGE = {
    "id": "order-1",
    "due_ms": 4_000_000_000_000,
    "target_topic": "orders",
    "target_partition": -1,
    "origin": "delay/0/7",
    "key": "k",
    "value_bytes": 6,
    "headers": {"tenant": "t1"},
}


@dataclass
class FakeGroup:
    """Two replicas; ``r1`` holds ``order-1``. Records every request it gets."""

    requests: list[tuple[str, str, str, dict[str, list[str]]]] = field(default_factory=list)
    held: dict[str, dict[str, Any]] = field(default_factory=lambda: {"order-1": dict(MESSAGE)})
    paused: dict[str, set[str]] = field(default_factory=lambda: {"r1": set(), "r2": set()})

    def __call__(
        self, url: str, method: str, headers: Mapping[str, str], timeout_s: float
    ) -> tuple[int, bytes]:
        parts = urlsplit(url)
        replica = parts.hostname or ""
        query = parse_qs(parts.query)
        self.requests.append((replica, method, parts.path, query))
        if parts.path == "/metrics":
            return 200, b"delaybridge_delivered_total 0\n"
        if headers.get("Authorization") != f"Bearer {TOKEN}":
            return 401, b'{"error": "token"}'
        doc = self.answer(replica, method, parts.path, query)
        if doc is None:
            return 404, b'{"error": "no such message"}'
        return 200, json.dumps(doc).encode()

    def answer(
        self, replica: str, method: str, path: str, query: dict[str, list[str]]
    ) -> dict[str, Any] | None:
        if path == "/admin/stats":
            part = {"topic": "delay", "partition": int(replica[1]) - 1, "role": "active"}
            return {"group": "g", "paused": sorted(self.paused[replica]), "partitions": [part]}
        if path == "/admin/pending":
            n = len(self.held) if replica == "r1" else 0
            return {
                "pending": n,
                "by_topic": {"orders": n} if n else {},
                "histogram": {"by_minute": [n] + [0] * 59, "by_hour": [0]},
            }
        if path == "/admin/messages" and method == "DELETE":  # cancel by prefix
            return self.cancel_prefix(replica, query)
        if path == "/admin/messages":
            mine = list(self.held.values()) if replica == "r1" else []
            prefix = query.get("id_prefix", [""])[0]
            listed = [m | {"position": [0, m["due_ms"], "delay-0", 0]} for m in mine]
            return {"messages": [m for m in listed if m["id"].startswith(prefix)], "cursor": None}
        if path.startswith("/admin/messages/"):
            message_id = unquote(path.rsplit("/", 1)[1])
            found = self.held.get(message_id) if replica == "r1" else None
            if found is None:
                return None
            if method == "DELETE":
                del self.held[message_id]
                return {"id": message_id, "matched_here": True, "published": "queued"}
            if query.get("values") == ["true"]:
                return found | {"value": base64.b64encode(b"secret").decode()}
            return found
        if path in ("/admin/pause", "/admin/resume"):
            direction = query["direction"][0]
            if path == "/admin/pause":
                self.paused[replica].add(direction)
            else:
                self.paused[replica].discard(direction)
            return {"paused": sorted(self.paused[replica])}
        raise AssertionError(f"unexpected {method} {path}")

    def cancel_prefix(self, replica: str, query: dict[str, list[str]]) -> dict[str, Any]:
        """r1 holds the messages; the answer a replica's admin API gives (no cap here)."""
        prefix = query["id_prefix"][0]
        mine = [i for i in self.held if i.startswith(prefix)] if replica == "r1" else []
        if query.get("dry_run") != ["true"]:
            for i in mine:
                del self.held[i]
        return {"id_prefix": prefix, "count": len(mine)}


@dataclass
class FakeDeadLetters:
    topic: str = "dlt"
    asked: list[tuple[str | None, Cursor | None]] = field(default_factory=list)

    def page(
        self,
        reason: str | None = None,
        cursor: Cursor | None = None,
        limit: int = 50,
        scan: int = 2000,
    ) -> Page:
        self.asked.append((reason, cursor))
        letter = decode(
            0, 3, 1_000, b"k", b"private value", [("trace", b"t-1"), ("delay-error", b"bad-time")]
        )
        return Page([letter], {"bad-time": 1}, 1, 1, None, 1)


@dataclass
class FakeProducer:
    sent: list[Replacement] = field(default_factory=list)

    def send(self, record: Replacement) -> RecordRef:
        self.sent.append(record)
        return RecordRef(record.delay_topic, 1, 99)


@dataclass
class Harness:
    client: FlaskClient
    group: FakeGroup
    producer: FakeProducer
    dead_letters: FakeDeadLetters
    audit: Audit


def harness(**settings: Any) -> Harness:
    group = FakeGroup()
    producer = FakeProducer()
    dead = FakeDeadLetters()
    sessions = SessionStore(idle_s=600, max_s=3600)
    audit = Audit(lambda: len(sessions))
    context = ConsoleContext(
        settings=ConsoleSettings(
            urls=("http://r1:8080", "http://r2:8080"),
            service=None,
            token=TOKEN,
            kafka=KafkaSettings(),
            dead_letter_topic="dlt",
            **settings,
        ),
        replicas=Replicas(["http://r1:8080", "http://r2:8080"], None, TOKEN, transport=group),
        history=MetricsHistory(600),
        dead_letters=dead,
        rescheduler=producer,
        sessions=sessions,
        throttle=LoginThrottle(free=2),
        audit=audit,
    )
    app = create_app(context)
    return Harness(app.test_client(), group, producer, dead, audit)


def log_in(h: Harness, who: str = "alice") -> str:
    reply = h.client.post(
        "/login", base_url=HOST, data={"token": TOKEN, "who": who}, headers={"Origin": HOST}
    )
    assert reply.status_code == 302, reply.get_data(as_text=True)
    page = h.client.get("/", base_url=HOST).get_data(as_text=True)
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, "no CSRF token on the overview"
    return found.group(1)


def post(h: Harness, path: str, **data: str) -> Any:
    return h.client.post(path, base_url=HOST, data=data, headers={"Origin": HOST})


def test_pages_need_a_session_and_the_login_sets_a_hardened_cookie() -> None:
    h = harness()
    reply = h.client.get("/messages?topic=x", base_url=HOST)
    assert reply.status_code == 302
    assert reply.headers["Location"] == "/login?next=/messages?topic%3Dx"
    assert h.client.get("/healthz").status_code == 200
    assert h.client.get("/static/console.css").status_code == 200
    wrong = post(h, "/login", token="nope")
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    good = post(h, "/login", token=TOKEN, who="alice", next="/messages")
    assert good.status_code == 302 and good.headers["Location"] == "/messages"
    cookie = good.headers["Set-Cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    for flag in ("HttpOnly", "SameSite=Strict", "Secure", "Path=/"):
        assert flag in cookie
    assert TOKEN not in cookie and "Max-Age" not in cookie and "Expires" not in cookie


def test_next_never_leaves_the_console() -> None:
    h = harness()
    for hostile in ("//evil.example/x", "https://evil.example/", "\\\\evil", "javascript:x"):
        reply = post(h, "/login", token=TOKEN, next=hostile)
        assert reply.headers["Location"] == "/", hostile


def test_failed_logins_are_throttled_and_audited(caplog: pytest.LogCaptureFixture) -> None:
    h = harness()
    caplog.set_level(logging.INFO, logger="delaybridge.console.audit")
    for _ in range(2):
        assert post(h, "/login", token="nope", who="eve").status_code == 401
    assert post(h, "/login", token=TOKEN, who="eve").status_code == 429, "even the right token"
    lines = [json.loads(r.getMessage()) for r in caplog.records]
    assert [(x["who"], x["action"], x["outcome"]) for x in lines] == [
        ("eve", "login", "refused")
    ] * 3
    assert "throttled" in lines[-1]["detail"]


def test_security_headers_on_every_answer() -> None:
    h = harness()
    for path in ("/login", "/healthz"):
        headers = h.client.get(path, base_url=HOST).headers
        assert "script-src" not in headers["Content-Security-Policy"], "no script allowed at all"
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["Cache-Control"] == "no-store"
        assert headers["Referrer-Policy"] == "same-origin"


def test_overview_merges_both_replicas() -> None:
    h = harness()
    log_in(h)
    page = h.client.get("/", base_url=HOST).get_data(as_text=True)
    assert 'id="pending-total">1<' in page
    assert "http://r1:8080" in page and "http://r2:8080" in page
    asked = {(r, p) for r, _, p, _ in h.group.requests}
    assert {("r1", "/admin/stats"), ("r2", "/admin/stats"), ("r2", "/admin/pending")} <= asked


def test_browse_by_prefix_and_a_bad_time_is_a_400() -> None:
    h = harness()
    log_in(h)
    page = h.client.get("/messages?id_prefix=order-", base_url=HOST).get_data(as_text=True)
    assert "order-1" in page
    listing = [q for _, _, p, q in h.group.requests if p == "/admin/messages"]
    assert listing[-1]["id_prefix"] == ["order-"] and "values" not in listing[-1]
    assert h.client.get("/messages?due_from=soon", base_url=HOST).status_code == 400


def test_values_are_not_fetched_or_shown_unless_previews_are_on() -> None:
    h = harness()
    log_in(h)
    page = h.client.get("/message?id=order-1", base_url=HOST).get_data(as_text=True)
    assert "previews are off" in page and "secret" not in page
    assert all("values" not in q for _, _, p, q in h.group.requests if p.endswith("/order-1"))
    dead = h.client.get("/dead-letters", base_url=HOST).get_data(as_text=True)
    assert "bad-time" in dead and "t-1" in dead and "private value" not in dead
    on = harness(value_preview=True)
    log_in(on)
    assert "secret" in on.client.get("/message?id=order-1", base_url=HOST).get_data(as_text=True)
    assert "private value" in on.client.get("/dead-letters", base_url=HOST).get_data(as_text=True)


def test_cancel_goes_to_the_owner_and_is_audited() -> None:
    h = harness()
    token = log_in(h)
    reply = post(h, "/message/cancel", id="order-1", csrf_token=token)
    assert reply.status_code == 302 and "notice=cancelled" in reply.headers["Location"]
    deletes = [(r, p, q) for r, m, p, q in h.group.requests if m == "DELETE"]
    assert deletes == [("r1", "/admin/messages/order-1", {"target_topic": ["orders"]})]
    metrics = h.client.get("/metrics").get_data(as_text=True)
    assert (
        'delaybridge_console_changes_total{action="cancel",outcome="ok",who="alice"} 1.0' in metrics
    )
    gone = post(h, "/message/cancel", id="order-1", csrf_token=token)
    assert gone.status_code == 404


def test_changes_without_the_token_or_from_elsewhere_are_refused() -> None:
    h = harness()
    token = log_in(h)
    assert post(h, "/message/cancel", id="order-1").status_code == 403
    assert post(h, "/message/cancel", id="order-1", csrf_token="forged").status_code == 403
    cross = h.client.post(
        "/message/cancel",
        base_url=HOST,
        data={"id": "order-1", "csrf_token": token},
        headers={"Origin": "http://evil.example"},
    )
    assert cross.status_code == 403
    assert not [m for _, m, _, _ in h.group.requests if m == "DELETE"]
    h.client.delete_cookie(COOKIE, domain="console.test")
    assert post(h, "/message/cancel", id="order-1", csrf_token=token).status_code == 401
    metrics = h.client.get("/metrics").get_data(as_text=True)
    assert 'action="cancel",outcome="refused",who="alice"} 2.0' in metrics


def test_read_only_refuses_every_change() -> None:
    h = harness(read_only=True)
    token = log_in(h)
    page = h.client.get("/message?id=order-1", base_url=HOST).get_data(as_text=True)
    assert 'id="cancel"' not in page and 'id="reschedule"' not in page
    for path, data in (
        ("/message/cancel", {"id": "order-1"}),
        ("/message/reschedule", {"id": "order-1", "when": "1m"}),
        ("/pause", {"action": "pause", "direction": "dequeue", "replica": "all"}),
    ):
        reply = post(h, path, csrf_token=token, **data)
        assert reply.status_code == 403 and "read-only" in reply.get_data(as_text=True)
    assert not [m for _, m, _, _ in h.group.requests if m in ("DELETE", "POST")]
    assert h.producer.sent == []
    assert post(h, "/logout", csrf_token=token).status_code == 302, "logging out is no change"


def test_reschedule_writes_a_replacing_record() -> None:
    h = harness()
    token = log_in(h)
    reply = post(h, "/message/reschedule", id="order-1", when="2026-11-22T08:00", csrf_token=token)
    assert reply.status_code == 302
    assert reply.headers["Location"] == "/message?id=order-1&notice=rescheduled&ref=delay%2F1%2F99"
    (record,) = h.producer.sent
    assert record.delay_topic == "delay" and record.value == b"secret"
    assert ("deliver-at-ms", "1795334400000") in record.headers
    assert ("delay-id", "order-1") in record.headers
    bad = post(h, "/message/reschedule", id="order-1", when="whenever", csrf_token=token)
    assert bad.status_code == 400 and len(h.producer.sent) == 1
    spoofed = h.client.get("/message?id=order-1&notice=rescheduled&ref=<b>x</b>", base_url=HOST)
    assert "Rescheduled" not in spoofed.get_data(as_text=True)


def test_pause_all_or_one_known_replica_only() -> None:
    h = harness()
    token = log_in(h)
    reply = post(h, "/pause", action="pause", direction="dequeue", replica="all", csrf_token=token)
    assert reply.status_code == 302
    assert h.group.paused == {"r1": {"dequeue"}, "r2": {"dequeue"}}
    one = post(
        h,
        "/pause",
        action="resume",
        direction="dequeue",
        replica="http://r2:8080",
        csrf_token=token,
    )
    assert one.status_code == 302 and h.group.paused == {"r1": {"dequeue"}, "r2": set()}
    elsewhere = post(
        h,
        "/pause",
        action="pause",
        direction="enqueue",
        replica="http://10.9.9.9:1",
        csrf_token=token,
    )
    assert elsewhere.status_code == 400
    assert {r for r, _, _, _ in h.group.requests} == {"r1", "r2"}, "no other host was called"
    page = h.client.get("/pause", base_url=HOST).get_data(as_text=True)
    assert page.count('data-state="paused"') == 1


def test_logout_ends_the_session() -> None:
    h = harness()
    token = log_in(h)
    assert post(h, "/logout", csrf_token=token).status_code == 302
    assert h.client.get("/", base_url=HOST).status_code == 302


def test_cancel_by_prefix_counts_first_then_cancels_what_was_confirmed() -> None:
    h = harness()
    h.group.held |= {"order-2": MESSAGE | {"id": "order-2"}, "other": MESSAGE | {"id": "other"}}
    token = log_in(h)
    listing = h.client.get("/messages?id_prefix=order-", base_url=HOST).get_data(as_text=True)
    assert 'id="cancel-prefix"' in listing
    ask = post(h, "/messages/cancel-prefix", id_prefix="order-", csrf_token=token)
    page = ask.get_data(as_text=True)
    assert ask.status_code == 200 and 'id="prefix-total">2<' in page
    assert set(h.group.held) == {"order-1", "order-2", "other"}  # a dry run: nothing gone
    done = post(h, "/messages/cancel-prefix", id_prefix="order-", confirm="2", csrf_token=token)
    assert done.status_code == 302 and "notice=prefix-cancelled" in done.headers["Location"]
    assert set(h.group.held) == {"other"}
    deletes = [q for _, m, p, q in h.group.requests if m == "DELETE" and p == "/admin/messages"]
    assert {"dry_run": ["true"], "id_prefix": ["order-"]} in deletes
    assert {"confirm": ["2"], "id_prefix": ["order-"]} in deletes
    metrics = h.client.get("/metrics").get_data(as_text=True)
    assert 'action="cancel-prefix",outcome="ok",who="alice"} 1.0' in metrics


def test_cancel_by_prefix_refuses_an_empty_prefix_a_forged_form_and_read_only() -> None:
    h = harness()
    token = log_in(h)
    assert post(h, "/messages/cancel-prefix", id_prefix=" ", csrf_token=token).status_code == 400
    assert post(h, "/messages/cancel-prefix", id_prefix="order-").status_code == 403  # no CSRF
    ro = harness(read_only=True)
    ro_token = log_in(ro)
    reply = post(ro, "/messages/cancel-prefix", id_prefix="order-", csrf_token=ro_token)
    assert reply.status_code == 403
    for group in (h.group, ro.group):
        assert not [p for _, m, p, _ in group.requests if m == "DELETE"]
    assert "order-1" in h.group.held and "order-1" in ro.group.held

"""The web console in a real browser, against a real broker and two real sidecars.

Two sidecars share a group over a two-partition delay topic, each with its own HTTP
server and data directory; ``delaybridge console`` runs as its own process with both
replicas' URLs; Debian's chromium, driven by Playwright, logs in and works the pages as
an operator would. What is checked (issue 27 item 1):

- the login: a wrong token is refused; the right one gives a session cookie that is
  HttpOnly, SameSite=Strict and Secure, and the token is in no cookie, URL or page;
- the overview counts what the replicas hold; rates and lateness appear;
- a pending message is found by id prefix, cancelled, and is gone (from the page and
  from both replicas); another is rescheduled and arrives at its new time;
- a change without the CSRF token, or from another origin, is refused;
- the dead-letter page shows each dead letter's reason and its original headers;
- pause and resume reach both replicas;
- a family of messages is cancelled by id prefix after its count is confirmed;
- a read-only console shows no change and refuses a forged one;
- every change is an audit line and a metric of the console.

Each page is screenshotted; ``DELAYBRIDGE_CONSOLE_SCREENSHOTS=<dir>`` keeps them
(``scripts/console-screenshots`` writes docs/console/*.png so).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Browser, Page, expect

from delaybridge.bridge.http.server import HttpServer
from tests.http_client import Client
from tests.integration.console.browser import chromium
from tests.integration.console.console_process import ConsoleProcess
from tests.integration.sidecar.harness import (
    InProcessSidecar,
    Topics,
    Watcher,
    now_ms,
    produce,
    settings_for,
)
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TOKEN = "console-test-admin-token-5f1c"
ORDERS = 120
INVOICES = 40
SOON = 6
TICKS = 20
#: Dead letters the test sends: reason -> how many.
BAD = {"bad-time": 2, "missing-target": 1, "delay-too-long": 1}
EXPECT_TIMEOUT_MS = 20_000


@dataclass
class Group:
    topics: Topics
    sidecars: list[InProcessSidecar]
    clients: list[Client]
    urls: list[str]
    config: Path
    work: Path
    sent_at_ms: int
    servers: list[HttpServer] = field(default_factory=list)

    def pending_total(self) -> int:
        total = 0
        for client in self.clients:
            reply = client("GET", "/admin/pending", TOKEN)
            assert reply.status == 200, reply
            total += int(reply.json()["pending"])
        return total

    def paused(self) -> list[list[str]]:
        return [sorted(c("GET", "/admin/paused", TOKEN).json()["paused"]) for c in self.clients]

    def holds(self, id: str) -> bool:
        return any(lookup_with_token(c, id) is not None for c in self.clients)


def lookup_with_token(client: Client, id: str) -> dict[str, Any] | None:
    reply = client("GET", f"/admin/messages/{id}", TOKEN)
    if reply.status == 404:
        return None
    assert reply.status == 200, reply
    found: dict[str, Any] = reply.json()
    return found


def order(n: int) -> str:
    return f"order-{n:04d}"


@pytest.fixture(scope="module")
def group(kafka: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    work = tmp_path_factory.mktemp("console")
    topics = Topics(
        delay=kafka.create_topic("console-delay", partitions=2),
        targets=[kafka.create_topic("orders", partitions=2), kafka.create_topic("invoices")],
        dead_letter=kafka.create_topic("console-dlt"),
        cancels=kafka.create_topic("console-cancels"),
    )
    sidecars: list[InProcessSidecar] = []
    servers: list[HttpServer] = []
    try:
        for name in ("r1", "r2"):
            settings = settings_for(
                kafka.bootstrap_servers,
                topics,
                work / name,
                f"g-{topics.delay}",
                kafka={"instance_id": name, "session_timeout_ms": 10_000},
                http={"port": 0, "admin_token": TOKEN},
            )
            side = InProcessSidecar.start(settings)
            sidecars.append(side)
            server = HttpServer(settings.http, side.service.control, side.service.metrics)
            server.start()
            servers.append(server)
        clients = [Client(s.port) for s in servers]

        def shared() -> bool:
            owned = [
                [p for p in c("GET", "/admin/stats", TOKEN).json()["partitions"]] for c in clients
            ]
            return all(len(o) == 1 for o in owned)

        wait_until(shared, 90, "each sidecar to own one of the two partitions")
        config = work / "console.yaml"
        config.write_text(yaml.safe_dump(settings.model_dump(mode="json")))
        sent_at = now_ms()
        _send(kafka.bootstrap_servers, topics, sent_at)
        expected = ORDERS + INVOICES
        g = Group(topics, sidecars, clients, [s.url for s in servers], config, work, sent_at)
        g.servers = servers
        wait_until(lambda: g.pending_total() == expected, 60, f"{expected} messages pending")
        yield g
    finally:
        for server in servers:
            server.stop()
        for side in sidecars:
            side.stop()


def _send(bootstrap: str, topics: Topics, t0: int) -> None:
    rng = random.Random(27)
    orders, invoices = topics.targets
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, str | bytes | None]]]] = []
    for n in range(ORDERS):
        due = t0 + rng.randrange(90_000, 3_600_000)
        value = json.dumps({"order": n, "close": "unpaid"}).encode()
        headers: list[tuple[str, str | bytes | None]] = [
            ("delay-target-topic", orders),
            ("deliver-at-ms", str(due)),
            ("delay-id", order(n)),
            ("tenant", f"shop-{n % 3}"),
        ]
        records.append((f"customer-{n % 17}".encode(), value, headers))
    for n in range(INVOICES):
        due = t0 + rng.randrange(3_600_000, 20 * 3_600_000)
        headers = [("delay-target-topic", invoices), ("delay-ms", str(due - t0))]
        headers.append(("delay-id", f"invoice-{n:03d}"))
        records.append((b"billing", b"send reminder", headers))
    for n in range(SOON):
        headers = [("delay-target-topic", orders), ("delay-ms", str(1_000 + 300 * n))]
        records.append((b"soon", b"soon", [*headers, ("delay-id", f"soon-{n}")]))
    bad: list[list[tuple[str, str | bytes | None]]] = [
        [("delay-target-topic", orders), ("deliver-at", "tomorrow morning"), ("trace", "t-1")],
        [("delay-target-topic", orders), ("deliver-at", "2026-13-45T99:00:00Z"), ("trace", "t-2")],
        [("delay-ms", "60000"), ("trace", "t-3")],
        [("delay-target-topic", orders), ("delay-ms", str(400 * 86_400_000)), ("trace", "t-4")],
    ]
    records.extend((b"bad", b"bad value", headers) for headers in bad)
    produce(bootstrap, topics.delay, records)


@pytest.fixture(scope="module")
def console(group: Group) -> Iterator[ConsoleProcess]:
    args = ["--config", str(group.config), "--sample-interval-s", "1"]
    for url in group.urls:
        args += ["--url", url]
    process = ConsoleProcess(group.work, "console", args, TOKEN)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go: $DELAYBRIDGE_CONSOLE_SCREENSHOTS, or a temporary dir."""
    chosen = os.environ.get("DELAYBRIDGE_CONSOLE_SCREENSHOTS")
    where = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    where.mkdir(parents=True, exist_ok=True)
    return where


def screenshot(page: Page, shots: Path, name: str) -> None:
    path = shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"


def log_in(browser: Browser, console: ConsoleProcess, who: str) -> Page:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(EXPECT_TIMEOUT_MS)
    page = context.new_page()
    page.goto(console.url + "/")
    expect(page).to_have_url(f"{console.url}/login?next=/")
    page.fill("input[name=token]", TOKEN)
    page.fill("input[name=who]", who)
    page.click("button[type=submit]")
    expect(page).to_have_url(console.url + "/")
    return page


def csrf_token(page: Page) -> str:
    value = page.locator("header form input[name=csrf_token]").get_attribute("value")
    assert value, "no CSRF token on the page"
    return value


def test_login_gives_a_hardened_session_cookie(
    browser: Browser, console: ConsoleProcess, shots: Path
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(console.url + "/messages")
    expect(page).to_have_url(f"{console.url}/login?next=/messages")
    screenshot(page, shots, "login")
    page.fill("input[name=token]", "not-the-token")
    with page.expect_response(lambda r: r.url.endswith("/login")) as wrong:
        page.click("button[type=submit]")
    assert wrong.value.status == 401
    expect(page.locator(".error")).to_contain_text("not the admin token")
    assert context.cookies() == []
    page.fill("input[name=token]", TOKEN)
    page.fill("input[name=who]", "alice")
    page.click("button[type=submit]")
    expect(page).to_have_url(console.url + "/messages")
    (cookie,) = context.cookies()
    assert cookie["name"] == "delaybridge_console"
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["secure"] is True
    assert TOKEN not in cookie["value"] and TOKEN not in page.url
    assert TOKEN not in page.content()
    # Logging out ends the session on the server, not only in this browser.
    stolen = cookie["value"]
    page.click("header button:has-text('Log out')")
    expect(page).to_have_url(console.url + "/login")
    replay = browser.new_context()
    replay.add_cookies([{"name": cookie["name"], "value": stolen, "url": console.url}])
    other = replay.new_page()
    other.goto(console.url + "/")
    expect(other).to_have_url(f"{console.url}/login?next=/")
    replay.close()
    context.close()


def test_overview_counts_what_the_replicas_hold(
    kafka: Any, browser: Browser, console: ConsoleProcess, group: Group, shots: Path
) -> None:
    page = log_in(browser, console, "alice")
    expect(page.locator("#pending-total")).to_have_text(str(ORDERS + INVOICES))
    # Deliveries while the console samples the replicas' /metrics (every second here):
    # messages due within a few seconds, so the rates and lateness have something to show.
    orders = group.topics.targets[0]
    ticks: list[tuple[bytes | None, bytes | None, list[tuple[str, str | bytes | None]]]] = [
        (b"tick", b"tick", [("delay-target-topic", orders), ("delay-ms", str(200 * n))])
        for n in range(1, TICKS + 1)
    ]
    produce(kafka.bootstrap_servers, group.topics.delay, ticks)
    for topic in group.topics.targets:
        expect(page.locator("table", has_text="target topic")).to_contain_text(topic)
    for url in group.urls:
        expect(page.locator("main")).to_contain_text(url)
    expect(page.locator("main")).to_contain_text(f"{group.topics.delay}-0")
    expect(page.locator("main")).to_contain_text(f"{group.topics.delay}-1")

    # The lateness histogram counts a message when it is produced, the delivered counter
    # when the broker acknowledges it: one scrape between the two shows lateness with no
    # delivery yet, so the page is awaited until it shows both.
    def rates_shown() -> bool:
        page.reload()
        if page.locator("#lateness-p99").count() != 1:
            return False
        return float(page.locator("#delivered-rate").inner_text()) > 0

    wait_until(rates_shown, 30, "the delivery rate and lateness on the overview")
    assert page.locator("#lateness-p99").inner_text().endswith(" ms")
    started = time.monotonic()
    page.reload()
    load_s = time.monotonic() - started
    assert load_s < 5, f"the overview took {load_s:.2f} s to load"
    assert page.locator("svg.chart").count() >= 3
    screenshot(page, shots, "overview")
    page.context.close()


def test_find_by_prefix_cancel_and_see_it_gone(
    browser: Browser, console: ConsoleProcess, group: Group, shots: Path
) -> None:
    page = log_in(browser, console, "alice")
    page.click("nav >> text=Pending messages")
    page.fill("input[name=id_prefix]", "order-004")
    page.click("form.filters button")
    rows = page.locator("#messages a.id")
    expect(rows).to_have_count(10)
    assert sorted(rows.all_inner_texts()) == [order(n) for n in range(40, 50)]
    screenshot(page, shots, "messages")
    target = order(42)
    page.click(f"#messages a.id:text-is('{target}')")
    expect(page.locator("#message-id")).to_have_text(target)
    expect(page.locator("#headers")).to_contain_text("tenant")
    expect(page.locator("main")).to_contain_text("previews are off")
    screenshot(page, shots, "message")
    assert group.holds(target)
    page.click("#cancel")
    expect(page.locator(".notice")).to_contain_text(f"Cancelled '{target}'")
    expect(page.locator("#no-messages")).to_be_visible()
    assert not group.holds(target), "still pending on a replica after the cancel"
    page.fill("input[name=id_prefix]", "order-004")
    page.click("form.filters button")
    expect(rows).to_have_count(9)
    assert target not in rows.all_inner_texts()
    page.context.close()


def test_a_change_without_the_csrf_token_is_refused(
    browser: Browser, console: ConsoleProcess, group: Group
) -> None:
    page = log_in(browser, console, "mallory")
    target = order(43)
    page.goto(f"{console.url}/message?id={target}")
    # A form without its hidden token, submitted by the browser with the session cookie.
    page.locator("form[action='/message/cancel'] input[name=csrf_token]").evaluate(
        "input => input.remove()"
    )
    with page.expect_response(lambda r: r.url.endswith("/message/cancel")) as refused:
        page.click("#cancel")
    assert refused.value.status == 403
    expect(page.locator(".error")).to_contain_text("CSRF token")
    # With the token but from another site's page: the origin check refuses it.
    forged = page.request.post(
        console.url + "/message/cancel",
        form={"id": target, "csrf_token": csrf_token(page)},
        headers={"Origin": "http://evil.example"},
    )
    assert forged.status == 403
    assert group.holds(target), "a refused cancel cancelled the message"
    page.context.close()


def test_reschedule_moves_the_message_to_its_new_time(
    kafka: Any, browser: Browser, console: ConsoleProcess, group: Group
) -> None:
    watcher = Watcher(kafka.bootstrap_servers, [group.topics.targets[0]])
    try:
        page = log_in(browser, console, "alice")
        target = order(44)
        page.goto(f"{console.url}/message?id={target}")
        page.fill("#when", "3s")
        asked_ms = now_ms()
        page.click("#reschedule")
        expect(page.locator(".notice")).to_contain_text("Rescheduled")
        watcher.until(lambda a: target in {x.id for x in a}, 60, f"{target} delivered")
        (arrival,) = [a for a in watcher.arrivals if a.id == target]
        assert asked_ms + 3_000 <= arrival.due_ms <= now_ms(), "not at the new time"
        assert arrival.value == json.dumps({"order": 44, "close": "unpaid"}).encode()
        assert arrival.headers["tenant"] == "shop-2"
        assert arrival.key == b"customer-10"
        watcher.settle(2.0)
        assert [a.id for a in watcher.arrivals].count(target) == 1, "delivered twice"
        page.context.close()
    finally:
        watcher.close()


def test_dead_letters_by_reason_with_original_headers(
    browser: Browser, console: ConsoleProcess, shots: Path
) -> None:
    page = log_in(browser, console, "alice")
    page.click("nav >> text=Dead letters")
    letters = page.locator("#dead-letters tr.letter")
    expect(letters).to_have_count(sum(BAD.values()))
    for reason in BAD:
        expect(page.locator("#dead-letters")).to_contain_text(reason)
    page.locator("#dead-letters details").first.click()
    screenshot(page, shots, "dead-letters")
    page.select_option("#reason", "bad-time")
    page.click("form.filters button")
    expect(letters).to_have_count(BAD["bad-time"])
    assert set(letters.locator(".badge.reason").all_inner_texts()) == {"bad-time"}
    details = page.locator("#dead-letters tr.headers").all_text_contents()
    assert any("deliver-at" in d and "tomorrow morning" in d for d in details), details
    assert any("trace" in d and "t-1" in d for d in details), details
    page.context.close()


def test_pause_and_resume_reach_every_replica(
    browser: Browser, console: ConsoleProcess, group: Group, shots: Path
) -> None:
    page = log_in(browser, console, "alice")
    page.click("nav >> text=Pause / resume")
    page.click("#pause-dequeue-all")
    expect(page.locator("#replicas [data-state=paused]")).to_have_count(len(group.urls))
    assert group.paused() == [["dequeue"]] * len(group.urls)
    screenshot(page, shots, "pause")
    page.click("#resume-dequeue-all")
    expect(page.locator("#replicas [data-state=paused]")).to_have_count(0)
    assert group.paused() == [[]] * len(group.urls)
    page.context.close()


def test_read_only_console_refuses_changes(
    browser: Browser, group: Group, console: ConsoleProcess
) -> None:
    args = ["--config", str(group.config), "--read-only"]
    for url in group.urls:
        args += ["--url", url]
    read_only = ConsoleProcess(group.work, "console-ro", args, TOKEN)
    try:
        page = log_in(browser, read_only, "bob")
        expect(page.locator(".badge.ro")).to_have_text("read-only")
        target = order(45)
        page.goto(f"{read_only.url}/message?id={target}")
        expect(page.locator("#message-id")).to_have_text(target)
        assert page.locator("#cancel").count() == 0 and page.locator("#reschedule").count() == 0
        token = csrf_token(page)
        for path, form in (
            ("/message/cancel", {"id": target}),
            ("/message/reschedule", {"id": target, "when": "1s"}),
            ("/pause", {"action": "pause", "direction": "dequeue", "replica": "all"}),
        ):
            reply = page.request.post(read_only.url + path, form={**form, "csrf_token": token})
            assert reply.status == 403, (path, reply.status)
            assert "read-only" in reply.text()
        assert group.holds(target)
        assert group.paused() == [[]] * len(group.urls)
        page.context.close()
    finally:
        read_only.stop()
    audit = [json.loads(line.split(": ", 1)[1]) for line in _audit_lines(read_only)]
    assert {(a["who"], a["action"], a["outcome"]) for a in audit} >= {
        ("bob", "login", "ok"),
        ("bob", "cancel", "refused"),
        ("bob", "reschedule", "refused"),
        ("bob", "pause", "refused"),
    }


def test_cancel_a_family_by_prefix_after_confirming_its_count(
    browser: Browser, console: ConsoleProcess, group: Group
) -> None:
    """Issue 27: the listing of an id prefix offers a bulk cancel; it counts on every
    replica first (nothing cancelled), then cancels what was confirmed, and only that."""
    family = [order(n) for n in range(70, 80)]
    page = log_in(browser, console, "alice")
    page.click("nav >> text=Pending messages")
    page.fill("input[name=id_prefix]", "order-007")
    page.click("form.filters button")
    expect(page.locator("#messages a.id")).to_have_count(10)
    page.click("#cancel-prefix")
    expect(page.locator("#prefix-total")).to_have_text("10")
    assert all(group.holds(id) for id in family), "the count cancelled something"
    page.click("#confirm-cancel-prefix")
    expect(page.locator(".notice")).to_contain_text("'order-007'")
    expect(page.locator("#no-messages")).to_be_visible()
    assert not [id for id in family if group.holds(id)], "still pending after the bulk cancel"
    assert group.holds(order(69)) and group.holds(order(80))
    page.context.close()


def test_every_change_is_audited_and_counted(console: ConsoleProcess) -> None:
    audit = [json.loads(line.split(": ", 1)[1]) for line in _audit_lines(console)]
    seen = {(a["who"], a["action"], a["target"], a["outcome"]) for a in audit}
    assert ("alice", "cancel", order(42), "ok") in seen
    assert ("alice", "reschedule", order(44), "ok") in seen
    assert ("mallory", "cancel", order(43), "refused") in seen
    assert ("alice", "pause", "dequeue on all", "ok") in seen
    assert all(a["when"].endswith("+00:00") and a["remote"] == "127.0.0.1" for a in audit)
    client = Client(int(console.url.rsplit(":", 1)[1]))
    text = client("GET", "/metrics").body.decode()
    assert 'delaybridge_console_changes_total{action="cancel",outcome="ok",who="alice"} 1.0' in text
    assert (
        'delaybridge_console_changes_total{action="cancel",outcome="refused",who="mallory"} 1.0'
        in text
    )
    assert 'delaybridge_console_logins_total{outcome="refused"} 1.0' in text


def _audit_lines(console: ConsoleProcess) -> list[str]:
    return [line for line in console.text().splitlines() if "delaybridge.console.audit" in line]

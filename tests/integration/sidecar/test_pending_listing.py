"""``delaybridge pending list|stats`` over three replicas on the real broker.

Issue 14's acceptance for the listing: three ``delaybridge run`` processes in one group
over six partitions, each with its own data directory; messages due soon (delivered
before the listing), due within the wheel's window, and due beyond it (rolled: the
window is 10 minutes here). The CLI, given the three replicas' URLs, lists exactly the
messages sent and not yet due -- each once, in position order -- and its stats count
them per target topic.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.sidecar.harness import (
    SubprocessSidecar,
    Topics,
    Watcher,
    iter_chunks,
    native,
    now_ms,
    produce,
    settings_for,
)
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
PARTITIONS = 6
SOON, WINDOW, ROLLED = 60, 150, 150
_URL = re.compile(r"delaybridge: HTTP on (http://\S+)")


def test_cli_lists_exactly_what_is_pending_on_three_replicas(kafka: Any, tmp_path: Path) -> None:
    topics = Topics(
        delay=kafka.create_topic("delayls", partitions=PARTITIONS),
        targets=[kafka.create_topic("ordersls"), kafka.create_topic("remindls")],
        dead_letter=kafka.create_topic("dltls"),
        cancels=kafka.create_topic("cancelsls"),
    )
    every = {f"{topics.delay}-{p}" for p in range(PARTITIONS)}
    replicas = []
    for name in ("r1", "r2", "r3"):
        settings = settings_for(
            kafka.bootstrap_servers,
            topics,
            tmp_path / name,
            f"g-{topics.delay}",
            kafka={"instance_id": name},
            store={"wheel_slots": 6_000},  # a 10-minute window
        )
        replicas.append(SubprocessSidecar(settings, tmp_path, name))
    watcher = Watcher(kafka.bootstrap_servers, topics.targets)
    try:
        for r in replicas:
            r.start()
        wait_until(
            lambda: (
                all(r.owned() for r in replicas)
                and set().union(*(r.owned() for r in replicas)) == every
                and sum(len(r.owned()) for r in replicas) == PARTITIONS
            ),
            120,
            "three replicas share the six partitions",
            detail=lambda: "\n".join(r.tail(5) for r in replicas),
        )
        urls = [_url(r) for r in replicas]
        t0 = now_ms()
        sent = _send(kafka.bootstrap_servers, topics, t0)
        soon = {i for i, due in sent.items() if due < t0 + 60_000}
        watcher.until(lambda a: {x.id for x in a} >= soon, 90, "the soon ones delivered")
        expected = {i: due for i, due in sent.items() if i not in soon}
        base = [sys.executable, "-m", "delaybridge", "pending"]
        for_urls = [arg for u in urls for arg in ("--url", u)]

        def stats() -> dict[str, Any]:
            doc: dict[str, Any] = json.loads(_cli(*base, "stats", *for_urls, "--json"))
            return doc

        wait_until(lambda: stats()["pending"] == len(expected), 60, "every message stored")
        pages = [
            json.loads(line)
            for line in _cli(
                *base, "list", *for_urls, "--all", "--json", "--limit", "37"
            ).splitlines()
        ]
        listed = [m for page in pages for m in page["messages"]]
        ids = [m["id"] for m in listed]
        assert len(ids) == len(set(ids)), "a message listed twice"
        assert set(ids) == set(expected)
        assert {m["id"]: m["due_ms"] for m in listed} == expected
        positions = [tuple(m["position"]) for m in listed]
        assert positions == sorted(positions)
        assert {m["id"] for m in listed if m["rolled"]} == {
            i for i, due in expected.items() if due > t0 + 10 * 60_000
        }
        assert len({m["origin"].split("/")[1] for m in listed}) == PARTITIONS
        total = stats()
        assert total["by_topic"] == {
            t: sum(1 for i in expected if i.startswith(t)) for t in topics.targets
        }
        one_topic = _cli(*base, "list", *for_urls, "--all", "--topic", topics.targets[1])
        assert sorted(re.findall(r"(remindls-\S+-\d+)  ->", one_topic)) == sorted(
            i for i in expected if i.startswith(topics.targets[1])
        )
    finally:
        watcher.close()
        for r in replicas:
            if r.proc is not None and r.proc.poll() is None:
                r.terminate(timeout_s=30)


def _send(bootstrap: str, topics: Topics, t0: int) -> dict[str, int]:
    """SOON due in 3 s, WINDOW due in 4-8 min, ROLLED due in 15-60 min; id -> due."""
    sent: dict[str, int] = {}
    records = []
    for n in range(SOON + WINDOW + ROLLED):
        target = topics.targets[n % 2]
        if n < SOON:
            due = t0 + 3_000 + n
        elif n < SOON + WINDOW:
            due = t0 + 240_000 + n * 1_000
        else:
            due = t0 + 900_000 + n * 9_973
        id = f"{target}-{t0}-{n}"
        sent[id] = due
        records.append((f"k{n}".encode(), b"v", native(target, id, ("deliver-at-ms", str(due)))))
    for chunk in iter_chunks(len(records), 100):
        produce(bootstrap, topics.delay, [records[i] for i in chunk])
    return sent


def _url(replica: SubprocessSidecar) -> str:
    found: list[str] = []

    def logged() -> bool:
        found[:] = _URL.findall(replica.log.read_text(errors="replace"))
        return bool(found)

    wait_until(logged, 30, "the replica's HTTP address in its log", detail=replica.tail)
    return found[-1]


def _cli(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout

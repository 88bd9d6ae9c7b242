"""``DELETE /admin/messages?id_prefix=`` (issue 27): a bulk cancel with a count, 409 above
``cancels.prefix_confirm_above`` until confirmed, 400 for an empty prefix; and the
sidecar's side of it: counted in its stores, applied at once, published to the cancel
topic, the messages never delivered."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from delaybridge.bridge.admin.control import ConfirmRequired
from tests.http_client import Client
from tests.unit.bridge.http.test_http import CONFIRM_ABOVE, TOKEN, FakeControl, serve
from tests.unit.bridge.sidecar_kit import FakeSidecar, schedule


@pytest.fixture
def control() -> FakeControl:
    messages: dict[str, dict[str, object]] = {f"o-{n}": {} for n in range(CONFIRM_ABOVE + 1)}
    return FakeControl(messages=messages | {"x": {}})


@pytest.fixture
def client(control: FakeControl) -> Iterator[Client]:
    from delaybridge.bridge.observe.metrics import Metrics

    yield from serve(control, Metrics(process=False), TOKEN)


def test_the_count_is_returned(client: Client, control: FakeControl) -> None:
    reply = client("DELETE", "/admin/messages?id_prefix=x&target_topic=orders", TOKEN)
    assert (reply.status, reply.json()["count"]) == (200, 1)
    assert control.prefix_cancels == [("x", "orders")]


def test_a_dry_run_counts_and_cancels_nothing(client: Client, control: FakeControl) -> None:
    reply = client("DELETE", "/admin/messages?id_prefix=o-&dry_run=true", TOKEN)
    assert (reply.status, reply.json()["count"]) == (200, CONFIRM_ABOVE + 1)  # never 409
    assert control.prefix_cancels == []


def test_above_the_cap_it_asks_for_confirmation(client: Client, control: FakeControl) -> None:
    reply = client("DELETE", "/admin/messages?id_prefix=o-", TOKEN)
    assert reply.status == 409
    doc = reply.json()
    assert (doc["count"], doc["confirm_above"]) == (CONFIRM_ABOVE + 1, CONFIRM_ABOVE)
    assert f"confirm={CONFIRM_ABOVE + 1}" in doc["error"]
    assert control.prefix_cancels == []
    short = client("DELETE", f"/admin/messages?id_prefix=o-&confirm={CONFIRM_ABOVE}", TOKEN)
    assert short.status == 409  # a confirmation of fewer than match is none
    reply = client("DELETE", f"/admin/messages?id_prefix=o-&confirm={CONFIRM_ABOVE + 1}", TOKEN)
    assert (reply.status, reply.json()["count"]) == (200, CONFIRM_ABOVE + 1)
    assert control.prefix_cancels == [("o-", None)]


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("", "id_prefix"),
        ("?id_prefix=", "id_prefix"),
        ("?id_prefix=%20", "id_prefix"),
        ("?id_prefix=o-&target_topic=", "target_topic"),
        ("?id_prefix=o-&confirm=all", "confirm"),
        ("?id_prefix=o-&id=x", "id"),
        ("?id_prefix=o-&dry_run=yes", "dry_run"),
    ],
)
def test_bad_parameters_are_400_naming_them(
    client: Client, control: FakeControl, query: str, parameter: str
) -> None:
    reply = client("DELETE", "/admin/messages" + query, TOKEN)
    assert (reply.status, reply.json()["parameter"]) == (400, parameter)
    assert control.prefix_cancels == []


def test_the_sidecar_counts_applies_and_publishes(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path, cancels={"prefix_confirm_above": 2})
    for n in range(3):
        side.send(schedule(f"acme/{n}", 2_000), partition=n % 2)
    side.send(schedule("other/1", 2_000))
    side.turns(3)
    control = side.service.control
    assert control.cancel_prefix("acme/", None, None, dry_run=True)["count"] == 3
    with pytest.raises(ConfirmRequired) as refused:
        control.cancel_prefix("acme/", None, None)
    assert refused.value.count == 3
    assert control.cancel_prefix("acme/1", None, None)["count"] == 1  # under the cap
    side.turns(1)  # its sweep
    result = control.cancel_prefix("acme/", "orders", 3)
    assert (result["count"], result["published"]) == (2, "queued")  # acme/1 is gone already
    side.turns(3)
    side.turns(3, advance_ms=3_000)
    assert [h["delay-id"] for h in side.delivered()] == ["other/1"]
    assert sorted(m.key() for m in side.cancels()) == [b"acme/", b"acme/1"]
    side.stop()


def test_from_the_http_thread_the_count_runs_a_step_per_loop_turn(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path, cancels={"prefix_sweep_entries": 3})
    for n in range(30):
        side.send(schedule(f"t/{n}", 60_000), partition=n % 2)
    side.turns(3)
    answers: list[dict[str, object]] = []
    http = threading.Thread(
        target=lambda: answers.append(side.service.control.cancel_prefix("t/", None, 30))
    )
    http.start()
    turns = 0
    while http.is_alive() and turns < 200:
        side.turns(1)
        turns += 1
    http.join(5)
    assert answers and answers[0]["count"] == 30
    assert turns >= 30 // 3  # paced: at most 3 entries a turn
    side.turns(40)
    assert sum(p.store.stats().pending for p in side.service.partitions) == 0
    side.stop()

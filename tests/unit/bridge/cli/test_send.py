"""``delaybridge send`` and ``cancel`` on the in-memory fake: the options become the
client's typed arguments, and a refused one is named by its option."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from delaybridge import cli
from tests.fakes.clients import FakeProducer
from tests.fakes.cluster import FakeCluster

BASE = ["--bootstrap", "broker:9092", "--topic", "d"]


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    cluster = FakeCluster()
    cluster.create_topic("d")
    monkeypatch.delenv("DELAYBRIDGE_CONFIG", raising=False)

    def producer(conf: dict[str, Any], logger: Any = None) -> FakeProducer:
        return FakeProducer(cluster, dict(conf))

    monkeypatch.setattr("delaybridge.connectors.clients.Producer", producer)
    return cluster


def test_send_a_daily_cron_in_a_time_zone_with_a_count(cluster: FakeCluster) -> None:
    argv = ["send", *BASE, "--to", "reminders", "--cron", "0 8 * * *", "--tz", "Europe/Paris"]

    assert cli.main([*argv, "--count", "3", "--id", "r-1", "wake up"]) == 0

    (msg,) = cluster.records("d")
    assert msg.value() == b"wake up"
    assert msg.headers() == [
        ("delay-target-topic", b"reminders"),
        ("delay-cron", b"0 8 * * *"),
        ("delay-timezone", b"Europe/Paris"),
        ("delay-count", b"3"),
        ("delay-id", b"r-1"),
    ]


def test_send_every_from_a_first_time_until_an_end(cluster: FakeCluster) -> None:
    first = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    last = first + timedelta(days=1)
    argv = ["send", *BASE, "--to", "o", "--every", "1h30m", "--at", first.isoformat()]

    assert cli.main([*argv, "--until", last.isoformat(), "--id", "p", "v"]) == 0

    (msg,) = cluster.records("d")
    assert msg.headers() == [
        ("delay-target-topic", b"o"),
        ("deliver-at-ms", b"%d" % (first.timestamp() * 1000)),
        ("delay-every", b"5400000"),
        ("delay-until", b"%d" % (last.timestamp() * 1000)),
        ("delay-id", b"p"),
    ]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--to", "o", "v"], "--delay/--at/--cron/--every: give one"),
        (["--to", "o", "--delay", "5x", "v"], "--delay: expected a duration"),
        (["--to", "o", "--every", "fast", "v"], "--every: expected an interval"),
        (["--to", "o", "--at", "tomorrow", "v"], "--at: expected an RFC 3339 timestamp"),
        (["--to", "o", "--delay", "1s", "--tz", "UTC", "v"], "--tz: applies to cron only"),
        (["--to", "o", "--cron", "99 * * * *", "v"], "--cron: the sidecar would dead-letter"),
        (["--to", "o", "--delay", "1s", "--count", "2", "v"], "--count: ends a series"),
        (["--to", "a b", "--delay", "1s", "v"], "--to: 'a b' is not a legal"),
        (["--to", "o", "--delay", "1s", "--on-duplicate", "keep", "v"], "--on-duplicate: needs"),
        (["--to", "o", "--delay", "1s", "--header", "delay-ms=5", "v"], "--header: header"),
        (["--to", "o", "--delay", "1s", "--header", "nope", "v"], "--header 'nope': expected"),
    ],
)
def test_send_names_the_option_at_fault(
    cluster: FakeCluster, capsys: pytest.CaptureFixture[str], options: list[str], says: str
) -> None:
    assert cli.main(["send", *BASE, *options]) == 2

    assert says in capsys.readouterr().err
    assert cluster.records("d") == []


def test_cancel_goes_through_the_client(cluster: FakeCluster) -> None:
    assert cli.main(["cancel", *BASE, "--to", "orders", "o-9"]) == 0

    (msg,) = cluster.records("d")
    assert (msg.key(), msg.value()) == (b"o-9", b"")
    assert msg.headers() == [("delay-cancel", b"o-9"), ("delay-target-topic", b"orders")]


def test_cancel_by_prefix_goes_through_the_client(cluster: FakeCluster) -> None:
    assert cli.main(["cancel", *BASE, "--to", "orders", "--prefix", "tenant-7/"]) == 0

    (msg,) = cluster.records("d")
    assert msg.key() == b"tenant-7/"
    assert msg.headers() == [
        ("delay-cancel-prefix", b"tenant-7/"),
        ("delay-target-topic", b"orders"),
    ]


def test_cancel_by_a_blank_prefix_is_refused_naming_the_option(
    cluster: FakeCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["cancel", *BASE, "--prefix", " "]) == 2
    assert "--prefix" in capsys.readouterr().err
    assert cluster.records("d") == []


@pytest.mark.parametrize("options", [["--prefix", "a", "a-1"], []])
def test_cancel_takes_an_id_or_a_prefix_not_both(cluster: FakeCluster, options: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["cancel", *BASE, *options])
    assert exited.value.code == 2
    assert cluster.records("d") == []

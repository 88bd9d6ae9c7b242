"""A replica's static member id by default, and the members a smaller pod retires."""

from __future__ import annotations

from pathlib import Path

import orjson

from delaybridge.bridge.commit.transactions import ID_FILE
from delaybridge.bridge.workers import membership
from delaybridge.settings import Settings, load
from tests.fakes import FakeClients, FakeCluster


def _settings(data_dir: Path, **kafka: object) -> Settings:
    return load(None, store={"data_dir": str(data_dir)}, delay_topics=["delay"], kafka=kafka)


def test_an_empty_instance_id_becomes_a_static_id_kept_in_the_data_directory(
    tmp_path: Path,
) -> None:
    first = membership.identify(_settings(tmp_path))
    assert first.kafka.instance_id.startswith("delaybridge-")
    assert (tmp_path / membership.MEMBER_ID_FILE).read_text() == first.kafka.instance_id
    again = membership.identify(_settings(tmp_path))  # a restart of the same replica
    assert again.kafka.instance_id == first.kafka.instance_id
    other = membership.identify(_settings(tmp_path / "other"))  # another replica's volume
    assert other.kafka.instance_id != first.kafka.instance_id


def test_an_explicit_id_and_dynamic_membership_are_left_as_they_are(tmp_path: Path) -> None:
    assert membership.identify(_settings(tmp_path, instance_id="pod-3")).kafka.instance_id == (
        "pod-3"
    )
    dynamic = membership.identify(_settings(tmp_path, static_membership=False))
    assert dynamic.kafka.instance_id == ""
    assert not (tmp_path / membership.MEMBER_ID_FILE).exists()


def test_the_transactional_id_keeps_its_origin_across_the_upgrade(tmp_path: Path) -> None:
    # Before: exactly-once with no instance id kept a random id in transactional-id.
    (tmp_path / ID_FILE).write_text("delaybridge-0b1c2d")
    eos = load(
        None,
        store={"data_dir": str(tmp_path)},
        delay_topics=["delay"],
        delivery={"exactly_once": True},
    )
    settled = membership.identify(eos)
    assert settled.delivery.transactional_id == "delaybridge-0b1c2d"
    assert settled.kafka.instance_id  # and now a static member as well


def test_members_a_smaller_pod_no_longer_has_are_retired(tmp_path: Path) -> None:
    settings = membership.identify(_settings(tmp_path))
    me = settings.kafka.instance_id
    cluster = FakeCluster()
    cluster.create_topic("delay", 3)
    clients = FakeClients(cluster)
    assert membership.retire_stale(settings, 3, clients) == []  # first start: nothing to retire
    assert orjson.loads((tmp_path / membership.MEMBERS_FILE).read_bytes()) == [
        me,
        f"{me}-w1",
        f"{me}-w2",
    ]
    retired = membership.retire_stale(settings, 1, clients)  # restarted with one worker
    assert retired == [f"{me}-w1", f"{me}-w2"]
    joined = [c.config["group.instance.id"] for c in clients.consumers]
    assert joined == retired
    assert all(
        c.config["session.timeout.ms"] == membership.RETIRE_SESSION_MS for c in clients.consumers
    )
    assert all(c.closed for c in clients.consumers)
    assert orjson.loads((tmp_path / membership.MEMBERS_FILE).read_bytes()) == [me]
    assert membership.retire_stale(settings, 1, clients) == []

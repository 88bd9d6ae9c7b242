"""KafkaClients: one settings object, four kinds of client configuration."""

from __future__ import annotations

from typing import Any

import pytest

import delaybridge.connectors as connectors
import delaybridge.connectors.clients as clients_module
from delaybridge.connectors import KafkaClientError, KafkaClients, KafkaSettings, redact
from delaybridge.connectors.edge import ClientFactory

SECURITY = {"security.protocol": "SSL", "ssl.ca.location": "/etc/ca.pem"}


def clients(**kafka: object) -> KafkaClients:
    return KafkaClients(KafkaSettings(bootstrap_servers="b:9092", client=SECURITY, **kafka))  # type: ignore[arg-type]


def test_every_kind_gets_brokers_and_client_settings() -> None:
    c = clients()
    for conf in (c.producer_config(), c.consumer_config(), c.reader_config(), c.admin_config()):
        assert conf["bootstrap.servers"] == "b:9092"
        assert {k: conf[k] for k in SECURITY} == SECURITY


def test_producer_is_idempotent_with_the_java_partitioner() -> None:
    conf = clients(request_timeout_ms=7_000).producer_config()
    assert conf["enable.idempotence"] is True and conf["acks"] == "all"
    assert conf["partitioner"] == "murmur2_random"
    assert conf["request.timeout.ms"] == 7_000


def test_group_consumer_commits_only_by_hand_and_reads_committed() -> None:
    conf = clients(group_id="g", instance_id="pod-1", session_timeout_ms=9_000).consumer_config()
    assert conf["group.id"] == "g" and conf["group.instance.id"] == "pod-1"
    assert conf["enable.auto.commit"] is False and conf["enable.auto.offset.store"] is False
    assert conf["isolation.level"] == "read_committed"
    assert conf["partition.assignment.strategy"] == "cooperative-sticky"
    assert conf["session.timeout.ms"] == 9_000
    assert "group.instance.id" not in clients(group_id="g").consumer_config()


def test_readers_never_join_the_sidecars_group() -> None:
    c = clients(group_id="g", instance_id="pod-1")
    one, two = c.reader_config(), c.reader_config()
    assert one["group.id"] != two["group.id"] and one["group.id"].startswith("g.reader-")
    assert "group.instance.id" not in one and "partition.assignment.strategy" not in one
    assert one["enable.auto.commit"] is False


def test_overrides_win_over_settings_and_defaults() -> None:
    c = clients()
    assert c.producer_config({"acks": "1", "security.protocol": "SASL_SSL"})["acks"] == "1"
    assert c.consumer_config({"group.id": "other"})["group.id"] == "other"
    assert c.admin_config({"security.protocol": "PLAINTEXT"})["security.protocol"] == ("PLAINTEXT")


def test_a_refused_configuration_names_the_client_and_keeps_the_code() -> None:
    bad = KafkaClients(KafkaSettings(bootstrap_servers="", client={"no.such.key": "1"}))
    with pytest.raises(KafkaClientError, match=r"Kafka producer.*no\.such\.key") as info:
        bad.producer()
    assert info.value.code == "_INVALID_ARG"
    assert info.value.error is not None and info.value.error.name() == "_INVALID_ARG"


def test_clients_are_the_sidecars_client_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[dict[str, Any]] = []
    monkeypatch.setattr(clients_module, "Consumer", lambda conf, logger: built.append(conf))
    factory: ClientFactory = clients(group_id="g", instance_id="pod-1")  # mypy checks the shape

    factory.consumer({"fetch.wait.max.ms": 50})
    factory.consumer({"group.id": "g.cancel-feed"}, group=False)

    member, reader = built
    assert member["group.instance.id"] == "pod-1" and member["fetch.wait.max.ms"] == 50
    assert "group.instance.id" not in reader and reader["group.id"] == "g.cancel-feed"


def test_secrets_are_redacted() -> None:
    settings = KafkaSettings(client={"sasl.password": "s3cret", "sasl.username": "u"})
    assert settings.redacted_client() == {"sasl.password": "***", "sasl.username": "u"}
    assert redact({"ssl.key.pem": "PEM", "x": 1}) == {"ssl.key.pem": "***", "x": 1}
    assert "s3cret" not in repr(KafkaClients(settings))


def test_the_package_names_its_public_api() -> None:
    for name in connectors.__all__:
        assert getattr(connectors, name) is not None, name
    with pytest.raises(AttributeError):
        _ = connectors.no_such_name

"""server.properties and log4j2.properties rendering, and reading them back."""

from __future__ import annotations

from pathlib import Path

import pytest

from delaybridge.connectors.localkafka.config import (
    BrokerLayout,
    render_log4j2_properties,
    render_server_properties,
)
from delaybridge.connectors.localkafka.errors import LocalKafkaError
from delaybridge.connectors.localkafka.storage import read_bootstrap, read_properties


def rendered(tmp_path: Path, layout: BrokerLayout) -> dict[str, str]:
    path = tmp_path / "server.properties"
    path.write_text(render_server_properties(layout))
    return read_properties(path)


def test_single_node_kraft_combined_mode(tmp_path: Path) -> None:
    layout = BrokerLayout(tmp_path / "data", port=19092, controller_port=19093)
    props = rendered(tmp_path, layout)

    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "1"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert props["controller.listener.names"] == "CONTROLLER"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert props["log.dirs"] == str(tmp_path / "data" / "kraft")
    assert props["group.initial.rebalance.delay.ms"] == "0"
    # A single broker cannot host internal topics with the default factor 3.
    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "default.replication.factor",
    ):
        assert props[key] == "1", key
    assert "controller.quorum.bootstrap.servers" not in props, "static quorum, see config.py"


def test_bootstrap_reads_back_from_the_written_file(tmp_path: Path) -> None:
    layout = BrokerLayout(tmp_path, host="127.0.0.1", port=29092, controller_port=29093)
    layout.server_properties.write_text(render_server_properties(layout))
    assert read_bootstrap(layout.server_properties) == layout.bootstrap == "127.0.0.1:29092"


def test_backslashes_in_paths_survive_java_properties_escaping(tmp_path: Path) -> None:
    layout = BrokerLayout(tmp_path / "odd\\dir")
    props = rendered(tmp_path, layout)
    assert props["log.dirs"] == str(tmp_path / "odd\\dir" / "kraft")
    assert "odd\\\\dir" in render_server_properties(layout)


def test_log4j2_writes_to_the_data_dir(tmp_path: Path) -> None:
    layout = BrokerLayout(tmp_path)
    text = render_log4j2_properties(layout)
    assert f"appender.file.fileName = {tmp_path / 'logs' / 'server.log'}" in text
    assert "rootLogger.appenderRef.file.ref = file" in text


def test_missing_or_incomplete_server_properties_are_named(tmp_path: Path) -> None:
    with pytest.raises(LocalKafkaError, match=r"server\.properties: missing"):
        read_bootstrap(tmp_path / "server.properties")
    (tmp_path / "server.properties").write_text("listeners=CONTROLLER://h:1\n")
    with pytest.raises(LocalKafkaError, match=r"no PLAINTEXT advertised\.listeners"):
        read_bootstrap(tmp_path / "server.properties")

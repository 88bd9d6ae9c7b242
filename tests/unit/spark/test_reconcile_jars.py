"""The connector lock and the offset snapshot's JSON for Spark (no network, no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pyspark
import pytest

from delaybridge.errors import ConfigError
from delaybridge.jars import read_lock
from delaybridge.spark.connector import SPARK_VERSION, connector_jars, lock_file
from delaybridge.spark.snapshot import PartitionRange, TopicRanges, spark_offsets


def test_the_lock_pins_the_connector_of_the_installed_pyspark() -> None:
    artifacts = read_lock(lock_file())
    coordinates = [a.coordinate for a in artifacts]
    assert f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_VERSION}" in coordinates
    assert pyspark.__version__ == SPARK_VERSION


def test_the_lock_adds_no_jar_pyspark_already_ships() -> None:
    shipped = {p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    shipped_artifacts = {name.rsplit("-", 1)[0] for name in shipped}
    for artifact in read_lock(lock_file()):
        assert artifact.filename not in shipped
        assert artifact.artifact not in shipped_artifacts, f"{artifact.coordinate} duplicates"


def test_offline_names_the_missing_jar(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--offline: .*spark-sql-kafka-0-10_2\.13-4\.2\.0\.jar"):
        connector_jars(tmp_path, offline=True)


def test_offline_rejects_a_damaged_jar(tmp_path: Path) -> None:
    for artifact in read_lock(lock_file()):
        (tmp_path / artifact.filename).write_bytes(b"not a jar")
    with pytest.raises(ConfigError, match="has sha256"):
        connector_jars(tmp_path, offline=True)


def test_spark_offsets_cover_existing_topics_only() -> None:
    ranges = [
        TopicRanges("d", (PartitionRange(0, 5, 9), PartitionRange(1, 0, 0))),
        TopicRanges("gone", (), exists=False),
    ]
    starting, ending = spark_offsets(ranges)
    assert json.loads(starting) == {"d": {"0": 5, "1": 0}}
    assert json.loads(ending) == {"d": {"0": 9, "1": 0}}
    assert ranges[0].records == 4

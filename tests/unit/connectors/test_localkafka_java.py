"""Finding Java 17+: version parsing and the install hint when it is missing or old."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from delaybridge.connectors.localkafka.errors import JavaNotFoundError
from delaybridge.connectors.localkafka.java import find_java, parse_major


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "25-ea" 2025-09-16', 25),
    ],
)
def test_parse_major(output: str, major: int) -> None:
    assert parse_major(output) == major


def test_unparseable_version_is_an_error() -> None:
    with pytest.raises(JavaNotFoundError, match="cannot read a version"):
        parse_major("Segmentation fault")


def fake_java(tmp_path: Path, version: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2020-01-01' >&2\n")
    java.chmod(0o755)
    return home


def test_old_java_is_refused_with_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, "11.0.2")))
    with pytest.raises(JavaNotFoundError) as caught:
        find_java()
    assert "is Java 11" in str(caught.value)
    assert "apt-get install openjdk-17-jre-headless" in str(caught.value)


def test_java_home_is_preferred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = fake_java(tmp_path, "21.0.1")
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert find_java() == home / "bin" / "java"


def test_no_java_at_all_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no java anywhere
    with pytest.raises(JavaNotFoundError, match=r"no `java` on PATH.*apt-get install openjdk-17"):
        find_java()
    assert os.environ["PATH"] == str(tmp_path)

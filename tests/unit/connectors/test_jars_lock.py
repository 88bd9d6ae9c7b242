"""The jar lock format: parsing, errors that name file and line, the packaged Kafka lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from delaybridge.connectors.localkafka import KAFKA_VERSION, lock_file
from delaybridge.errors import ConfigError
from delaybridge.jars import MAVEN_CENTRAL, Artifact, read_lock

SHA_A = "a" * 64
SHA_B = "0123456789abcdef" * 4


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "test.lock"
    path.write_text(text)
    return path


def test_parses_lines_in_order_with_comments_and_classifier(tmp_path: Path) -> None:
    lock = write(
        tmp_path,
        f"""# header comment

org.apache.kafka:kafka-clients:4.3.1 {SHA_A}   # trailing comment
com.example:native:1.0:linux-x86_64 {SHA_B}
""",
    )
    assert read_lock(lock) == [
        Artifact("org.apache.kafka", "kafka-clients", "4.3.1", SHA_A),
        Artifact("com.example", "native", "1.0", SHA_B, "linux-x86_64"),
    ]


def test_filename_url_and_coordinate() -> None:
    plain = Artifact("org.apache.kafka", "kafka_2.13", "4.3.1", SHA_A)
    assert plain.filename == "kafka_2.13-4.3.1.jar"
    assert plain.coordinate == "org.apache.kafka:kafka_2.13:4.3.1"
    assert plain.url() == (
        f"{MAVEN_CENTRAL}/org/apache/kafka/kafka_2.13/4.3.1/kafka_2.13-4.3.1.jar"
    )
    native = Artifact("com.example", "native", "1.0", SHA_A, "linux")
    assert native.filename == "native-1.0-linux.jar"
    assert native.coordinate == "com.example:native:1.0:linux"
    assert (
        native.url("http://mirror/repo/")
        == "http://mirror/repo/com/example/native/1.0/native-1.0-linux.jar"
    )


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        (f"org.example:only-two {SHA_A}", "is not group:artifact:version"),
        (f"org.example:a:1:c:extra {SHA_A}", "is not group:artifact:version"),
        (f"org.example::1 {SHA_A}", "is not group:artifact:version"),
        ("org.example:a:1", "expected 'group:artifact:version[:classifier] sha256'"),
        (f"org.example:a:1 {SHA_A} extra", "expected 'group:artifact:version[:classifier] sha256'"),
        ("org.example:a:1 abc123", "is not a lower-case hex sha256"),
        (f"org.example:a:1 {SHA_A.upper()}", "is not a lower-case hex sha256"),
    ],
)
def test_bad_line_names_file_and_line(tmp_path: Path, line: str, complaint: str) -> None:
    lock = write(tmp_path, f"# ok\norg.example:good:1 {SHA_A}\n{line}\n")
    with pytest.raises(ConfigError) as caught:
        read_lock(lock)
    assert f"{lock}:3:" in str(caught.value)
    assert complaint in str(caught.value)


def test_duplicate_file_name_is_refused(tmp_path: Path) -> None:
    lock = write(tmp_path, f"a.one:lib:1 {SHA_A}\nb.two:lib:1 {SHA_B}\n")
    with pytest.raises(ConfigError, match=r":2: lib-1.jar already pinned on line 1"):
        read_lock(lock)


def test_empty_and_missing_locks_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pins no artifacts"):
        read_lock(write(tmp_path, "# nothing\n\n"))
    with pytest.raises(ConfigError, match="cannot read jar lock"):
        read_lock(tmp_path / "absent.lock")


def test_packaged_kafka_lock_has_broker_and_a_logging_backend() -> None:
    artifacts = {a.artifact: a for a in read_lock(lock_file())}
    assert artifacts["kafka_2.13"].version == KAFKA_VERSION
    assert artifacts["kafka-clients"].version == KAFKA_VERSION
    # Kafka 4.x logs through slf4j into log4j2: API, core and the binding for
    # the slf4j major in the closure must all be present, at one log4j version.
    slf4j = artifacts["slf4j-api"].version
    binding = "log4j-slf4j-impl" if slf4j.startswith("1.") else "log4j-slf4j2-impl"
    log4j = {artifacts[name].version for name in ("log4j-api", "log4j-core", binding)}
    assert len(log4j) == 1, f"log4j artifacts at different versions: {log4j}"
    assert read_lock(lock_file())[0].artifact == "kafka_2.13"

"""Find a Java 17+ runtime: the only system requirement of the local broker."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from delaybridge.connectors.localkafka.errors import JavaNotFoundError

MIN_JAVA_MAJOR = 17
"""Kafka 4.x brokers need Java 17 or newer."""

INSTALL_HINT = (
    "install a Java 17+ runtime, e.g. `apt-get install openjdk-17-jre-headless` "
    "(Debian/Ubuntu) or `dnf install java-17-openjdk-headless` (Fedora), "
    "or set JAVA_HOME to one"
)

# `java -version` prints e.g. 'openjdk version "17.0.15" 2025-04-15' or
# 'java version "1.8.0_392"' (pre-9 numbering) on stderr.
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def parse_major(version_output: str) -> int:
    """The major version in ``java -version`` output (``1.8`` counts as 8)."""
    match = _VERSION.search(version_output)
    if match is None:
        raise JavaNotFoundError(
            f"cannot read a version in `java -version` output {version_output[:200]!r}; "
            + INSTALL_HINT
        )
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def find_java() -> Path:
    """``$JAVA_HOME/bin/java`` if set, else ``java`` on PATH; checked to be 17+."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    if candidate is None or not candidate.is_file():
        found = shutil.which("java")
        if found is None:
            where = f"JAVA_HOME={java_home} has no bin/java and " if java_home else ""
            raise JavaNotFoundError(f"{where}no `java` on PATH; {INSTALL_HINT}")
        candidate = Path(found)
    try:
        result = subprocess.run(
            [str(candidate), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaNotFoundError(f"{candidate} -version failed: {exc}; {INSTALL_HINT}") from exc
    major = parse_major(result.stderr + result.stdout)
    if major < MIN_JAVA_MAJOR:
        raise JavaNotFoundError(
            f"{candidate} is Java {major}; Kafka 4.x needs Java {MIN_JAVA_MAJOR}+: {INSTALL_HINT}"
        )
    return candidate

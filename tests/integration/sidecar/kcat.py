"""kcat, the producer that is not Python: Debian's package, installed by scripts/install-kcat.

scripts/test exports ``KCAT``; without it the one on ``PATH`` is used. A test that needs
kcat fails when it is missing: it is part of the project's provisioning, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

Header = tuple[str | bytes, str | bytes]


def kcat() -> str:
    found = os.environ.get("KCAT") or shutil.which("kcat")
    if not found or not os.access(found, os.X_OK):
        pytest.fail("kcat not found: run scripts/install-kcat (scripts/test does)", pytrace=False)
    return found


def _bytes(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode()


def kcat_produce(
    bootstrap: str,
    topic: str,
    value: bytes,
    headers: list[Header] = [],  # noqa: B006 - never mutated
    *,
    key: bytes | None = None,
    partition: int | None = None,
) -> None:
    """Produce one record with ``kcat -P`` (``-H name=value`` per header) and wait until
    kcat exits; it exits non-zero when the broker did not acknowledge the record."""
    assert b"\n" not in value, "kcat -P reads one record per line"
    args: list[str | bytes] = [kcat(), "-P", "-b", bootstrap, "-t", topic, "-X", "acks=all"]
    if partition is not None:
        args += ["-p", str(partition)]
    if key is not None:
        args += ["-k", key]
    for name, text in headers:
        args += ["-H", _bytes(name) + b"=" + _bytes(text)]
    done = subprocess.run(args, input=value + b"\n", capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, f"kcat exited {done.returncode}: {done.stderr[-2000:]!r}"

"""The Spark JVM's stderr filter: Java's incubator-module notice goes to the debug log,
everything else (Spark's own warnings) passes through unchanged and in order."""

from __future__ import annotations

import io
import logging

import pytest

from delaybridge.spark.jvm import forward


def test_known_noise_is_logged_at_debug_and_the_rest_passes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stderr = io.BytesIO(
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"12:00:01 WARN TaskSetManager: Lost task 0.0\n"
        b"WARNING: Using incubator modules: jdk.incubator.foreign\n"
        b"caf\xc3\xa9 \xff\n"
    )
    out = io.StringIO()
    with caplog.at_level(logging.DEBUG, logger="delaybridge.spark.jvm"):
        forward(stderr, out)
    assert out.getvalue() == (
        "12:00:01 WARN TaskSetManager: Lost task 0.0\n"
        "WARNING: Using incubator modules: jdk.incubator.foreign\n"  # not the known one
        "café \ufffd\n"
    )
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert "jdk.incubator.vector" in caplog.records[0].getMessage()

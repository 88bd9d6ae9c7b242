"""``delaybridge send`` and ``cancel`` against a real broker, settings from a file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from delaybridge import cli

pytestmark = pytest.mark.kafka


def test_send_then_cancel_through_the_settings_file(
    kafka: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    delay = kafka.create_topic("cli-delay", partitions=2)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"kafka:\n  bootstrap_servers: {kafka.bootstrap_servers}\ndelay_topics: [{delay}]\n"
    )
    send = ["send", "--config", str(config), "--to", "orders", "--delay", "30s", "--id", "o-9"]

    assert cli.main([*send, "--key", "k", "--header", "trace=abc", "payload"]) == 0
    assert cli.main(["cancel", "--config", str(config), "--to", "orders", "o-9"]) == 0

    out = capsys.readouterr().out
    assert f"sent to {delay}/" in out and f"cancel for 'o-9' sent to {delay}/" in out
    sent, cancel = sorted(kafka.consume(delay, 2), key=lambda m: m.timestamp()[1])
    assert (sent.key(), sent.value()) == (b"k", b"payload")
    assert sent.headers() == [
        ("delay-target-topic", b"orders"),
        ("delay-ms", b"30000"),
        ("delay-id", b"o-9"),
        ("trace", b"abc"),
    ]
    assert (cancel.key(), cancel.value()) == (b"o-9", b"")
    assert cancel.headers() == [("delay-cancel", b"o-9"), ("delay-target-topic", b"orders")]


def test_bootstrap_and_topic_options_override_the_settings(
    kafka: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    delay = kafka.create_topic("cli-override")
    config = tmp_path / "config.yaml"
    config.write_text("kafka:\n  bootstrap_servers: 127.0.0.1:1\ndelay_topics: [nowhere]\n")
    monkeypatch.setenv("DELAYBRIDGE_CONFIG", str(config))
    argv = ["send", "--bootstrap", kafka.bootstrap_servers, "--topic", delay, "--to", "o"]

    at = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    assert cli.main([*argv, "--at", at.isoformat(), "v"]) == 0

    (msg,) = kafka.consume(delay, 1)
    # The client writes epoch ms (and refuses a time past the sidecar's max_delay_ms).
    assert ("deliver-at-ms", b"%d" % (at.timestamp() * 1000)) in msg.headers()

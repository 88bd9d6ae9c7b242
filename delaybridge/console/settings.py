"""What ``delaybridge console`` is told at start-up (its command line and the settings file)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from delaybridge.connectors import KafkaSettings


@dataclass(frozen=True)
class ConsoleSettings:
    """The console's settings; docs/console.md has the table with the flags."""

    #: Replicas' base URLs (``--url``), and/or the headless service (``--service NAME:PORT``).
    urls: tuple[str, ...]
    service: str | None
    #: The replicas' ``http.admin_token``: what a login must present, and what the
    #: console sends to the replicas.
    token: str
    #: The cluster (bootstrap servers, TLS/SASL) for the dead letters and reschedules.
    kafka: KafkaSettings
    dead_letter_topic: str
    host: str = "127.0.0.1"
    port: int = 8081
    #: No changes at all: no cancel, reschedule, pause or resume.
    read_only: bool = False
    #: Show the start of message values (they may hold personal data: off by default).
    value_preview: bool = False
    preview_bytes: int = 2048
    #: Mark the session cookie ``Secure`` (HTTPS only). Off only for plain HTTP.
    secure_cookie: bool = True
    #: Proxies in front of the console whose X-Forwarded-* headers are trusted.
    proxy_hops: int = 0
    session_idle_s: float = 1800.0
    session_max_s: float = 12 * 3600.0
    #: How often every replica's /metrics is sampled (rates, lateness), and how long kept.
    sample_interval_s: float = 10.0
    history_s: float = 1800.0
    #: Window of the rates and lateness on the overview.
    rate_window_s: float = 300.0

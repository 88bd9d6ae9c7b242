"""What every page of the console uses: the replicas, Kafka, sessions, audit and settings.

:class:`ConsoleContext` is built once by :func:`build` (``delaybridge console``) or by a
test with stand-ins for the parts that reach the network, and handed to the Flask app
(:func:`delaybridge.console.app.create_app`). The Kafka parts are built lazily by
their own classes, so a console whose dead-letter topic or brokers are down still
serves the replicas' pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from delaybridge.connectors import KafkaClients, RecordRef
from delaybridge.console.audit import Audit
from delaybridge.console.auth import LoginThrottle, SessionStore
from delaybridge.console.dead_letters import Cursor, DeadLetterReader, Page
from delaybridge.console.metrics_history import MetricsHistory, Sampler
from delaybridge.console.replicas import Replicas
from delaybridge.console.reschedule import Replacement, Rescheduler
from delaybridge.console.settings import ConsoleSettings


class DeadLetters(Protocol):
    topic: str

    def page(
        self,
        reason: str | None = None,
        cursor: Cursor | None = None,
        limit: int = 50,
        scan: int = ...,
    ) -> Page: ...


class Producer(Protocol):
    def send(self, record: Replacement) -> RecordRef: ...


@dataclass
class ConsoleContext:
    settings: ConsoleSettings
    replicas: Replicas
    history: MetricsHistory
    dead_letters: DeadLetters
    rescheduler: Producer
    sessions: SessionStore
    throttle: LoginThrottle
    audit: Audit


@dataclass
class Running:
    """A built context and the things to stop when the console stops."""

    context: ConsoleContext
    sampler: Sampler
    reader: DeadLetterReader
    rescheduler: Rescheduler

    def close(self) -> None:
        self.sampler.stop()
        self.reader.close()
        self.rescheduler.close()
        self.context.replicas.close()


def build(settings: ConsoleSettings) -> Running:
    """The console's parts for ``settings``; the metrics sampler is started."""
    replicas = Replicas(settings.urls, settings.service, settings.token)
    history = MetricsHistory(settings.history_s)
    sampler = Sampler(
        history,
        replicas.urls,
        lambda url: replicas.text(url, "/metrics"),
        settings.sample_interval_s,
    )
    clients = KafkaClients(settings.kafka)
    reader = DeadLetterReader(clients, settings.dead_letter_topic)
    rescheduler = Rescheduler(clients)
    sessions = SessionStore(settings.session_idle_s, settings.session_max_s)
    context = ConsoleContext(
        settings=settings,
        replicas=replicas,
        history=history,
        dead_letters=reader,
        rescheduler=rescheduler,
        sessions=sessions,
        throttle=LoginThrottle(),
        audit=Audit(lambda: len(sessions)),
    )
    sampler.start()
    return Running(context, sampler, reader, rescheduler)

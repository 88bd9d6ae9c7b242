"""Every client the sidecar builds reports to its one reachability tracker.

:class:`ReportingClients` wraps a :class:`~delaybridge.connectors.edge.ClientFactory`
(the real :class:`~delaybridge.connectors.clients.KafkaClients`, or the tests' fakes):
each producer, consumer, reader and admin client it builds gets the tracker's error
callback (``error_cb``) and log sink (``logger``), so the tracker hears every client,
and no client logs on its own. Clients that nobody else polls are registered with the
tracker, which serves them every turn (``tracker.py``: :meth:`KafkaReachability.serve`):

- the admin client (used now and then, never polled: its callbacks would wait);
- a reader while it holds no partitions (a restore or standby reader between
  restores). Its owner consumes it only while it has work; with no partitions
  assigned, a consume returns no records and only serves its callbacks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from delaybridge.connectors.edge import AdminEdge, ClientFactory, ConsumerEdge, ProducerEdge
from delaybridge.connectors.reachability.tracker import ClientLog, KafkaReachability

log = logging.getLogger(__name__)
#: The settings this wrapper sets on every client; a caller must not set them too.
OWNED_SETTINGS = ("error_cb", "logger")


class ReportingClients:
    """A :class:`ClientFactory` whose clients all report to ``tracker``."""

    def __init__(self, inner: ClientFactory, tracker: KafkaReachability) -> None:
        self.inner = inner
        self.tracker = tracker
        self._log = ClientLog(tracker)

    def producer(self, overrides: Mapping[str, Any] | None = None) -> ProducerEdge:
        return self.inner.producer(self._reporting(overrides))

    def consumer(
        self, overrides: Mapping[str, Any] | None = None, *, group: bool = True
    ) -> ConsumerEdge:
        consumer = self.inner.consumer(self._reporting(overrides), group=group)
        if not group:
            self.tracker.serve(lambda: self._serve_idle(consumer))
        return consumer

    def admin(self, overrides: Mapping[str, Any] | None = None) -> AdminEdge:
        admin = self.inner.admin(self._reporting(overrides))
        self.tracker.serve(lambda: admin.poll(0))
        return admin

    def _reporting(self, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
        given = dict(overrides or {})
        taken = [key for key in OWNED_SETTINGS if key in given]
        if taken:
            raise ValueError(f"{', '.join(taken)}: set by ReportingClients for its tracker")
        return {**given, "error_cb": self.tracker.client_error, "logger": self._log}

    def _serve_idle(self, reader: ConsumerEdge) -> None:
        """Serve a reader's callbacks if it holds no partitions (its owner consumes it
        otherwise). A consume then returns no records; an error event it may return is
        a client error like the others."""
        if reader.assignment():
            return
        for msg in reader.consume(1, timeout=0):
            err = msg.error()
            if err is not None:
                self.tracker.client_error(err)
            else:  # cannot happen with nothing assigned; never dropped silently
                log.warning(
                    "a reader with no partitions returned a record of %s/%s at offset %s; "
                    "dropped (its owner reads it again when it assigns that partition)",
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                )

"""Every client the sidecar builds reports to its one reachability tracker.

:class:`ReportingClients` wraps a :class:`~delaybridge.connectors.edge.ClientFactory`
(the real :class:`~delaybridge.connectors.clients.KafkaClients`, or the tests' fakes):
each producer, consumer, reader and admin client it builds gets the tracker's error
callback (``error_cb``) and log sink (``logger``), so the tracker hears every client,
and no client logs on its own. A caller may still give a client an ``error_cb`` of its
own: that one gets the client's *fatal* errors (the group consumer, fenced, is replaced
rather than the sidecar stopped), the tracker every other error. Clients that nobody
else polls are registered with the tracker, which serves them every turn
(``tracker.py``: :meth:`KafkaReachability.serve`):

- the admin client (used now and then, never polled: its callbacks would wait);
- a reader while it holds no partitions (a restore or standby reader between
  restores). Its owner consumes it only while it has work; with no partitions
  assigned, a consume returns no records and only serves its callbacks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError as RdKafkaError

from delaybridge.connectors.edge import AdminEdge, ClientFactory, ConsumerEdge, ProducerEdge
from delaybridge.connectors.errors import is_fatal
from delaybridge.connectors.reachability.tracker import ClientLog, KafkaReachability

log = logging.getLogger(__name__)
ErrorCallback = Callable[[RdKafkaError], None]


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
        if "logger" in given:
            raise ValueError("logger: set by ReportingClients for its tracker")
        own: ErrorCallback | None = given.pop("error_cb", None)
        error_cb = self.tracker.client_error if own is None else self._fatal_to(own)
        return {**given, "error_cb": error_cb, "logger": self._log}

    def _fatal_to(self, own: ErrorCallback) -> ErrorCallback:
        """An error callback that hands fatal errors to ``own``, the others to the tracker."""

        def error_cb(err: RdKafkaError) -> None:
            if is_fatal(err):
                own(err)
            else:
                self.tracker.client_error(err)

        return error_cb

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

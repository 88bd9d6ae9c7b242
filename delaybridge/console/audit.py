"""Every change made through the console, and every login: an audit line and a metric.

One JSON object per line on the logger ``delaybridge.console.audit`` (so a log pipeline
can route it apart from the rest): ``when`` (UTC, ISO 8601 with milliseconds), ``who``
(the name given at login, which the shared admin token cannot prove: the line also
names the ``session`` and the client ``remote`` address), ``action`` (``cancel``,
``reschedule``, ``pause``, ``resume``, ``login``, ``logout``), ``target`` (a message id,
a direction), ``outcome`` (``ok``, ``refused``, ``failed``) and a ``detail``.

The console's own ``/metrics`` counts the same events:

- ``delaybridge_console_changes_total{action, outcome, who}``: changes (cancel,
  reschedule, pause, resume), ``who`` capped at 100 distinct names (then ``__other__``);
- ``delaybridge_console_last_change_timestamp_seconds{action}``: when the last one was;
- ``delaybridge_console_logins_total{outcome}`` and ``delaybridge_console_sessions``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum

from prometheus_client import CollectorRegistry, Counter, Gauge

from delaybridge.bridge.observe.labels import LabelBudget

log = logging.getLogger("delaybridge.console.audit")

WHO_LABELS = 100


class Action(StrEnum):
    CANCEL = "cancel"
    CANCEL_PREFIX = "cancel-prefix"
    RESCHEDULE = "reschedule"
    PAUSE = "pause"
    RESUME = "resume"
    LOGIN = "login"
    LOGOUT = "logout"


class Outcome(StrEnum):
    OK = "ok"
    REFUSED = "refused"
    """Not attempted: read-only mode, a missing CSRF token, a wrong token at login."""
    FAILED = "failed"
    """Attempted, and a replica or Kafka said no."""


CHANGES = frozenset(
    {Action.CANCEL, Action.CANCEL_PREFIX, Action.RESCHEDULE, Action.PAUSE, Action.RESUME}
)


class Audit:
    """Writes audit lines and keeps the console's metrics in its own registry."""

    def __init__(
        self,
        sessions: Callable[[], int],
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.registry = CollectorRegistry()
        self._clock = clock
        self._who = LabelBudget(WHO_LABELS)
        self._changes = Counter(
            "delaybridge_console_changes",
            "Changes made through the console, by action, outcome and the name given at login",
            ["action", "outcome", "who"],
            registry=self.registry,
        )
        self._last = Gauge(
            "delaybridge_console_last_change_timestamp_seconds",
            "Unix time of the last change made through the console, by action",
            ["action"],
            registry=self.registry,
        )
        self._logins = Counter(
            "delaybridge_console_logins",
            "Logins to the console, by outcome",
            ["outcome"],
            registry=self.registry,
        )
        live = Gauge(
            "delaybridge_console_sessions",
            "Console sessions alive now",
            registry=self.registry,
        )
        live.set_function(lambda: float(sessions()))
        for outcome in Outcome:
            self._logins.labels(outcome.value)

    def record(
        self,
        action: Action,
        outcome: Outcome,
        *,
        who: str,
        session: str | None,
        remote: str,
        target: str | None = None,
        detail: str | None = None,
    ) -> dict[str, str | None]:
        """Log one event and count it; the line's fields (for tests and callers)."""
        now = self._clock()
        line: dict[str, str | None] = {
            "when": now.isoformat(timespec="milliseconds"),
            "who": who,
            "session": session,
            "remote": remote,
            "action": action.value,
            "target": target,
            "outcome": outcome.value,
            "detail": detail,
        }
        log.info("%s", json.dumps(line, ensure_ascii=False))
        if action in CHANGES:
            self._changes.labels(action.value, outcome.value, self._who(who)).inc()
            if outcome is Outcome.OK:
                self._last.labels(action.value).set(now.timestamp())
        elif action is Action.LOGIN:
            self._logins.labels(outcome.value).inc()
        return line

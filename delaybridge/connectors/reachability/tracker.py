"""Is Kafka reachable? One tracker per sidecar process, fed by every one of its clients.

Every Kafka client the sidecar builds (producer, group consumer, cancel-feed reader,
restore and standby readers, admin client) hands its error callback and its log lines
to one :class:`KafkaReachability` (``clients.py`` wires them). The tracker decides what
reaches the log, owns the one answer to "is Kafka there?" (the
``delaybridge_kafka_reachable`` gauge, the ``/readyz`` reason) and says each change of
that answer once.

States (:class:`Reachability`) and what moves them::

    REACHABLE --a connection error--> CHECKING --no bootstrap server accepts--> UNREACHABLE
                                          |
                                          +--a listener accepts, and the errors stopped
                                          |  (or checks found one for 5 s)--> REACHABLE
    UNREACHABLE --a listener accepts (checked every second)--> REACHABLE

A *connection error* is one of :data:`CONNECTION_ERRORS` from any client's error
callback (``_TRANSPORT``, ``_ALL_BROKERS_DOWN``, ...). One of them alone does not make
Kafka unreachable: an idle connection the broker closed, one broker of three
restarting, a frozen broker all produce them too. The tracker then *checks*: a TCP
connect to each bootstrap server on a thread of its own (``probe.py``). Unreachable
means no bootstrap server accepts a connection; back means one does again. librdkafka
has no "connected again" signal to use instead: its error callback reports failures
only.

Two refinements, both from a real broker (docs/design/kafka-outage.md):

- A broker shutting down drops its clients a moment before it closes its listener, so
  the first check may still find it; on a loaded machine the moment lasts seconds.
  While connection errors go on during checks that found a listener, the tracker checks
  again every second for :data:`CONFIRMING_S` before it calls them a client's errors.
- A check that ends in REACHABLE doubles the time before a new connection error is
  checked (1, 2, 4 ... 30 s; 1 s again after 30 s without one), so a cluster with one
  broker of several down for good is not probed every second. ``_ALL_BROKERS_DOWN`` is
  checked at once all the same: a client has no broker left, which one broker down of
  several never causes.

What is logged, and by which path:

- **Client errors** (the error callback) are the one voice for failures: each kind
  (its code and text, numbers blanked) is logged at WARNING the first time, then at
  most once per 30 s with how many more came (``repeats.py``). A *fatal* error is
  handed to ``on_fatal`` at once (the sidecar stops, as before), unless the client has
  its own callback for those (``clients.py``: the group consumer is replaced).
- **librdkafka's log lines** go through the same limiter, except its ``FAIL`` lines:
  those are connection failures and disconnects, which the error callback reports
  already (librdkafka sends the error for every ``FAIL`` line at ERROR level), so they
  are logged at DEBUG instead of twice.
- **While CHECKING** (a check takes milliseconds against a refusing host, up to 2 s per
  server against a silent one) client lines are held; a listener found, they go
  through the limiter as usual; none found, they count towards the outage.
- **While UNREACHABLE** no client line is logged; each is counted. The tracker logs one
  ERROR line when Kafka becomes unreachable, one WARNING summary every 30 s while it
  stays away (how long, how many client lines were suppressed, the last one), and one
  INFO line when it is back. A kind seen during the outage then stays quiet for its
  window, so stragglers (reports queued during the outage) do not flood the log.

Threads: the owner (the service loop) feeds it (the clients' callbacks run inside its
polls) and calls :meth:`~KafkaReachability.tick` every turn; checks run on their own
threads and only complete a future the owner reads. :attr:`~KafkaReachability.outage`
and :meth:`~KafkaReachability.readiness` may be read from any thread (one attribute
read of an immutable value).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, replace

from confluent_kafka import KafkaError as RdKafkaError

from delaybridge.connectors.errors import is_fatal
from delaybridge.connectors.reachability.probe import ListenerCheck, ListenerProbe
from delaybridge.connectors.reachability.repeats import RepeatLimiter, kind_of

log = logging.getLogger(__name__)
#: Where client errors and librdkafka's own lines are logged (as before the tracker).
client_log = logging.getLogger("delaybridge.connectors.kafka")

#: Client errors that make the tracker check whether Kafka is still there.
CONNECTION_ERRORS = frozenset(
    {
        RdKafkaError._TRANSPORT,
        RdKafkaError._ALL_BROKERS_DOWN,
        RdKafkaError._RESOLVE,
        RdKafkaError._TIMED_OUT,
    }
)
#: librdkafka's facility for a broker connection that failed or closed.
FAIL_FACILITY = "FAIL"
#: Seconds between two summaries while Kafka stays away.
SUMMARY_INTERVAL_S = 30.0
#: Seconds between two checks while Kafka is away (and before a new suspicion after a
#: check found a listener).
CHECK_INTERVAL_S = 1.0
#: How often the clients nobody else polls are served: their lines wait in librdkafka's
#: queue meanwhile. At every turn it was a fifth of an idle sidecar's CPU (the loop turns
#: every few milliseconds while anything is in flight); every 100 ms, still a tenth of
#: what was left (an idle reader's serve is ~100 µs). The clients that tell an outage
#: first, the group consumer and the producer, are polled at every turn anyway.
SERVE_INTERVAL_S = 1.0
#: Client lines held while a check runs; more are only counted.
HOLD_MAX = 100
#: Seconds for which checks in a row must find a listener while connection errors go on
#: before those errors count as a client's, not Kafka's (a broker shutting down still
#: accepts for a moment after it dropped its clients; seconds on a loaded machine).
CONFIRMING_S = 5.0


class Reachability(enum.Enum):
    REACHABLE = "reachable"
    CHECKING = "checking"
    """A client reported a connection error; a check of the listeners runs."""
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class Outage:
    """Kafka is away: since when (the tracker's clock) and what the last check found."""

    since_s: float
    cause: str
    """Each bootstrap server and why it did not accept a connection."""

    def describe(self, now_s: float) -> str:
        return (
            f"Kafka unreachable for {now_s - self.since_s:.0f} s: no bootstrap server "
            f"accepts connections ({self.cause})"
        )


@dataclass(frozen=True)
class _Line:
    level: int
    kind: Hashable
    text: str


class KafkaReachability:
    """The sidecar's one view of whether Kafka is there; see the module docstring.

    ``probe`` checks the bootstrap servers' listeners; ``on_fatal`` gets a client's
    fatal error (the caller stops); ``on_change`` gets ``True``/``False`` when Kafka
    comes back / goes away (the gauge); ``now_s`` is the clock, in seconds.
    """

    def __init__(
        self,
        probe: ListenerProbe,
        on_fatal: Callable[[RdKafkaError], None],
        on_change: Callable[[bool], None] = lambda reachable: None,
        now_s: Callable[[], float] = time.monotonic,
        *,
        summary_interval_s: float = SUMMARY_INTERVAL_S,
        check_interval_s: float = CHECK_INTERVAL_S,
        says_state: bool = True,
    ) -> None:
        self._probe = probe
        self._state_level = logging.DEBUG if not says_state else None
        """Worker processes after the first of a pod track the same cluster: worker 0
        says the state lines for the pod, the others keep them at DEBUG."""
        self._on_fatal = on_fatal
        self._on_change = on_change
        self._now_s = now_s
        self.summary_interval_s = summary_interval_s
        self.check_interval_s = check_interval_s
        self._limiter = RepeatLimiter(summary_interval_s)
        self._served: list[Callable[[], object]] = []
        self._served_s = -SERVE_INTERVAL_S  # when the idle clients were last served
        self.state = Reachability.REACHABLE
        self.outage: Outage | None = None
        """Set while Kafka is unreachable; read from any thread."""
        self._check: Future[ListenerCheck] | None = None
        self._checked_s = -check_interval_s  # when the last check started
        self._cleared_s = -check_interval_s  # when a check last found a listener
        self._recheck_s = check_interval_s  # how long after that a new error is checked
        self._connection_error_s = -summary_interval_s  # the last connection error
        self._held: list[_Line] = []
        self._held_over = 0
        self._suspected_s = 0.0  # when the check that may start an outage began
        self._errors_since_check = False  # connection errors since a check was last judged
        self._suppressed = 0  # client lines counted, not logged, during this outage
        self._last_line = ""
        self._summary_s = 0.0

    def readiness(self) -> str | None:
        """Why the sidecar is not ready on Kafka's account, or None while it is reachable."""
        outage = self.outage
        return None if outage is None else outage.describe(self._now_s())

    # -- what the clients report ----------------------------------------------------------

    def client_error(self, err: RdKafkaError) -> None:
        """A client's error callback (``error_cb``)."""
        if is_fatal(err):
            self._on_fatal(err)
            return
        text = f"Kafka client: {err.str()} [{err.name()}]"
        line = _Line(logging.WARNING, kind_of(err.name(), err.str()), text)
        if err.code() in CONNECTION_ERRORS:
            self._suspect(self._now_s(), every_broker=err.code() == RdKafkaError._ALL_BROKERS_DOWN)
        self._report(line)

    def client_log(self, level: int, facility: str, client: str, text: str) -> None:
        """One of librdkafka's log lines (confluent-kafka's ``logger``: :class:`ClientLog`)."""
        line = f"{facility} [{client}] {text}"
        if level <= logging.DEBUG or facility == FAIL_FACILITY:
            # DEBUG: asked for with librdkafka's `debug` setting. FAIL: the error
            # callback reports the same failure (module docstring).
            client_log.debug("%s", line)
            return
        self._report(_Line(level, kind_of(facility, text), line))

    def serve(self, poll: Callable[[], object]) -> None:
        """Call ``poll`` at :meth:`tick`, at most every :data:`SERVE_INTERVAL_S`: it
        serves the callbacks of a client that nobody else polls (the admin client, an
        idle reader). librdkafka queues a client's log lines and errors until it is
        polled; unserved, they would pile up while Kafka is away and come out, stale,
        long after."""
        self._served.append(poll)

    # -- the owner's turn -----------------------------------------------------------------

    def tick(self) -> None:
        """Serve the idle clients; judge a finished check; while Kafka is away, check
        again every ``check_interval_s`` and summarise every ``summary_interval_s``."""
        now = self._now_s()
        if now - self._served_s >= SERVE_INTERVAL_S:
            self._served_s = now
            for poll in self._served:
                poll()
        waiting = self.state is not Reachability.REACHABLE and self._check is None
        if waiting and now - self._checked_s >= self.check_interval_s:
            self._begin_check(now)
        if self._check is not None and self._check.done():
            found = self._check.result()
            self._check = None
            self._judge(found, now)
        outage = self.outage
        if outage is not None and now - self._summary_s >= self.summary_interval_s:
            self._summarise(outage, now)

    # -- inside ---------------------------------------------------------------------------

    def _suspect(self, now: float, *, every_broker: bool) -> None:
        """A connection error: check the listeners, unless a check runs or found one
        lately. "Lately" doubles with each check that finds one (1, 2, 4 ... 30 s), so
        a cluster with one broker of several down is not probed every second; it is 1 s
        again once connection errors stopped for a summary interval. ``every_broker``
        (the client has no broker left) is checked however lately one was found."""
        if now - self._connection_error_s >= self.summary_interval_s:
            self._recheck_s = self.check_interval_s
        self._connection_error_s = now
        self._errors_since_check = True
        if self.state is not Reachability.REACHABLE:
            return
        if now - self._cleared_s < self._recheck_s and not every_broker:
            return
        self.state = Reachability.CHECKING
        self._suspected_s = now
        self._errors_since_check = False  # the one that raised the suspicion
        self._begin_check(now)

    def _begin_check(self, now: float) -> None:
        self._checked_s = now
        self._check = self._probe.begin()

    def _report(self, line: _Line) -> None:
        now = self._now_s()
        if self.state is Reachability.UNREACHABLE:
            self._suppressed += 1
            self._last_line = line.text
            self._limiter.hush(line.kind, now)
        elif self.state is Reachability.CHECKING:
            if len(self._held) < HOLD_MAX:
                self._held.append(line)
            else:
                self._held_over += 1
        else:
            self._admit(line, now)

    def _admit(self, line: _Line, now: float) -> None:
        admission = self._limiter.admit(line.kind, now)
        if admission.passes:
            client_log.log(line.level, "%s%s", line.text, admission.suffix())

    def _judge(self, found: ListenerCheck, now: float) -> None:
        outage = self.outage
        if outage is None:  # CHECKING: a check runs only then or while UNREACHABLE
            if not found.listening:
                self._gone(found, now)
                return
            errors_went_on, self._errors_since_check = self._errors_since_check, False
            if errors_went_on and now - self._suspected_s < CONFIRMING_S:
                return  # errors go on: check again (tick) before believing the listener
            self._cleared(now)
        elif found.listening:
            self._back(outage, found, now)
        else:
            self.outage = replace(outage, cause=found.describe())

    def _cleared(self, now: float) -> None:
        """A connection error, but a listener accepts: the held lines go out as usual."""
        self.state = Reachability.REACHABLE
        self._cleared_s = now
        self._recheck_s = min(2 * self._recheck_s, self.summary_interval_s)
        held, self._held = self._held, []
        self._held_over = 0
        for line in held:
            self._admit(line, now)

    def _gone(self, found: ListenerCheck, now: float) -> None:
        self.state = Reachability.UNREACHABLE
        self.outage = Outage(self._suspected_s, found.describe())
        self._suppressed = len(self._held) + self._held_over
        self._last_line = self._held[-1].text if self._held else ""
        for line in self._held:
            self._limiter.hush(line.kind, now)
        self._held = []
        self._held_over = 0
        self._summary_s = now
        log.log(
            self._state_level or logging.ERROR,
            "Kafka unreachable: no bootstrap server accepts connections (%s); its clients' "
            "errors are counted, not logged, until it is back (a summary every %.0f s)",
            found.describe(),
            self.summary_interval_s,
        )
        self._on_change(False)

    def _summarise(self, outage: Outage, now: float) -> None:
        self._summary_s = now
        last = f"; the last: {self._last_line}" if self._last_line else ""
        log.log(
            self._state_level or logging.WARNING,
            "Kafka still unreachable after %.0f s (%s); %d client errors suppressed%s",
            now - outage.since_s,
            outage.cause,
            self._suppressed,
            last,
        )

    def _back(self, outage: Outage, found: ListenerCheck, now: float) -> None:
        away_s = now - outage.since_s
        self.state = Reachability.REACHABLE
        self.outage = None
        self._cleared_s = now
        self._recheck_s = self.check_interval_s
        log.log(
            self._state_level or logging.INFO,
            "Kafka reachable again after %.0f s (%s accepts connections); %d client errors "
            "were suppressed while it was away",
            away_s,
            found.accepted_by,
            self._suppressed,
        )
        self._suppressed = 0
        self._last_line = ""
        self._on_change(True)


class ClientLog:
    """What confluent-kafka takes as a client's ``logger``: it calls
    ``logger.log(level, "%s [%s] %s", facility, client name, text)`` for each of
    librdkafka's log lines (inside the client's poll); this hands them to the tracker."""

    def __init__(self, tracker: KafkaReachability) -> None:
        self._tracker = tracker

    def log(self, level: int, msg: str, *args: object) -> None:
        if len(args) == 3:
            facility, client, text = (str(arg) for arg in args)
            self._tracker.client_log(level, facility, client, text)
        else:  # not confluent-kafka's shape: take it whole
            self._tracker.client_log(level, "", "", msg % args if args else msg)

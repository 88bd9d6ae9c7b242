"""The reachability tracker on a fake clock and a fake listener: one line when Kafka
goes, a summary every 30 s while it stays away, one line when it is back, and client
errors rate-limited instead of echoed (issue 25 item 3).

Before it, a broker stopped for 45 s made the sidecar log 36-40 ERROR and 20-22
WARNING lines a second: each reconnect of each client, once as librdkafka's log line
and once more from the error callback.
"""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError

from delaybridge.connectors.reachability import KafkaReachability, Reachability
from delaybridge.connectors.reachability.tracker import SERVE_INTERVAL_S, ClientLog
from tests.fakes import FakeListenerProbe

TRACKER = "delaybridge.connectors.reachability.tracker"
CLIENTS = "delaybridge.connectors.kafka"


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


class Outage:
    """A tracker, its fake listener and clock, and what it told the world."""

    def __init__(self, says_state: bool = True) -> None:
        self.clock = Clock()
        self.listener = FakeListenerProbe()
        self.changes: list[bool] = []
        self.fatal: list[KafkaError] = []
        self.tracker = KafkaReachability(
            self.listener,
            self.fatal.append,
            self.changes.append,
            self.clock,
            says_state=says_state,
        )
        self.log = ClientLog(self.tracker)

    def refused(self, n: int = 1, broker: str = "kafka-0:9092/0") -> None:
        """``n`` reconnects refused, each reported twice as librdkafka does: a FAIL log
        line and the error callback."""
        for i in range(n):
            text = (
                f"{broker}: Connect to ipv4#10.0.0.5:9092 failed: Connection refused "
                f"(after {i % 7}ms in state CONNECT)"
            )
            self.log.log(logging.ERROR, "%s [%s] %s", "FAIL", f"rdkafka#consumer-{i % 3}", text)
            self.tracker.client_error(KafkaError(KafkaError._TRANSPORT, text))

    def advance(self, seconds: float, *, refusals_per_s: int = 0) -> None:
        """Move the clock second by second, with the loop ticking in between."""
        for _ in range(int(seconds)):
            self.clock.now_s += 1
            self.refused(refusals_per_s)
            self.tracker.tick()


def state(o: Outage) -> Reachability:
    """The tracker's state now (a call, so the type checker does not keep a narrowed one)."""
    return o.tracker.state


def lines(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [
        f"{r.levelname} {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= level and r.name in (TRACKER, CLIENTS)
    ]


def test_a_burst_of_refused_connections_gives_one_state_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    o = Outage()
    o.listener.listening = False
    o.refused(500)
    o.tracker.client_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    o.tracker.tick()
    assert lines(caplog) == [
        "ERROR Kafka unreachable: no bootstrap server accepts connections (kafka-0:9092: "
        "Connection refused); its clients' errors are counted, not logged, until it is "
        "back (a summary every 30 s)"
    ]
    assert o.tracker.state is Reachability.UNREACHABLE
    assert o.listener.checks == 1  # one check for the whole burst
    assert o.changes == [False]
    assert o.tracker.readiness() == (
        "Kafka unreachable for 0 s: no bootstrap server accepts connections "
        "(kafka-0:9092: Connection refused)"
    )
    # librdkafka's FAIL lines are the error callback's errors once more: DEBUG, not counted.
    debug = [r for r in caplog.records if r.name == CLIENTS and r.levelno == logging.DEBUG]
    assert len(debug) == 500


def test_while_away_a_summary_every_30_s_says_how_long_and_how_many(
    caplog: pytest.LogCaptureFixture,
) -> None:
    o = Outage()
    o.listener.listening = False
    o.refused(3)
    o.tracker.tick()
    caplog.clear()
    caplog.set_level(logging.INFO)
    o.advance(95, refusals_per_s=20)
    summaries = lines(caplog)
    assert len(summaries) == 3
    for n, line in enumerate(summaries, start=1):
        assert line.startswith(f"WARNING Kafka still unreachable after {30 * n} s (kafka-0:9092: ")
        assert f"; {3 + 30 * n * 20} client errors suppressed; the last: Kafka client: " in line
    assert o.listener.checks == 1 + 95  # a check a second while away, never two at once
    assert o.changes == [False]


def test_a_pods_other_workers_keep_the_state_lines_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Every core by default (issue 26): each worker of a pod tracks the same cluster, and
    # a pod of two said "Kafka unreachable" twice. Worker 0 says it; the others track
    # (their gauge and readiness move) and log it at DEBUG.
    caplog.set_level(logging.DEBUG)
    o = Outage(says_state=False)
    o.listener.listening = False
    o.refused(5)
    o.tracker.tick()
    o.advance(31, refusals_per_s=10)
    o.listener.listening = True
    o.advance(1)
    assert lines(caplog) == []
    debug = [r.getMessage() for r in caplog.records if r.name == TRACKER]
    assert [m.split(":")[0].split(" after")[0] for m in debug] == [
        "Kafka unreachable",
        "Kafka still unreachable",
        "Kafka reachable again",
    ]
    assert o.changes == [False, True]


def test_one_line_when_the_listener_accepts_again(caplog: pytest.LogCaptureFixture) -> None:
    o = Outage()
    o.listener.listening = False
    o.refused(2)
    o.tracker.tick()
    o.advance(20, refusals_per_s=10)
    caplog.clear()
    caplog.set_level(logging.INFO)
    o.listener.listening = True
    o.advance(1)
    assert lines(caplog) == [
        "INFO Kafka reachable again after 21 s (kafka-0:9092 accepts connections); 202 "
        "client errors were suppressed while it was away"
    ]
    assert o.tracker.state is Reachability.REACHABLE and o.tracker.readiness() is None
    assert o.changes == [False, True]
    o.advance(120)
    assert len(lines(caplog)) == 1  # no summary once back, no checks either
    assert o.listener.checks == 1 + 21


def test_stragglers_after_the_return_stay_quiet_for_their_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Errors reported after the listener is back (queued reports, a client's backoff)
    are of a kind the outage just counted: quiet for 30 s, then one line with the count."""
    o = Outage()
    o.listener.listening = False
    o.refused(5)
    o.tracker.tick()
    o.listener.listening = True
    o.advance(1)
    caplog.clear()
    caplog.set_level(logging.INFO)
    o.refused(4)  # a check ran a moment ago: no new suspicion, rate-limited as usual
    o.tracker.tick()
    assert lines(caplog) == []
    o.advance(40)
    o.refused(1)
    o.tracker.tick()
    (line,) = lines(caplog)
    assert line.startswith("WARNING Kafka client: kafka-0:9092/0: Connect to ipv4#10.0.0.5:9092")
    assert line.endswith("[_TRANSPORT] (4 more like it in 41 s)")


def test_a_connection_error_with_a_listener_up_is_a_client_error_not_an_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One broker of three down for good: its errors go on while a listener accepts.
    After checks in a row found one for 5 s, the errors go out rate-limited, nothing says
    Kafka is away, and the checks back off (2, 4, 8 ... s apart)."""
    caplog.set_level(logging.INFO)
    o = Outage()
    o.listener.hold = True  # each check runs while the next errors come in
    o.refused(50)
    o.listener.answer()
    o.tracker.tick()
    assert state(o) is Reachability.CHECKING  # errors went on during the check
    for _ in range(5):
        assert state(o) is Reachability.CHECKING
        o.clock.now_s += 1
        o.tracker.tick()  # the next check begins
        o.refused(2)
        o.listener.answer()
        o.tracker.tick()
    assert state(o) is Reachability.REACHABLE
    assert o.listener.checks == 6
    (line,) = lines(caplog)
    assert line.startswith("WARNING Kafka client: kafka-0:9092/0: Connect to ipv4#10.0.0.5:9092")
    assert line.endswith("[_TRANSPORT]")
    assert o.changes == [] and o.tracker.readiness() is None
    o.listener.hold = False
    o.advance(30, refusals_per_s=2)
    assert len(lines(caplog)) == 2
    assert lines(caplog)[1].endswith(f"({50 + 2 * 5 - 1 + 2 * 29} more like it in 30 s)")
    assert o.changes == [] and o.listener.checks < 6 + 30  # fewer than one a second
    checks = o.listener.checks
    o.advance(70, refusals_per_s=2)
    # Backed off to 30 s: each suspicion is one check a second for 5 s, then 30 s quiet.
    assert o.changes == [] and o.listener.checks - checks <= 2 * 6


@pytest.mark.parametrize("accepting_s", [0, 3], ids=["closes-at-once", "closes-late"])
def test_a_broker_that_shuts_down_is_unreachable_once_its_listener_closes(
    caplog: pytest.LogCaptureFixture, accepting_s: int
) -> None:
    """A broker shutting down drops its clients a moment before it closes its listener:
    the first check still finds it, the errors go on, a later check does not. On loaded
    CI that moment lasted seconds: three checks (2 s) then let five client lines out
    before the state line; the checks now go on for 5 s while the errors do."""
    caplog.set_level(logging.INFO)
    o = Outage()
    o.refused(20)
    o.tracker.tick()
    o.advance(accepting_s, refusals_per_s=20)  # still accepting: a check each second
    assert lines(caplog) == [] and state(o) is Reachability.CHECKING
    o.listener.listening = False
    o.advance(1, refusals_per_s=20)
    (line,) = lines(caplog)
    assert line.startswith("ERROR Kafka unreachable")
    assert o.tracker.outage is not None and o.tracker.outage.since_s == 1000.0


def test_every_broker_down_is_checked_at_once_even_just_after_a_clear(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A check that found a listener delays the next by 2 s; a client with no broker
    left (``_ALL_BROKERS_DOWN``) is checked all the same, and its lines are held."""
    caplog.set_level(logging.INFO)
    o = Outage()
    o.refused(1)
    o.tracker.tick()
    o.clock.now_s += 1
    o.tracker.tick()  # no error during that check: cleared, the next one waits 2 s
    assert state(o) is Reachability.REACHABLE
    before = len(lines(caplog))
    o.listener.listening = False
    o.clock.now_s += 0.5
    o.tracker.client_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    o.refused(5)
    o.tracker.tick()
    (line,) = lines(caplog)[before:]
    assert line.startswith("ERROR Kafka unreachable")


def test_lines_are_held_while_a_slow_check_runs(caplog: pytest.LogCaptureFixture) -> None:
    """A black-holed address: the check takes seconds; meanwhile nothing is logged,
    and once it says "gone" only the state line is."""
    caplog.set_level(logging.INFO)
    o = Outage()
    o.listener.listening = False
    o.listener.hold = True
    o.refused(10)
    o.advance(3, refusals_per_s=10)
    assert o.tracker.state is Reachability.CHECKING
    assert lines(caplog) == [] and o.listener.checks == 1
    o.listener.answer()
    o.tracker.tick()
    (line,) = lines(caplog)
    assert line.startswith("ERROR Kafka unreachable")
    assert o.tracker.outage is not None and o.tracker.outage.since_s == 1000.0


def test_other_client_errors_and_librdkafka_lines_are_rate_limited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    o = Outage()
    for _ in range(100):
        o.tracker.client_error(KafkaError(KafkaError._AUTHENTICATION, "SASL handshake failed"))
        o.log.log(
            logging.WARNING, "%s [%s] %s", "REQTMOUT", "rdkafka#producer-1", "Timed out 3 in-flight"
        )
    o.advance(31)
    o.tracker.client_error(KafkaError(KafkaError._AUTHENTICATION, "SASL handshake failed"))
    assert lines(caplog) == [
        "WARNING Kafka client: SASL handshake failed [_AUTHENTICATION]",
        "WARNING REQTMOUT [rdkafka#producer-1] Timed out 3 in-flight",
        "WARNING Kafka client: SASL handshake failed [_AUTHENTICATION] (99 more like it in 31 s)",
    ]
    assert o.listener.checks == 0  # not a connection error: nothing to check


def test_librdkafka_lines_while_away_count_towards_the_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    o = Outage()
    o.listener.listening = False
    o.refused(1)
    o.tracker.tick()
    caplog.clear()
    caplog.set_level(logging.INFO)
    o.log.log(logging.WARNING, "%s [%s] %s", "SESSTMOUT", "rdkafka#consumer-2", "session timed out")
    o.advance(30)
    (summary,) = lines(caplog)
    assert "; 2 client errors suppressed; the last: SESSTMOUT [rdkafka#consumer-2]" in summary


def test_a_fatal_error_is_handed_over_at_once_even_while_away() -> None:
    o = Outage()
    o.listener.listening = False
    o.refused(1)
    o.tracker.tick()
    fatal = KafkaError(KafkaError._FATAL, "out of order sequence", fatal=True)
    o.tracker.client_error(fatal)
    assert o.fatal == [fatal]


def test_the_clients_nobody_else_polls_are_served_every_serve_interval() -> None:
    # Served at every tick, they cost an idle sidecar a fifth of its CPU: the loop turns
    # every few milliseconds while anything is in flight (issue 26: idle ≤ 1 %).
    o = Outage()
    served: list[float] = []
    o.tracker.serve(lambda: served.append(o.clock()))
    for _ in range(10):  # ten turns within one interval
        o.tracker.tick()
        o.clock.now_s += SERVE_INTERVAL_S / 10 - 1e-6
    assert len(served) == 1
    for _ in range(3):
        o.clock.now_s += SERVE_INTERVAL_S
        o.tracker.tick()
    assert len(served) == 4

"""Issue 25, scenario 2: Kafka unreachable for longer than the group's session timeout.

The test's own broker (a LocalKafka on free ports, never the session's shared one) serves
one ``delaybridge run`` with the default settings (changelog on, a static member) and a
10 s session timeout. 1,500 schedules are due over the next 70 s, spread evenly over
three partitions, one in ten (from the 200th on) cancelled at once by a record in
another partition. Once
deliveries flow, Kafka goes away for :data:`DOWN_S` seconds, longer than the session:

- **stopped**: the broker is stopped (SIGTERM), then started again on the same data and
  ports; it is back when a produce/consume round trip works again;
- **frozen**: the broker's JVM is stopped with SIGSTOP, then continued with SIGCONT; it
  is back at the SIGCONT.

Pass criteria (``tools/scenario/verdict.py`` counts them): 0 lost, 0 early, 0 cancelled
delivered; duplicates at most 1 % of the messages due during the outage; every message
due by the time Kafka is back seen within :data:`DRAIN_S` seconds of it; the process up
and ``/healthz`` 200 at every probe (every 200 ms) from readiness to the end; and (issue 25
item 3) the sidecar's log during the outage says each state once, never a line per
retry: at most :data:`LOG_LINES_MAX` lines, no line of a kind more than once per
partition (:func:`_repeated`). test_kafka_reachability.py checks the lines themselves
(the state line, the summary, the line back) on an outage without load.
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from delaybridge.connectors import KafkaClients, KafkaSettings
from delaybridge.connectors.localkafka import LocalKafka
from delaybridge.tools.scenario.arrivals import ArrivalLog
from delaybridge.tools.scenario.verdict import Cancel, Scheduled, Verdict, Window, judge
from tests.http_client import Client
from tests.integration.sidecar.harness import (
    SubprocessSidecar,
    Topics,
    native,
    now_ms,
    produce,
    settings_for,
)
from tests.integration.sidecar.observe import alive, http
from tests.kafka_cluster import KafkaCluster, RecordWithHeaders
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 3
MESSAGES = 1_500
SPREAD_MS = 70_000
"""due times from 3 s after sending to 73 s: before, during and after the outage"""
CANCEL_EVERY = 10
CANCEL_FROM = 200
"""the first cancelled message is due 9 s after sending: every cancel is acknowledged before"""
SESSION_TIMEOUT_MS = 10_000
DOWN_S = 45
"""how long Kafka is away before it is started or continued (stopped: plus its start):
the issue's 45 s, four and a half session timeouts"""
DRAIN_S = 10
HEALTH_EVERY_S = 0.2
LOG_LINES_MAX = 30
"""Kafka away and back, its check's summary, each partition lost, released, assigned and
restored, the cancel horizon held and freed: each said once. Before issue 25 item 3 a
15 s stop logged 736 lines (each reconnect of each client, twice)."""


class How(enum.Enum):
    STOPPED = "stopped"
    FROZEN = "frozen"


@dataclass
class Outage:
    """Kafka away and back, timed (epoch ms); the sidecar's log written meanwhile."""

    how: How
    down_ms: int = 0
    back_ms: int = 0
    log: list[str] = field(default_factory=list)
    """the sidecar's log lines written from ``down_ms`` to ``back_ms``"""

    def run(self, broker: LocalKafka, side: SubprocessSidecar) -> None:
        log_from = side.log.stat().st_size
        self.down_ms = now_ms()
        pid = broker.pid()
        assert pid is not None, "the test's broker is not running"
        if self.how is How.FROZEN:
            os.kill(pid, signal.SIGSTOP)
        else:
            assert broker.stop(timeout_s=60), "the test's broker was not running"
        wait_until(lambda: now_ms() >= self.down_ms + DOWN_S * 1000, 60, "the outage's length")
        if self.how is How.FROZEN:
            os.kill(pid, signal.SIGCONT)
        else:
            broker.start(timeout_s=120, progress=False)  # back: a round trip works
        self.back_ms = now_ms()
        with side.log.open("rb") as f:
            f.seek(log_from)
            self.log = f.read().decode(errors="replace").splitlines()


class HealthProbe:
    """``/healthz`` every :data:`HEALTH_EVERY_S` on a thread; every answer that was not 200
    (or no answer, or the process gone) is kept with its time."""

    def __init__(self, side: SubprocessSidecar, client: Client) -> None:
        self._side = side
        self._client = client
        self.probes = 0
        self.failures: list[tuple[int, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="healthz", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(HEALTH_EVERY_S):
            self.probes += 1
            assert self._side.proc is not None
            if self._side.proc.poll() is not None:
                self.failures.append((now_ms(), f"exited {self._side.proc.returncode}"))
                return
            try:
                status = self._client("GET", "/healthz").status
            except OSError as exc:
                self.failures.append((now_ms(), repr(exc)))
                continue
            if status != 200:
                self.failures.append((now_ms(), f"HTTP {status}"))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.mark.parametrize("how", list(How), ids=[h.value for h in How])
def test_kafka_away_longer_than_the_session_loses_nothing_and_repeats_almost_nothing(
    own_broker: KafkaCluster, tmp_path: Path, how: How
) -> None:
    bootstrap = own_broker.bootstrap_servers
    topics = Topics(
        delay=own_broker.create_topic("delay", partitions=PARTITIONS),
        targets=[own_broker.create_topic("orders", partitions=PARTITIONS)],
        dead_letter=own_broker.create_topic("dlt"),
        cancels=own_broker.create_topic("cancels"),
    )
    settings = settings_for(
        bootstrap,
        topics,
        tmp_path / "data",
        f"g-{topics.delay}",
        kafka={"session_timeout_ms": SESSION_TIMEOUT_MS},
    )
    side = SubprocessSidecar(settings, tmp_path)
    side.start()
    client = http(side)
    # Probed from readiness on: while a pod's worker processes start, the supervisor
    # answers /healthz 503 naming them (one that cannot start fails the liveness probe).
    wait_until(lambda: client("GET", "/readyz").status == 200, 120, "the sidecar ready")
    health = HealthProbe(side, client)
    arrivals = ArrivalLog(KafkaClients(KafkaSettings(bootstrap_servers=bootstrap)), topics.targets)
    outage = Outage(how)
    try:
        scheduled = _send(bootstrap, topics)
        wait_until(lambda: len(arrivals) >= 20, 30, "deliveries flowing before the outage")
        outage.run(_local(own_broker), side)
        arrivals.reopen()  # the test's own reader, fresh: see ArrivalLog.reopen
        owed = {s.id for s in scheduled if s.owed}
        last_due_ms = max(s.due_ms for s in scheduled)

        def all_seen() -> bool:
            alive(side)
            return owed <= arrivals.ids()

        with contextlib.suppress(TimeoutError):  # the verdict counts what is missing
            wait_until(all_seen, (last_due_ms - now_ms()) / 1000 + 60, "every owed message")
        wait_until(lambda: arrivals.quiet_ms() >= 3_000, 60, "3 s without a new arrival")
    finally:
        health.stop()
        arrivals.close()
        if side.proc is not None and side.proc.poll() is None:
            side.terminate(timeout_s=30)
    away = Window("outage", outage.down_ms, outage.back_ms)
    verdict = judge(scheduled, arrivals.records(), [away])
    due_in_outage = [s for s in scheduled if s.owed and away.holds(s.due_ms)]
    allowed = len(due_in_outage) // 100
    drained_ms = verdict.drained_ms(outage.back_ms, scheduled)
    print(_report(side, outage, verdict, len(due_in_outage), drained_ms, health))

    problems = []
    if verdict.lost or verdict.early or verdict.unexpected:
        problems.append(
            f"{len(verdict.lost)} lost {verdict.lost[:5]}, {len(verdict.early)} early "
            f"{verdict.early[:5]}, {len(verdict.unexpected)} unexpected; the sidecar's "
            f"critical lines: {_critical(side)[:2]}"
        )
    if verdict.cancelled_delivered:
        leaked = [s.id for s in verdict.cancelled_delivered]
        problems.append(f"{len(leaked)} cancelled messages delivered: {leaked[:5]}")
    if len(verdict.duplicates) > allowed:
        problems.append(
            f"{len(verdict.duplicates)} duplicates, allowed {allowed} (1 % of the "
            f"{len(due_in_outage)} due in the outage), e.g. "
            f"{[d.id for d in verdict.duplicated_firsts()[:5]]}"
        )
    if drained_ms > DRAIN_S * 1000:
        problems.append(
            f"the backlog drained {drained_ms / 1000:.1f} s after Kafka was back "
            f"(allowed {DRAIN_S} s)"
        )
    repeated = _repeated(outage.log)
    if len(outage.log) > LOG_LINES_MAX or repeated:
        shown = "\n    ".join(outage.log[:40])
        problems.append(
            f"{len(outage.log)} log lines while Kafka was away (at most {LOG_LINES_MAX}), "
            f"said more than once per partition: {repeated[:3]}; the lines:\n    {shown}"
        )
    if health.failures:
        problems.append(
            f"/healthz not 200 {len(health.failures)} times of {health.probes}: "
            f"{health.failures[:3]}"
        )
    assert verdict.cancels_must_win == sum(1 for s in scheduled if s.cancel is not None)
    assert len(due_in_outage) >= 200, "the outage held too few due messages to prove much"
    assert not problems, "\n".join(problems)


def _send(bootstrap: str, topics: Topics) -> list[Scheduled]:
    """The schedules (due evenly over :data:`SPREAD_MS`, from 3 s on), each in partition
    ``i % 3``, then a cancel of every tenth from :data:`CANCEL_FROM` on, in the next
    partition; all acknowledged."""
    target = topics.targets[0]
    first_due = now_ms() + 3_000
    due = {f"out-{i}": first_due + i * SPREAD_MS // MESSAGES for i in range(MESSAGES)}
    partition = {id: i % PARTITIONS for i, id in enumerate(due)}
    for p in range(PARTITIONS):
        records: list[RecordWithHeaders] = [
            (id.encode(), b"v", native(target, id, ("deliver-at-ms", str(at))))
            for id, at in due.items()
            if partition[id] == p
        ]
        produce(bootstrap, topics.delay, records, p)
    cancels: dict[str, Cancel] = {}
    for p in range(PARTITIONS):
        ids = [
            id
            for i, id in enumerate(due)
            if i >= CANCEL_FROM and i % CANCEL_EVERY == 0 and (i + 1) % PARTITIONS == p
        ]
        sent_ms = now_ms()
        records = [(id.encode(), None, [("delay-cancel", id)]) for id in ids]
        produce(bootstrap, topics.delay, records, p)
        cancels |= {id: Cancel(p, sent_ms, now_ms()) for id in ids}
    return [Scheduled(id, at, partition[id], cancels.get(id)) for id, at in due.items()]


def _repeated(lines: list[str]) -> list[str]:
    """Kinds of log line (level, logger and message, numbers blanked: a partition, a
    count, a duration) written more than once per partition: a retry logged at every
    attempt."""
    kinds: dict[str, int] = {}
    for line in lines:
        without_time = line.split(" ", 2)[-1]  # "<date> <time> LEVEL logger: message"
        kind = re.sub(r"\d+", "#", without_time)
        kinds[kind] = kinds.get(kind, 0) + 1
    return [kind for kind, n in kinds.items() if n > PARTITIONS]


def _critical(side: SubprocessSidecar) -> list[str]:
    """The sidecar's CRITICAL log lines (librdkafka's fatal errors among them)."""
    return [
        line for line in side.log.read_text(errors="replace").splitlines() if " CRITICAL " in line
    ]


def _local(cluster: KafkaCluster) -> LocalKafka:
    broker = cluster.handle
    assert isinstance(broker, LocalKafka)
    return broker


def _report(
    side: SubprocessSidecar,
    outage: Outage,
    verdict: Verdict,
    due_in_outage: int,
    drained_ms: int,
    health: HealthProbe,
) -> str:
    levels = {
        level: sum(f" {level} " in line for line in outage.log)
        for level in ("ERROR", "WARNING", "INFO")
    }
    return "\n".join(
        [
            f"\nKafka {outage.how.value} for {(outage.back_ms - outage.down_ms) / 1000:.1f} s: "
            f"{verdict.summary()}",
            f"  due in the outage {due_in_outage}, drained {drained_ms} ms after Kafka was back",
            f"  lateness due in the outage: {verdict.seen_lateness.get('outage')}, "
            f"outside: {verdict.seen_lateness.get('outside')} (seen)",
            f"  /healthz: {health.probes} probes, {len(health.failures)} not 200",
            f"  sidecar log during the outage: {len(outage.log)} lines {levels}",
            f"  critical lines: {_critical(side)[:2]}",
        ]
    )

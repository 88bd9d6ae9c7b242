"""One picture of the group from every replica's answers: the overview page's data.

Each replica answers ``/admin/stats`` (its partitions, pause state) and
``/admin/pending`` (pending counts per target topic and the due-time histogram) for the
partitions it owns. :func:`merge` folds those answers into a :class:`ClusterView`:
counts and histograms summed bin by bin (the rule of ``delaybridge pending stats``,
:func:`~delaybridge.bridge.admin.replicas.sum_stats`), every partition with the replica
that owns it, and what went wrong: a replica that did not answer (its partitions are
then missing from the sums, and the view says so), a partition owned by two replicas or
by none that answered (a rebalance in progress).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from delaybridge.bridge.admin.replicas import sum_stats
from delaybridge.console.replicas import ReplicaError
from delaybridge.errors import DelayBridgeError

Answers = Mapping[str, dict[str, Any] | ReplicaError]
_NO_COUNTS: dict[str, Any] = {
    "pending": 0,
    "by_topic": {},
    "histogram": {"by_minute": [], "by_hour": []},
}


@dataclass(frozen=True)
class ReplicaState:
    """One replica as the overview shows it."""

    url: str
    error: str | None = None
    group: str | None = None
    paused: tuple[str, ...] = ()
    backpressure: bool = False
    in_flight: int = 0
    pending: int | None = None
    active_partitions: int = 0


@dataclass(frozen=True)
class PartitionRow:
    """One delay-topic partition held by a replica (active, restoring or standby)."""

    topic: str
    partition: int
    owner: str
    role: str
    pending: int
    read_lag_ms: int | None
    bytes_on_disk: int
    in_flight: int
    last_source_offset: int | None
    worker: str | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass
class ClusterView:
    replicas: list[ReplicaState]
    partitions: list[PartitionRow]
    pending: int = 0
    by_topic: dict[str, int] = field(default_factory=dict)
    by_minute: list[int] = field(default_factory=list)
    by_hour: list[int] = field(default_factory=list)
    start_ms: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every replica answered: the sums cover every partition they own."""
        return all(r.error is None for r in self.replicas)

    def paused_anywhere(self, direction: str) -> list[str]:
        """The replicas where ``direction`` is paused by an operator."""
        return [r.url for r in self.replicas if direction in r.paused]


def merge(stats: Answers, pending: Answers | None, start_ms: int) -> ClusterView:
    """The group's view from each replica's ``/admin/stats`` and ``/admin/pending``
    (``pending`` None: without pending counts, e.g. for the pause page)."""
    replicas: list[ReplicaState] = []
    rows: list[PartitionRow] = []
    problems: list[str] = []
    pending_docs: dict[str, dict[str, Any]] = {}
    if pending is None:
        pending = {url: _NO_COUNTS for url in stats}
    for url in sorted(set(stats) | set(pending)):
        error = _first_error(stats.get(url), pending.get(url))
        if error is not None:
            replicas.append(ReplicaState(url, error=error))
            problems.append(f"{url} did not answer ({error}): its partitions are not counted")
            continue
        s = stats[url]
        p = pending[url]
        assert isinstance(s, dict) and isinstance(p, dict)
        try:
            mine = [_row(url, doc) for doc in s.get("partitions", [])]
            state = ReplicaState(
                url,
                group=s.get("group"),
                paused=tuple(sorted(str(d) for d in s.get("paused", []))),
                backpressure=bool(s.get("backpressure")),
                in_flight=int(s.get("in_flight", 0)),
                pending=int(p["pending"]),
                active_partitions=sum(1 for r in mine if r.role != "standby"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            replicas.append(ReplicaState(url, error=f"unexpected answer: {exc!r}"))
            problems.append(f"{url} answered something unexpected ({exc!r})")
            continue
        replicas.append(state)
        rows.extend(mine)
        pending_docs[url] = p
    try:
        total = sum_stats(pending_docs)
    except DelayBridgeError as exc:
        problems.append(str(exc))
        total = {"pending": 0, "by_topic": {}, "by_minute": [], "by_hour": []}
    rows.sort(key=lambda r: (r.topic, r.partition, r.role != "active", r.owner))
    problems.extend(_ownership_problems(rows))
    return ClusterView(
        replicas=replicas,
        partitions=rows,
        pending=int(total["pending"]),
        by_topic=dict(total["by_topic"]),
        by_minute=list(total["by_minute"]),
        by_hour=list(total["by_hour"]),
        start_ms=start_ms,
        problems=problems,
    )


def _first_error(*answers: dict[str, Any] | ReplicaError | None) -> str | None:
    for answer in answers:
        if answer is None:
            return "no answer"
        if isinstance(answer, ReplicaError):
            return str(answer)
    return None


def _row(url: str, doc: dict[str, Any]) -> PartitionRow:
    lag = doc.get("read_lag_ms")
    last = doc.get("last_source_offset")
    worker = doc.get("worker")
    return PartitionRow(
        topic=str(doc["topic"]),
        partition=int(doc["partition"]),
        owner=url,
        # Replicas older than the role field list only what they own.
        role=str(doc.get("role", "active")),
        pending=int(doc.get("pending", 0)),
        read_lag_ms=None if lag is None else int(lag),
        bytes_on_disk=int(doc.get("bytes_on_disk", 0)),
        in_flight=int(doc.get("in_flight", 0)),
        last_source_offset=None if last is None else int(last),
        worker=None if worker is None else str(worker),
    )


def _ownership_problems(rows: list[PartitionRow]) -> list[str]:
    owners: dict[str, list[str]] = {}
    for row in rows:
        if row.role != "standby":
            owners.setdefault(row.name, []).append(row.owner)
    return [
        f"{name} is owned by {len(urls)} replicas ({', '.join(urls)}): a rebalance is in "
        "progress, its messages may be counted twice"
        for name, urls in sorted(owners.items())
        if len(urls) > 1
    ]

"""Worker processes of one ``delaybridge run``: how many, and who each one is.

``workers`` (settings; 0, the default: one per usable core, capped by the memory
limit) > 1 makes ``delaybridge run`` a supervisor (``supervisor.py``) of
that many worker processes, each a complete sidecar (``service.py``): its own consumer
group member, producer, stores and cancel feed. Their stores share the data directory
root (``<data_dir>/<topic>-<partition>``, one ``flock`` per store), so a partition that
moves between two workers of one pod reopens its local store instead of restoring it
from the changelog. What must not be shared is derived here from the worker's index:

- ``kafka.instance_id`` (static membership): ``<id>-w<i>``;
- the ``transactional.id`` (exactly-once): ``<id>-w<i>``, ``<id>`` being what a single
  sidecar would use (``transactions.transactional_id``);
- the cancel feed's position file: ``cancel-feed-w<i>.json`` (``bridge/cancels/feed.py``);
- the HTTP server: loopback, an ephemeral port (the supervisor serves the pod's port).

Worker 0 keeps the single sidecar's identity unchanged, so going from one worker to
several keeps the static member, the transactional.id (fencing the old process's open
transaction at once) and the cancel feed position of the process it replaces.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from delaybridge.bridge.commit.transactions import transactional_id
from delaybridge.bridge.tuning import suffix
from delaybridge.settings import Settings

#: The line a worker prints once its HTTP server listens; the supervisor reads it.
HTTP_ANNOUNCE = "delaybridge: HTTP on "
#: cgroup v2: "<quota> <period>" in microseconds, or "max <period>".
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
#: cgroup v2: the memory limit in bytes, or "max".
MEMORY_MAX = Path("/sys/fs/cgroup/memory.max")
#: What one worker process may need at its peak: the 300 MB the benchmarks hold a worker
#: to (docs/benchmarks.md: 1M records due in one tick, the store at 10M pending), plus a
#: margin for the supervisor's share. A memory limit allows one worker per this much.
WORKER_MEMORY_BYTES = 320 * 2**20


def usable_cores(cpu_max: Path = CPU_MAX) -> int:
    """The cores this process may use: its CPU affinity (a cpuset), capped by the cgroup's
    CPU quota (a container's ``resources.limits.cpu``, which affinity does not show: on
    Kubernetes, affinity alone would count every core of the node), rounded up."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota
    return max(1, cores)


def memory_workers(memory_max: Path = MEMORY_MAX) -> int | None:
    """How many workers the cgroup's memory limit (a container's
    ``resources.limits.memory``) has room for, at :data:`WORKER_MEMORY_BYTES` each, at
    least one; None without a limit."""
    try:
        limit = memory_max.read_text().strip()
        if limit == "max":
            return None
        return max(1, int(limit) // WORKER_MEMORY_BYTES)
    except (OSError, ValueError):
        return None  # no cgroup v2 memory limit


def automatic_workers(cpu_max: Path = CPU_MAX, memory_max: Path = MEMORY_MAX) -> int:
    """``workers: 0`` (the default): one per usable core, as many as the memory limit
    has room for."""
    cores = usable_cores(cpu_max)
    room = memory_workers(memory_max)
    return cores if room is None else min(cores, room)


def worker_count(settings: Settings) -> int:
    """``settings.workers``, with 0 (the default) meaning :func:`automatic_workers`."""
    return settings.workers or automatic_workers()


def worker_settings(settings: Settings, index: int) -> Settings:
    """The settings worker ``index`` runs with (see the module docstring)."""
    kafka = settings.kafka
    delivery = settings.delivery
    tid = delivery.transactional_id
    if delivery.exactly_once and index > 0:
        base = transactional_id(tid, kafka.group_id, kafka.instance_id, settings.store.data_dir)
        tid = base + suffix(index)
    instance = kafka.instance_id + suffix(index) if kafka.instance_id else ""
    return settings.model_copy(
        update={
            "workers": 1,
            "kafka": kafka.model_copy(update={"instance_id": instance}),
            "delivery": delivery.model_copy(update={"transactional_id": tid}),
            "http": settings.http.model_copy(update={"host": "127.0.0.1", "port": 0}),
        }
    )

"""Worker processes of one ``delaybridge run``: how many, and who each one is.

``workers`` (settings) > 1 makes ``delaybridge run`` a supervisor (``supervisor.py``) of
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
from delaybridge.errors import ConfigError
from delaybridge.settings import Settings

#: The line a worker prints once its HTTP server listens; the supervisor reads it.
HTTP_ANNOUNCE = "delaybridge: HTTP on "
#: cgroup v2: "<quota> <period>" in microseconds, or "max <period>".
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


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


def worker_count(settings: Settings) -> int:
    """``settings.workers``, with 0 meaning one per usable core."""
    return settings.workers or usable_cores()


def check_supported(settings: Settings, count: int) -> None:
    """Refuse what several workers of one pod cannot do yet (ConfigError naming it)."""
    if count > 1 and settings.changelog.standby_replicas > 0:
        raise ConfigError(
            f"workers={count} with changelog.standby_replicas="
            f"{settings.changelog.standby_replicas}: not supported yet (a worker could "
            "keep a standby of a partition a sibling worker owns, in the same store "
            "directory); use workers: 1 with standbys, or standbys off with workers"
        )


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

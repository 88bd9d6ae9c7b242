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
- the cancel feed's position file: ``cancel-feed-w<i>.json`` (``cancel_feed.py``);
- the HTTP server: loopback, an ephemeral port (the supervisor serves the pod's port).

Worker 0 keeps the single sidecar's identity unchanged, so going from one worker to
several keeps the static member, the transactional.id (fencing the old process's open
transaction at once) and the cancel feed position of the process it replaces.
"""

from __future__ import annotations

import os

from delaybridge.bridge.settings import Settings
from delaybridge.bridge.transactions import transactional_id

#: The line a worker prints once its HTTP server listens; the supervisor reads it.
HTTP_ANNOUNCE = "delaybridge: HTTP on "


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a container's cpuset)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def worker_count(settings: Settings) -> int:
    """``settings.workers``, with 0 meaning one per usable core."""
    return settings.workers or usable_cores()


def suffix(index: int) -> str:
    """What worker ``index`` appends to the names it must not share ("" for worker 0)."""
    return "" if index == 0 else f"-w{index}"


def worker_settings(settings: Settings, index: int) -> Settings:
    """The settings worker ``index`` runs with (see the module docstring)."""
    kafka, delivery = settings.kafka, settings.delivery
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

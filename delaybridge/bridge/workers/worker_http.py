"""The supervisor's side of talking to its workers: one request, and merging answers.

:func:`http_ask` sends one request to a worker's loopback HTTP server;
:func:`merge_pending` and :func:`merge_stats` fold the workers' ``/admin/pending`` and
``/admin/stats`` answers into one in the single sidecar's shape (so ``delaybridge
status`` and ``delaybridge pending stats`` read a pod of workers as one replica).
"""

from __future__ import annotations

import http.client
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import orjson

from delaybridge.bridge.admin import replicas
from delaybridge.bridge.http.routes import Response
from delaybridge.errors import DelayBridgeError


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    content_type: str = "application/json"

    def json(self) -> Any:
        return orjson.loads(self.body)


Ask = Callable[[str, str, str, Mapping[str, str], float], Answer]
"""ask(worker base URL, method, path with query, headers, timeout) -> its answer;
raises OSError when the worker cannot be reached."""


def http_ask(
    url: str, method: str, target: str, headers: Mapping[str, str], timeout: float
) -> Answer:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
    try:
        conn.request(method, target, headers=dict(headers))
        resp = conn.getresponse()
        return Answer(resp.status, resp.read(), resp.getheader("Content-Type") or "")
    finally:
        conn.close()


class WorkerDown(DelayBridgeError):
    """A worker is not running (being restarted) or did not answer."""


class Refused(Exception):
    """A worker answered an error: the client gets that answer as it is."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer.status)
        self.answer = answer


def ok(answer: Answer) -> dict[str, Any]:
    """The JSON of a 200 answer; :class:`Refused` (the answer as it is) otherwise."""
    if answer.status != HTTPStatus.OK:
        raise Refused(answer)
    doc: dict[str, Any] = answer.json()
    return doc


def as_response(answer: Answer) -> Response:
    content_type = answer.content_type or "application/json"
    return Response(HTTPStatus(answer.status), answer.body, content_type)


def merge_pending(docs: dict[str, dict[str, Any]], start: int) -> dict[str, Any]:
    """The workers' ``/admin/pending`` answers (all for ``start``) as one."""
    total = replicas.sum_stats(docs)
    edge = max((d["histogram"].get("edge_ms", start) for d in docs.values()), default=start)
    return {
        "pending": total["pending"],
        "by_topic": total["by_topic"],
        "stores": [s for d in docs.values() for s in d.get("stores", [])],
        "histogram": {
            "start_ms": start,
            "by_minute": total["by_minute"],
            "by_hour": total["by_hour"],
            "edge_ms": edge,
        },
        "workers": total["replicas"],
    }


def merge_stats(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The workers' ``/admin/stats`` answers as one; each partition names its worker."""
    first = next(iter(docs.values()), {})
    return {
        "group": first.get("group"),
        "paused": sorted({p for d in docs.values() for p in d.get("paused", [])}),
        "backpressure": any(d.get("backpressure") for d in docs.values()),
        "in_flight": sum(int(d.get("in_flight", 0)) for d in docs.values()),
        "partitions": [p | {"worker": i} for i, d in docs.items() for p in d.get("partitions", [])],
        "workers": len(docs),
    }

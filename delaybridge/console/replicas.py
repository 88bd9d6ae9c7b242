"""The replicas' admin API, asked by the console: one call, or the same call on every replica.

The console fans out the way ``delaybridge pending list`` does
(:mod:`delaybridge.bridge.admin.replicas`): the replicas come from ``--url`` (repeatable)
or every address of ``--service NAME:PORT`` (the chart's headless service), resolved
again at each call so that pods that come and go are seen; each replica answers for
the partitions it owns. Unlike the CLI, the console must keep showing the replicas
that answer when one does not, so :meth:`Replicas.each` returns each replica's answer
or its :class:`ReplicaError` instead of stopping at the first failure; the pages say
which replica failed and never show a partial listing as complete.

Calls to several replicas run in parallel (a small thread pool), so a page waits for
the slowest replica, not for their sum. Thread-safe: the console's request threads
share one instance.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from delaybridge.bridge.admin.replicas import Fetch, replicas
from delaybridge.errors import DelayBridgeError

#: How long one replica may take to answer one call.
TIMEOUT_S = 10.0
#: Largest answer read from a replica (a page of 1,000 messages with values is ~1-2 MB).
MAX_ANSWER_BYTES = 32 * 1024 * 1024

Resolve = Callable[[Sequence[str], str | None], list[str]]
Transport = Callable[[str, str, Mapping[str, str], float], tuple[int, bytes]]
"""transport(full URL, method, headers, timeout) -> (HTTP status, body); OSError when
the replica cannot be reached."""


def urllib_transport(
    url: str, method: str, headers: Mapping[str, str], timeout_s: float
) -> tuple[int, bytes]:
    request = urllib.request.Request(url, method=method, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body: bytes = response.read(MAX_ANSWER_BYTES)
            return int(response.status), body
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(4096)
    except urllib.error.URLError as exc:
        raise OSError(str(exc.reason)) from exc


class ReplicaError(DelayBridgeError):
    """A replica that did not answer, or answered an error (``status``, 0 when unreachable)."""

    def __init__(self, url: str, status: int, message: str) -> None:
        super().__init__(f"replica {url}: {message}")
        self.url = url
        self.status = status


class Replicas:
    """The replicas of one delaybridge group, as the admin API reaches them."""

    def __init__(
        self,
        urls: Sequence[str],
        service: str | None,
        token: str,
        *,
        timeout_s: float = TIMEOUT_S,
        resolve: Resolve = replicas,
        transport: Transport = urllib_transport,
    ) -> None:
        self._urls = list(urls)
        self._service = service
        self._token = token
        self._timeout_s = timeout_s
        self._resolve = resolve
        self._transport = transport
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="console-replicas")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def urls(self) -> list[str]:
        """Every replica's base URL now (``--service`` resolved again)."""
        return self._resolve(self._urls, self._service)

    def call(
        self,
        url: str,
        method: str,
        path: str,
        params: Mapping[str, str] | None = None,
        *,
        token: bool = True,
    ) -> dict[str, Any]:
        """One admin call; its JSON answer, or :class:`ReplicaError` (404 included)."""
        text = self._send(url, method, path, params, token)
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ReplicaError(url, 200, f"{path} answered no JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise ReplicaError(url, 200, f"{path} answered {type(doc).__name__}, not an object")
        return doc

    def text(self, url: str, path: str) -> str:
        """A plain-text GET without the token (``/metrics`` is open)."""
        return self._send(url, "GET", path, None, False)

    def each(
        self, method: str, path: str, params: Mapping[str, str] | None = None
    ) -> dict[str, dict[str, Any] | ReplicaError]:
        """The same call on every replica, in parallel: each one's answer or error."""
        urls = self.urls()
        futures = {url: self._pool.submit(self.call, url, method, path, params) for url in urls}
        out: dict[str, dict[str, Any] | ReplicaError] = {}
        for url, future in futures.items():
            try:
                out[url] = future.result()
            except ReplicaError as exc:
                out[url] = exc
        return out

    def fetch(self) -> Fetch:
        """A GET in the shape :func:`~delaybridge.bridge.admin.replicas.list_page` takes."""

        def get(url: str, path: str, params: dict[str, str]) -> dict[str, Any]:
            return self.call(url, "GET", path, params)

        return get

    def _send(
        self,
        url: str,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        token: bool,
    ) -> str:
        query = urllib.parse.urlencode(dict(params or {}))
        target = f"{url}{path}" + (f"?{query}" if query else "")
        headers = {"Authorization": f"Bearer {self._token}"} if token and self._token else {}
        try:
            status, body = self._transport(target, method, headers, self._timeout_s)
        except (OSError, ValueError) as exc:
            raise ReplicaError(url, 0, f"cannot reach it for {path}: {exc}") from exc
        if status >= 400:
            detail = _error_text(body)
            raise ReplicaError(url, status, f"HTTP {status} on {path}: {detail}")
        return body.decode("utf-8", "replace")


def _error_text(body: bytes) -> str:
    """The admin API's ``{"error": ...}``, or the body's start."""
    text = body.decode("utf-8", "replace")
    try:
        doc = json.loads(text)
    except ValueError:
        return text[:300]
    error = doc.get("error") if isinstance(doc, dict) else None
    return error if isinstance(error, str) else text[:300]


def message_path(message_id: str) -> str:
    """``/admin/messages/<id>``, the id percent-encoded as one path segment."""
    return "/admin/messages/" + urllib.parse.quote(message_id, safe="")

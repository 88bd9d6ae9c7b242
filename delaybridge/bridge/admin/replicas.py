"""Asking every replica of a deployment, and merging their answers into one.

Each replica's admin API answers only for the stores it owns, so a cluster's pending
messages are the union of every replica's answer. Replicas come from URLs or, in
Kubernetes, from the chart's headless service ``<release>-delaybridge-headless``: every
A/AAAA record of ``NAME:PORT`` is one pod (:func:`replicas`). Listing pages merge by
position (:func:`~delaybridge.timerlog.list_cursor.merge`, the rule each replica uses for
its own stores), and the merged cursor resumes all replicas at once (:func:`list_page`);
counts and histograms add up bin by bin (:func:`sum_stats`). A replica that fails stops
the answer with an error naming it: a listing that silently left one out would look
complete. Used by ``delaybridge pending`` (``bridge/cli/pending.py``) and by a pod's
supervisor in front of its worker processes (``bridge/workers/fanout.py``).
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from delaybridge.bridge.admin.pending import filter_fingerprint, parse_position
from delaybridge.errors import DelayBridgeError
from delaybridge.timerlog.list_cursor import END, BadCursor, Cursor, SourcePage, merge
from delaybridge.timerlog.listing import Filter

Fetch = Callable[[str, str, dict[str, str]], dict[str, Any]]
"""fetch(replica URL, path, query parameters) -> the JSON answer."""


def replicas(urls: Sequence[str], service: str | None) -> list[str]:
    """The replicas' base URLs, each once: ``urls``, then every address of ``service``."""
    out = [u.rstrip("/") for u in urls]
    if service:
        name, sep, port = service.rpartition(":")
        if not sep or not name or not port.isdigit():
            raise DelayBridgeError(f"--service {service!r}: expected NAME:PORT")
        try:
            infos = socket.getaddrinfo(name, int(port), type=socket.SOCK_STREAM)
        except OSError as exc:
            raise DelayBridgeError(f"--service {service!r}: cannot resolve {name}: {exc}") from exc
        for family, *_, addr in infos:
            host = f"[{addr[0]}]" if family == socket.AF_INET6 else str(addr[0])
            out.append(f"http://{host}:{port}")
    unique = list(dict.fromkeys(out))
    if not unique:
        raise DelayBridgeError("name the replicas: --url URL (repeatable) or --service NAME:PORT")
    return unique


def http_fetch(token: str) -> Fetch:
    def fetch(url: str, path: str, params: dict[str, str]) -> dict[str, Any]:
        query = urllib.parse.urlencode(params)
        request = urllib.request.Request(f"{url}{path}" + (f"?{query}" if query else ""))
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                doc: dict[str, Any] = json.load(response)
                return doc
        except urllib.error.HTTPError as exc:
            body = exc.read().decode(errors="replace")[:500]
            raise DelayBridgeError(f"replica {url}: HTTP {exc.code} on {path}: {body}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise DelayBridgeError(f"replica {url}: cannot get {path}: {exc}") from exc

    return fetch


def list_page(
    fetch: Fetch, urls: Sequence[str], flt: Filter, limit: int, cursor: str | None, values: bool
) -> dict[str, Any]:
    """One merged page of every replica: ``messages``, ``cursor`` (None: the end),
    ``partial`` (a replica's work budget stopped it short; go on with the cursor)."""
    filters = filter_fingerprint(flt)
    params = {"limit": str(limit)}
    for name, value in (
        ("topic", flt.topic),
        ("due_from_ms", flt.due_from_ms),
        ("due_to_ms", flt.due_to_ms),
        ("id_prefix", flt.id_prefix),
        ("cursor", cursor),
    ):
        if value is not None:
            params[name] = str(value)
    if values:
        params["values"] = "true"
    bounds = {} if cursor is None else _decode(cursor, filters, "--cursor").roll_bounds
    pages: list[SourcePage[dict[str, Any]]] = []
    for url in urls:
        doc = fetch(url, "/admin/messages", params)
        try:
            nxt = END if doc["cursor"] is None else _decode(doc["cursor"], filters, url).after
            items = [(parse_position(m["position"], url), m) for m in doc["messages"]]
            bounds.update({str(k): int(v) for k, v in doc.get("roll_bounds", {}).items()})
        except (KeyError, TypeError, ValueError, BadCursor) as exc:
            raise DelayBridgeError(f"replica {url}: unexpected answer: {exc}") from exc
        pages.append(SourcePage(items, nxt))
    merged = merge(pages, limit)
    nxt_cursor = None if merged.next == END else Cursor(merged.next, bounds, filters).encode()
    return {
        "messages": [m for _, m in merged.items],
        "cursor": nxt_cursor,
        "partial": nxt_cursor is not None and len(merged.items) < limit,
        "replicas": list(urls),
    }


def _decode(text: str, filters: str, where: str) -> Cursor:
    try:
        return Cursor.decode(text, filters)
    except BadCursor as exc:
        raise DelayBridgeError(f"{where}: {exc}") from exc


def sum_stats(answers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The replicas' ``/admin/pending`` answers summed (histograms bin by bin)."""
    by_topic: dict[str, int] = {}
    minutes: list[int] = []
    hours: list[int] = []
    for url, doc in answers.items():
        try:
            for topic, n in doc["by_topic"].items():
                by_topic[topic] = by_topic.get(topic, 0) + int(n)
            for total, part in (
                (minutes, doc["histogram"]["by_minute"]),
                (hours, doc["histogram"]["by_hour"]),
            ):
                total.extend([0] * (len(part) - len(total)))
                for j, n in enumerate(part):
                    total[j] += int(n)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DelayBridgeError(f"replica {url}: unexpected answer: {exc!r}") from exc
    return {
        "pending": sum(by_topic.values()),
        "by_topic": dict(sorted(by_topic.items())),
        "by_minute": minutes,
        "by_hour": hours,
        "replicas": {url: doc.get("pending") for url, doc in answers.items()},
    }

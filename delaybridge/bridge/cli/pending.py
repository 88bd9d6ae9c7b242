"""``delaybridge pending list|stats``: ask every replica, merge the answers.

delaybridge pending list  (--url URL ... | --service NAME:PORT) [--token T] [--topic T]
                          [--due-from MS] [--due-to MS] [--id-prefix P] [--limit 100]
                          [--cursor C | --all] [--values] [--json]
delaybridge pending stats (--url URL ... | --service NAME:PORT) [--token T] [--json]

Each replica lists only the stores it owns, so a cluster's pending messages are the
union of every replica's answer. Replicas come from ``--url`` (repeatable) or, in
Kubernetes, from the chart's headless service ``<release>-delaybridge-headless``: every
A/AAAA record of ``--service NAME:PORT`` is one pod. Pages merge by position
(:func:`~delaybridge.timerlog.list_cursor.merge`, the rule each replica uses for its
own stores) and the printed cursor resumes all replicas at once. A replica that fails
stops the command with an error naming it: a listing that silently left one out would
look complete.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from delaybridge.bridge.admin.pending import DEFAULT_LIMIT, filter_fingerprint, parse_position
from delaybridge.errors import DelayBridgeError
from delaybridge.timerlog.list_cursor import END, BadCursor, Cursor, SourcePage, merge
from delaybridge.timerlog.listing import Filter

Fetch = Callable[[str, str, dict[str, str]], dict[str, Any]]
"""fetch(replica URL, path, query parameters) -> the JSON answer."""


def register(commands: Any) -> None:
    pending = commands.add_parser("pending", help="list or count pending messages (all replicas)")
    sub = pending.add_subparsers(dest="pending_command", required=True)
    listing = sub.add_parser("list", help="pending messages in due order, merged")
    _replica_options(listing)
    listing.add_argument("--topic", help="only messages for this target topic")
    listing.add_argument("--due-from", type=int, help="due at or after (epoch ms)")
    listing.add_argument("--due-to", type=int, help="due before (epoch ms)")
    listing.add_argument("--id-prefix", help="only ids starting with this")
    listing.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="messages per page")
    where = listing.add_mutually_exclusive_group()
    where.add_argument("--cursor", help="resume after the page that printed this cursor")
    where.add_argument("--all", action="store_true", help="every page to the end")
    listing.add_argument("--values", action="store_true", help="include values (base64)")
    listing.set_defaults(handler=_list)
    stats = sub.add_parser("stats", help="pending counts per target topic and due histogram")
    _replica_options(stats)
    stats.set_defaults(handler=_stats)


def _replica_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", action="append", default=[], help="a replica (repeatable)")
    parser.add_argument(
        "--service", help="NAME:PORT of the headless service: every address is a replica"
    )
    parser.add_argument("--token", default=os.environ.get("DELAYBRIDGE_HTTP__ADMIN_TOKEN", ""))
    parser.add_argument("--json", action="store_true", help="JSON instead of a table")


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


def _list(args: argparse.Namespace) -> int:
    urls = replicas(args.url, args.service)
    fetch = http_fetch(args.token)
    flt = Filter(args.topic, args.due_from, args.due_to, args.id_prefix)
    cursor: str | None = args.cursor
    while True:
        page = list_page(fetch, urls, flt, args.limit, cursor, args.values)
        if args.json:
            print(json.dumps(page), flush=True)
        else:
            _print_table(page["messages"])
        cursor = page["cursor"]
        if not args.all or cursor is None:
            break
    if not args.json:
        print(f"next cursor: {cursor}" if cursor else "(end of the listing)", file=sys.stderr)
    return 0


def _print_table(messages: list[dict[str, Any]]) -> None:
    for m in messages:
        due = datetime.fromtimestamp(m["due_ms"] / 1000, UTC).isoformat(timespec="milliseconds")
        rolled = " (rolled)" if m.get("rolled") else ""
        print(f"{due}  {m['id']}  -> {m['target_topic']}  [{m['origin']}]{rolled}")


def _stats(args: argparse.Namespace) -> int:
    urls = replicas(args.url, args.service)
    fetch = http_fetch(args.token)
    start = str(int(datetime.now(UTC).timestamp() * 1000))
    total = sum_stats({url: fetch(url, "/admin/pending", {"start_ms": start}) for url in urls})
    if args.json:
        print(json.dumps(total, indent=2))
        return 0
    print(f"pending: {total['pending']} on {len(urls)} replicas")
    for topic, n in total["by_topic"].items():
        print(f"  {topic}: {n}")
    print("next hour, by minute (minute: count, empty minutes left out):")
    print("  " + ", ".join(f"{j}: {n}" for j, n in enumerate(total["by_minute"]) if n))
    print("by hour from now (hour: count):")
    print("  " + ", ".join(f"{j}: {n}" for j, n in enumerate(total["by_hour"]) if n))
    return 0

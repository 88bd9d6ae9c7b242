"""``delaybridge pending list|stats``: ask every replica, merge the answers.

delaybridge pending list  (--url URL ... | --service NAME:PORT) [--token T] [--topic T]
                          [--due-from MS] [--due-to MS] [--id-prefix P] [--limit 100]
                          [--cursor C | --all] [--values] [--json]
delaybridge pending stats (--url URL ... | --service NAME:PORT) [--token T] [--json]

Each replica lists only the stores it owns, so a cluster's pending messages are the
union of every replica's answer: replicas come from ``--url`` (repeatable) or, in
Kubernetes, ``--service NAME:PORT`` (the chart's headless service), and their answers are
merged by ``bridge/admin/replicas.py``; the printed cursor resumes all replicas at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

from delaybridge.bridge.admin.pending import DEFAULT_LIMIT
from delaybridge.bridge.admin.replicas import http_fetch, list_page, replicas, sum_stats
from delaybridge.timerlog.listing import Filter


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

"""``/messages``: pending messages by target topic, id prefix and due range, paged.

One page merges every replica's ``/admin/messages`` page by position, exactly as
``delaybridge pending list`` does (:func:`~delaybridge.bridge.admin.replicas.list_page`),
and its cursor resumes every replica. A replica's page stops after a bounded amount of
work, so a selective filter (a rare id prefix) can come back short; this page then asks
again with the cursor, up to ``ROUNDS`` times, before it shows what it has and offers
the next page. A replica that fails fails the page, naming it: a listing that silently
left one replica out would look complete.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, render_template, request

from delaybridge.bridge.admin.replicas import list_page
from delaybridge.console.formatting import BadInput, parse_time
from delaybridge.console.pages.common import context
from delaybridge.errors import DelayBridgeError
from delaybridge.timerlog.listing import Filter

PAGE_SIZE = 50
ROUNDS = 20
NOTICES = {
    "cancelled": "Cancelled",
    "rescheduled": "Rescheduled",
    "prefix-cancelled": "Cancelled every message with the id prefix",
}


def register(app: Flask) -> None:
    app.add_url_rule("/messages", "browse", _browse)


def _browse() -> tuple[str, int] | str:
    ctx = context()
    args = request.args
    form = {
        name: (args.get(name) or "").strip()
        for name in ("topic", "id_prefix", "due_from", "due_to")
    }
    notice = None
    if (done := args.get("notice")) in NOTICES and args.get("id"):
        notice = f"{NOTICES[done]} {args['id']!r}."
    try:
        flt = Filter(
            topic=form["topic"] or None,
            due_from_ms=parse_time(form["due_from"], "due_from"),
            due_to_ms=parse_time(form["due_to"], "due_to"),
            id_prefix=form["id_prefix"] or None,
        )
        due_from, due_to = flt.due_from_ms, flt.due_to_ms
        if due_from is not None and due_to is not None and due_to <= due_from:
            raise BadInput("due_to", "'due before' must be after 'due from'")
    except BadInput as exc:
        return render_template("messages.html", form=form, error=str(exc), page=None), 400
    try:
        page = collect(ctx.replicas, flt, args.get("cursor") or None)
    except DelayBridgeError as exc:
        return render_template("messages.html", form=form, error=str(exc), page=None), 502
    return render_template("messages.html", form=form, error=None, page=page, notice=notice)


def collect(replicas: Any, flt: Filter, cursor: str | None) -> dict[str, Any]:
    """Up to ``PAGE_SIZE`` messages from ``cursor`` on, asking again while pages come back
    short (``partial``) for at most ``ROUNDS`` rounds; the cursor to go on from."""
    urls = replicas.urls()
    fetch = replicas.fetch()
    messages: list[dict[str, Any]] = []
    partial = False
    for _ in range(ROUNDS):
        page = list_page(fetch, urls, flt, PAGE_SIZE - len(messages), cursor, False)
        messages.extend(page["messages"])
        cursor = page["cursor"]
        partial = bool(page["partial"])
        if cursor is None or len(messages) >= PAGE_SIZE:
            break
    return {"messages": messages, "cursor": cursor, "partial": partial, "replicas": urls}

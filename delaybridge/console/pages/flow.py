"""``/pause``: pause and resume ingest (``enqueue``) or delivery (``dequeue``).

A pause is per replica and held in its memory (docs/operations.md): the page shows each
replica's state and changes all replicas at once, or one. The replica named in a form
must be one the console knows (``--url``/``--service``): the console never sends its
token anywhere a form says.
"""

from __future__ import annotations

from flask import Flask, redirect, render_template, request
from werkzeug.wrappers.response import Response as BaseResponse

from delaybridge.console.audit import Action, Outcome
from delaybridge.console.cluster_view import merge
from delaybridge.console.pages.common import (
    audit,
    context,
    error_page,
    now_ms,
    refuse_if_read_only,
)
from delaybridge.console.replicas import ReplicaError

DIRECTIONS = ("enqueue", "dequeue")
ALL = "all"


def register(app: Flask) -> None:
    app.add_url_rule("/pause", "flow", _show)
    app.add_url_rule("/pause", "flow_change", _change, methods=["POST"])


def _show() -> str:
    ctx = context()
    stats = ctx.replicas.each("GET", "/admin/stats")
    view = merge(stats, None, now_ms())
    return render_template("flow.html", view=view, directions=DIRECTIONS)


def _change() -> BaseResponse | tuple[str, int]:
    ctx = context()
    action = Action.RESUME if request.form.get("action") == "resume" else Action.PAUSE
    direction = request.form.get("direction") or ""
    replica = request.form.get("replica") or ALL
    target = f"{direction} on {replica}"
    refused = refuse_if_read_only(action, target)
    if refused is not None:
        return refused
    if request.form.get("action") not in ("pause", "resume") or direction not in DIRECTIONS:
        return error_page(
            400, "Pause or resume what? action=pause|resume, direction=enqueue|dequeue"
        )
    known = ctx.replicas.urls()
    if replica != ALL and replica not in known:
        audit(action, Outcome.REFUSED, target, "not a replica of this console")
        return error_page(400, f"{replica!r} is not one of this console's replicas.")
    urls = known if replica == ALL else [replica]
    failed = []
    for url in urls:
        try:
            ctx.replicas.call(url, "POST", f"/admin/{action.value}", {"direction": direction})
        except ReplicaError as exc:
            failed.append(str(exc))
    if failed:
        audit(action, Outcome.FAILED, target, "; ".join(failed))
        return error_page(502, f"{action.value} {direction} failed on: " + "; ".join(failed))
    audit(action, Outcome.OK, target, f"{len(urls)} replica(s)")
    return redirect("/pause")

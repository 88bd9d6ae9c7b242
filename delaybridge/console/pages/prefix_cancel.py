"""``POST /messages/cancel-prefix``: cancel every pending message whose id starts with a
prefix, on every replica, after the operator confirmed how many.

Two steps, as the admin API wants a bulk cancel confirmed
(``DELETE /admin/messages?id_prefix=``, docs/design/cancels.md):

1. without ``confirm``: every replica is asked for its count (``dry_run=true``); the page
   shows them and their total, and a form that confirms that total;
2. with ``confirm=<total>``: every replica cancels with that confirmation (each replica's
   count is at most the total; one whose count grew past it since answers 409, shown as
   an error, and cancels nothing). Each replica applies the cancel at once and publishes
   it to the cancel topic, so all of them apply it by the same rule.

Refused in read-only mode, audited (``cancel-prefix``) and counted like the other changes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from flask import Flask, redirect, render_template, request
from werkzeug.wrappers.response import Response as BaseResponse

from delaybridge.console.audit import Action, Outcome
from delaybridge.console.pages.common import audit, context, error_page, refuse_if_read_only
from delaybridge.console.replicas import ReplicaError

PATH = "/admin/messages"


def register(app: Flask) -> None:
    app.add_url_rule("/messages/cancel-prefix", "cancel_prefix", _cancel_prefix, methods=["POST"])


def _cancel_prefix() -> BaseResponse | tuple[str, int] | str:
    prefix = (request.form.get("id_prefix") or "").strip()
    topic = (request.form.get("topic") or "").strip()
    refused = refuse_if_read_only(Action.CANCEL_PREFIX, prefix)
    if refused is not None:
        return refused
    if not prefix:
        return error_page(400, "An empty prefix would cancel every message: give one.")
    params = {"id_prefix": prefix} | ({"target_topic": topic} if topic else {})
    confirm = request.form.get("confirm")
    if confirm is None:
        return _ask(prefix, topic, params)
    if not confirm.isdigit():
        return error_page(400, f"confirm must be a count, not {confirm[:40]!r}.")
    answers = context().replicas.each("DELETE", PATH, params | {"confirm": confirm})
    errors = [str(a) for a in answers.values() if isinstance(a, ReplicaError)]
    count = sum(int(a.get("count", 0)) for a in answers.values() if isinstance(a, dict))
    detail = f"{count} cancelled on {len(answers) - len(errors)} replica(s), confirmed {confirm}"
    if errors:
        audit(Action.CANCEL_PREFIX, Outcome.FAILED, prefix, f"{detail}; {'; '.join(errors)}")
        return error_page(502, f"Not every replica cancelled ({detail}): {'; '.join(errors)}")
    audit(Action.CANCEL_PREFIX, Outcome.OK, prefix, detail)
    notice = {"notice": "prefix-cancelled", "id": prefix, "count": str(count)}
    return redirect("/messages?" + urlencode({"id_prefix": prefix, "topic": topic} | notice))


def _ask(prefix: str, topic: str, params: dict[str, str]) -> tuple[str, int] | str:
    """Step 1: every replica's count, and the form that confirms their total."""
    answers = context().replicas.each("DELETE", PATH, params | {"dry_run": "true"})
    counts: dict[str, Any] = {}
    errors = []
    for url, answer in sorted(answers.items()):
        if isinstance(answer, ReplicaError):
            errors.append(str(answer))
        else:
            counts[url] = int(answer.get("count", 0))
    if errors:
        return error_page(502, f"Could not count on every replica: {'; '.join(errors)}")
    return render_template(
        "cancel_prefix.html",
        prefix=prefix,
        topic=topic,
        counts=counts,
        total=sum(counts.values()),
    )

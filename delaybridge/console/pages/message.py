"""``/message?id=``: one pending message; cancel it, or reschedule it.

The message is looked up on every replica (``GET /admin/messages/<id>``); the one that
holds it owns its partition. **Cancel** sends ``DELETE /admin/messages/<id>`` to that
replica, which applies it at once and publishes it to the cancel topic for the others.
**Reschedule** writes a replacing record to the message's delay topic with the
console's own producer (:mod:`~delaybridge.console.reschedule`): same ``delay-id``, new
``deliver-at-ms``, and the sidecars' replace rule does the rest. Both are refused in
read-only mode, audited, and counted in the console's ``/metrics``.

Values are fetched for the page only when previews are on (``--value-preview``); a
reschedule always fetches the value (the replacing record must carry it) but never
shows it.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from flask import Flask, redirect, render_template, request
from werkzeug.wrappers.response import Response as BaseResponse

from delaybridge.console.audit import Action, Outcome
from delaybridge.console.formatting import BadInput, parse_when, preview_b64, utc
from delaybridge.console.pages.common import (
    audit,
    context,
    error_page,
    now_ms,
    refuse_if_read_only,
)
from delaybridge.console.replicas import ReplicaError, message_path
from delaybridge.console.reschedule import CannotReschedule, replacement
from delaybridge.errors import DelayBridgeError

NOTICES = {"rescheduled": "Rescheduled: a replacing record was written to {ref}."}
#: topic/partition/offset, as a RecordRef prints: the only ``ref`` a notice shows.
_REF = re.compile(r"[\w.\-]{1,249}/\d{1,10}/\d{1,20}")


def register(app: Flask) -> None:
    app.add_url_rule("/message", "message", _show)
    app.add_url_rule("/message/cancel", "cancel", _cancel, methods=["POST"])
    app.add_url_rule("/message/reschedule", "reschedule", _reschedule, methods=["POST"])


def find(message_id: str, values: bool) -> tuple[str | None, dict[str, Any] | None, list[str]]:
    """Which replica holds ``message_id``: (its URL, the look-up, other replicas' errors)."""
    params = {"values": "true"} if values else None
    answers = context().replicas.each("GET", message_path(message_id), params)
    errors: list[str] = []
    for url, answer in sorted(answers.items()):
        if isinstance(answer, ReplicaError):
            if answer.status != 404:
                errors.append(str(answer))
            continue
        return url, answer, errors
    return None, None, errors


def _not_pending(message_id: str, errors: list[str]) -> tuple[str, int]:
    text = (
        f"No replica holds a pending message with id {message_id!r}: "
        "it was delivered, cancelled or never sent."
    )
    if errors:
        text += " Some replicas did not answer, so it may be there: " + "; ".join(errors)
    return error_page(404, text, title="Not pending")


def _show() -> tuple[str, int] | str:
    ctx = context()
    message_id = request.args.get("id") or ""
    if not message_id:
        return error_page(400, "Which message? /message?id=<delay-id>")
    owner, found, errors = find(message_id, ctx.settings.value_preview)
    if found is None:
        return _not_pending(message_id, errors)
    preview = None
    if ctx.settings.value_preview and "value" in found:
        preview = preview_b64(found["value"], ctx.settings.preview_bytes)
    notice = None
    ref = request.args.get("ref") or ""
    if request.args.get("notice") == "rescheduled" and _REF.fullmatch(ref):
        notice = NOTICES["rescheduled"].format(ref=ref)
    return render_template(
        "message.html",
        message=found,
        owner=owner,
        errors=errors,
        preview=preview,
        notice=notice,
        error=None,
    )


def _cancel() -> BaseResponse | tuple[str, int]:
    ctx = context()
    message_id = request.form.get("id") or ""
    refused = refuse_if_read_only(Action.CANCEL, message_id)
    if refused is not None:
        return refused
    if not message_id:
        return error_page(400, "Which message? The form had no id.")
    owner, found, errors = find(message_id, False)
    if owner is None or found is None:
        audit(Action.CANCEL, Outcome.FAILED, message_id, "not pending on any replica")
        return _not_pending(message_id, errors)
    try:
        result = ctx.replicas.call(
            owner, "DELETE", message_path(message_id), {"target_topic": found["target_topic"]}
        )
    except ReplicaError as exc:
        audit(Action.CANCEL, Outcome.FAILED, message_id, str(exc))
        return error_page(502, f"The cancel failed: {exc}")
    audit(
        Action.CANCEL,
        Outcome.OK,
        message_id,
        f"at {owner}: matched_here={result.get('matched_here')}, "
        f"published={result.get('published')}, was due {utc(found.get('due_ms'))}",
    )
    return redirect(
        "/messages?" + urlencode({"id_prefix": message_id, "notice": "cancelled", "id": message_id})
    )


def _reschedule() -> BaseResponse | tuple[str, int] | str:
    ctx = context()
    message_id = request.form.get("id") or ""
    refused = refuse_if_read_only(Action.RESCHEDULE, message_id)
    if refused is not None:
        return refused
    if not message_id:
        return error_page(400, "Which message? The form had no id.")
    owner, found, errors = find(message_id, True)
    if found is None:
        audit(Action.RESCHEDULE, Outcome.FAILED, message_id, "not pending on any replica")
        return _not_pending(message_id, errors)
    try:
        due_ms = parse_when(request.form.get("when") or "", now_ms(), "when")
        record = replacement(found, due_ms)
        ref = ctx.rescheduler.send(record)
    except (BadInput, CannotReschedule) as exc:
        audit(Action.RESCHEDULE, Outcome.REFUSED, message_id, str(exc))
        found.pop("value", None)
        page = render_template(
            "message.html",
            message=found,
            owner=owner,
            errors=errors,
            preview=None,
            notice=None,
            error=str(exc),
        )
        return page, 400
    except DelayBridgeError as exc:  # Kafka refused or timed out (KafkaClientError, ...)
        audit(Action.RESCHEDULE, Outcome.FAILED, message_id, str(exc))
        return error_page(502, f"The replacing record was not written: {exc}")
    audit(
        Action.RESCHEDULE,
        Outcome.OK,
        message_id,
        f"from {utc(found.get('due_ms'))} to {utc(due_ms)}: record {ref}",
    )
    return redirect(
        "/message?" + urlencode({"id": message_id, "notice": "rescheduled", "ref": str(ref)})
    )

"""What the pages share: the context, the session's name, audit, errors, read-only mode."""

from __future__ import annotations

import time

from flask import current_app, g, render_template, request

from delaybridge.console.audit import Action, Outcome
from delaybridge.console.auth import Session
from delaybridge.console.context import ConsoleContext

EXTENSION = "delaybridge.console"


def context() -> ConsoleContext:
    ctx: ConsoleContext = current_app.extensions[EXTENSION]
    return ctx


def now_ms() -> int:
    return int(time.time() * 1000)


def session() -> Session | None:
    found: Session | None = g.get("session")
    return found


def remote() -> str:
    return request.remote_addr or "unknown"


def audit(action: Action, outcome: Outcome, target: str | None, detail: str | None = None) -> None:
    """An audit line (and the metric) for the current request's session."""
    s = session()
    context().audit.record(
        action,
        outcome,
        who=s.who if s is not None else "(no session)",
        session=s.fingerprint if s is not None else None,
        remote=remote(),
        target=target,
        detail=detail,
    )


def error_page(status: int, message: str, title: str | None = None) -> tuple[str, int]:
    return render_template("error.html", status=status, message=message, title=title), status


def refuse_if_read_only(action: Action, target: str | None) -> tuple[str, int] | None:
    """A 403 page (audited) when the console runs read-only; None when changes are allowed."""
    if not context().settings.read_only:
        return None
    audit(action, Outcome.REFUSED, target, "read-only mode")
    return error_page(403, "Refused: this console is read-only (started with --read-only).")

"""The console's Flask application: the gate every request passes, and the pages.

Every request goes through :func:`_gate` first:

1. the open endpoints (``/login``, ``/static/...``, ``/healthz``, ``/metrics``) pass;
2. any POST from another origin is refused (403), before anything else is looked at;
3. without a live session, a page redirects to ``/login`` and a POST is refused (401);
4. a POST without the session's CSRF token is refused (403) and audited.

The pages (``pages/``) then only decide what to show or change; a change also asks
:func:`~delaybridge.console.pages.common.refuse_if_read_only`. Every answer carries
security headers (:func:`_secure`): a Content-Security-Policy that allows no script and
nothing from another origin, no framing, no caching, no referrer to other sites.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import Flask, Response, g, redirect, request, url_for
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.wrappers.response import Response as BaseResponse

from delaybridge.console import formatting
from delaybridge.console.audit import Action, Outcome
from delaybridge.console.auth import COOKIE, FIELD, same_origin, token_matches
from delaybridge.console.context import ConsoleContext
from delaybridge.console.pages import (
    browse,
    common,
    dead_letters,
    flow,
    login,
    message,
    open_endpoints,
    overview,
    prefix_cancel,
)

log = logging.getLogger(__name__)

#: Request bodies are small forms; anything larger is refused (413).
MAX_BODY_BYTES = 64 * 1024
OPEN = frozenset({"login", "static", "healthz", "metrics"})
#: The changes each POST endpoint makes, for the audit line of a refused one.
CHANGE_OF = {
    "cancel": Action.CANCEL,
    "cancel_prefix": Action.CANCEL_PREFIX,
    "reschedule": Action.RESCHEDULE,
    "flow_change": None,
}

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)


def create_app(ctx: ConsoleContext) -> Flask:
    app = Flask(__name__, static_folder="static", template_folder="templates")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.config["TEMPLATES_AUTO_RELOAD"] = False
    if ctx.settings.proxy_hops:
        hops = ctx.settings.proxy_hops
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops, x_port=hops
        )
    app.extensions[common.EXTENSION] = ctx
    app.jinja_env.autoescape = True
    app.jinja_env.filters.update(
        utc=formatting.utc, size=formatting.size, local_input=formatting.local_input
    )
    app.before_request(_gate)
    app.after_request(_secure)
    app.context_processor(_page_context)
    pages = (open_endpoints, login, overview, browse, message, prefix_cancel, dead_letters, flow)
    for page in pages:
        page.register(app)
    for status in (400, 403, 404, 405, 413, 500):
        app.register_error_handler(status, _error)
    return app


def _gate() -> BaseResponse | tuple[str, int] | None:
    ctx = common.context()
    g.session = None
    g.started_s = time.monotonic()
    if request.endpoint in OPEN and request.method != "POST":
        return None
    if request.method == "POST" and not same_origin(
        request.host_url, request.headers.get("Origin"), request.headers.get("Referer")
    ):
        log.warning("refused a POST to %s from another origin", request.path)
        return common.error_page(403, "Refused: this request came from another site.")
    if request.endpoint == "login":
        return None
    session = ctx.sessions.get(request.cookies.get(COOKIE))
    if session is None:
        if request.method == "GET":
            return redirect(url_for("login", next=request.full_path.rstrip("?")))
        return common.error_page(401, "Your session has ended: log in again.")
    g.session = session
    if request.method == "POST" and not token_matches(session.csrf_token, request.form.get(FIELD)):
        action = CHANGE_OF.get(request.endpoint or "")
        if request.endpoint == "flow_change":
            action = Action.RESUME if request.form.get("action") == "resume" else Action.PAUSE
        if action is not None:
            common.audit(action, Outcome.REFUSED, request.form.get("id"), "no valid CSRF token")
        return common.error_page(
            403, "Refused: the form's CSRF token is missing or wrong. Reload the page and retry."
        )
    return None


def _secure(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    # same-origin, not no-referrer: under no-referrer browsers send "Origin: null" with
    # a form's POST, and the origin check could no longer tell our own pages apart.
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Cross-Origin-Opener-Policy"] = "same-origin"
    if request.endpoint != "static":
        response.headers["Cache-Control"] = "no-store"
    return response


def _page_context() -> dict[str, Any]:
    ctx = common.context()
    session = g.get("session")
    now = common.now_ms()
    return {
        "relative": lambda ms: formatting.relative(ms, now),
        "session": session,
        "csrf_field": FIELD,
        "csrf_token": session.csrf_token if session is not None else "",
        "read_only": ctx.settings.read_only,
        "value_preview": ctx.settings.value_preview,
        "now_ms": now,
    }


def _error(exc: Any) -> tuple[str, int]:
    code = int(getattr(exc, "code", 500) or 500)
    if code == 500:
        log.error("console request %s %s failed", request.method, request.path, exc_info=exc)
        return common.error_page(500, "Internal error (logged).")
    return common.error_page(code, str(getattr(exc, "description", "")) or "Error.")

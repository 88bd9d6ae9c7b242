"""``/login`` and ``/logout``: the admin token becomes a session cookie.

The token is compared in constant time with the console's own copy (the replicas'
``http.admin_token``). A success starts a new session (a new id at every login, so a
session id planted before the login is worthless) whose id goes into an ``HttpOnly``,
``SameSite=Strict`` cookie, ``Secure`` unless configured otherwise; the token goes
nowhere else. Failures are throttled per client address and audited, as are logins
and logouts. ``next`` (where to go after the login) is only ever a path of this
console, never another site.
"""

from __future__ import annotations

import hmac

from flask import Flask, redirect, render_template, request, url_for
from werkzeug.wrappers.response import Response as BaseResponse

from delaybridge.console.audit import Action, Outcome
from delaybridge.console.auth import COOKIE
from delaybridge.console.pages.common import audit, context, remote, session

MAX_NAME = 64


def register(app: Flask) -> None:
    app.add_url_rule("/login", "login", _login, methods=["GET", "POST"])
    app.add_url_rule("/logout", "logout", _logout, methods=["POST"])


def _next_path() -> str:
    target = request.values.get("next") or "/"
    # A local path only: "//evil.example" or "https://..." would leave the console.
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _login() -> BaseResponse | tuple[str, int] | str:
    ctx = context()
    if request.method == "GET":
        return render_template("login.html", next=_next_path(), error=None, who="")
    who = " ".join((request.form.get("who") or "").split())[:MAX_NAME] or "operator"
    address = remote()
    wait_s = ctx.throttle.wait_s(address)
    if wait_s > 0:
        ctx.audit.record(
            Action.LOGIN,
            Outcome.REFUSED,
            who=who,
            session=None,
            remote=address,
            detail=f"throttled: {wait_s:.0f} s to wait",
        )
        error = f"Too many failed logins from {address}: try again in {wait_s:.0f} s."
        return render_template("login.html", next=_next_path(), error=error, who=who), 429
    given = (request.form.get("token") or "").encode()
    if not hmac.compare_digest(given, ctx.settings.token.encode()):
        ctx.throttle.failed(address)
        ctx.audit.record(
            Action.LOGIN,
            Outcome.REFUSED,
            who=who,
            session=None,
            remote=address,
            detail="wrong admin token",
        )
        error = "That is not the admin token."
        return render_template("login.html", next=_next_path(), error=error, who=who), 401
    ctx.throttle.succeeded(address)
    session_id, created = ctx.sessions.create(who, address)
    ctx.audit.record(Action.LOGIN, Outcome.OK, who=who, session=created.fingerprint, remote=address)
    response = redirect(_next_path())
    response.set_cookie(
        COOKIE,
        session_id,
        httponly=True,
        samesite="Strict",
        secure=ctx.settings.secure_cookie,
        path="/",
    )
    return response


def _logout() -> BaseResponse:
    ctx = context()
    if session() is not None:
        audit(Action.LOGOUT, Outcome.OK, None)
    ctx.sessions.end(request.cookies.get(COOKIE))
    response = redirect(url_for("login"))
    response.delete_cookie(COOKIE, path="/", samesite="Strict", secure=ctx.settings.secure_cookie)
    return response

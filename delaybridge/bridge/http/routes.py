"""What each HTTP endpoint answers: a pure ``Request -> Response`` router.

The transport (``bridge/http/server.py``) parses a request into a :class:`Request` and writes
back the :class:`Response`; everything an operator sees — status codes, JSON bodies,
the admin token check — is decided here, without sockets, so it reads top to bottom.

Endpoints (docs/operations.md has curl examples):

- ``GET /metrics`` — Prometheus text (or OpenMetrics when the scraper asks for it).
- ``GET /healthz`` — 200 while the service loop is alive, else 503.
- ``GET /readyz`` — 200 once partitions are assigned and stores recovered, else 503
  with the reason; either way with ``conditions`` an operator should know of (ingest
  paused for want of disk space) when there are any.
- ``/admin/...`` — stats, message look-up and cancel (by id, or in bulk by id prefix:
  ``DELETE /admin/messages?id_prefix=``, 409 above the cap until confirmed),
  pause/resume, the listing of pending messages and their counts
  (``bridge/admin/pending.py``); requires ``Authorization: Bearer <token>`` whenever a
  token is configured, checked before routing so an unauthenticated caller learns
  nothing about paths.

Errors are JSON ``{"error": ...}``; a bad parameter adds ``"parameter": <name>``.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import orjson
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from delaybridge.bridge.admin import pending
from delaybridge.bridge.admin.control import (
    BadRequest,
    ConfirmRequired,
    Control,
    ControlTimeout,
)
from delaybridge.bridge.flow import Direction
from delaybridge.errors import DelayBridgeError

log = logging.getLogger(__name__)

JSON = "application/json"
MESSAGES_PREFIX = "/admin/messages/"


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    #: Percent-encoded path without the query string.
    path: str
    query: Mapping[str, list[str]]
    authorization: str | None = None
    accept: str | None = None


@dataclass(frozen=True, slots=True)
class Response:
    status: HTTPStatus
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()


def json_response(status: HTTPStatus, payload: Any) -> Response:
    body = orjson.dumps(payload, default=_json_default, option=orjson.OPT_NON_STR_KEYS)
    return Response(status, body)


def error_response(status: HTTPStatus, message: str, **extra: str) -> Response:
    return json_response(status, {"error": message, **extra})


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


class Router:
    """Maps requests to the service's :class:`Control` and the metrics registry."""

    def __init__(self, control: Control, registry: CollectorRegistry, admin_token: str) -> None:
        self._control = control
        self._registry = registry
        self._token = admin_token.encode()
        self._admin: dict[str, dict[str, Callable[[Request], Response]]] = {
            "/admin/stats": {"GET": self._stats},
            "/admin/paused": {"GET": self._paused},
            "/admin/pause": {"POST": self._pause},
            "/admin/resume": {"POST": self._resume},
            "/admin/messages": {"GET": self._list, "DELETE": self._cancel_prefix},
            "/admin/pending": {"GET": self._pending},
        }

    def handle(self, request: Request) -> Response:
        """Answer one request; never raises (failures become 4xx/5xx JSON)."""
        try:
            return self._dispatch(request)
        except BadRequest as exc:
            return error_response(HTTPStatus.BAD_REQUEST, str(exc), parameter=exc.parameter)
        except ConfirmRequired as exc:
            doc = {"error": str(exc), "count": exc.count, "confirm_above": exc.cap}
            return json_response(HTTPStatus.CONFLICT, doc)
        except ControlTimeout as exc:
            return error_response(HTTPStatus.SERVICE_UNAVAILABLE, str(exc))
        except DelayBridgeError as exc:
            log.warning("%s %s failed: %s", request.method, request.path, exc)
            return error_response(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc))
        except Exception:
            # A bug in the service or here must not kill the HTTP thread; it is logged
            # with its traceback and the client gets a generic 500.
            log.exception("%s %s failed", request.method, request.path)
            return error_response(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error")

    def _dispatch(self, request: Request) -> Response:
        path = request.path
        if path == "/metrics":
            return self._only(request, "GET") or self._metrics(request)
        if path == "/healthz":
            return self._only(request, "GET") or self._healthz(request)
        if path == "/readyz":
            return self._only(request, "GET") or self._readyz(request)
        if path == "/admin" or path.startswith("/admin/"):
            return self._authorize(request) or self._admin_route(request)
        return error_response(HTTPStatus.NOT_FOUND, f"no such endpoint: {path}")

    def _admin_route(self, request: Request) -> Response:
        if request.path.startswith(MESSAGES_PREFIX):
            return self._message(request)
        methods = self._admin.get(request.path)
        if methods is None:
            return error_response(HTTPStatus.NOT_FOUND, f"no such endpoint: {request.path}")
        handler = methods.get(request.method)
        if handler is None:
            return _not_allowed(request, *methods)
        return handler(request)

    # --- open endpoints ---
    def _metrics(self, request: Request) -> Response:
        # Query parameters are ignored here: a scrape config may add some (``params:``).
        encoder, content_type = choose_encoder(request.accept or "")
        return Response(HTTPStatus.OK, encoder(self._registry), content_type)

    def _healthz(self, request: Request) -> Response:
        _params(request)
        healthy = self._control.healthy()
        status = HTTPStatus.OK if healthy else HTTPStatus.SERVICE_UNAVAILABLE
        return json_response(status, {"healthy": healthy})

    def _readyz(self, request: Request) -> Response:
        _params(request)
        ready, why = self._control.ready()
        doc: dict[str, Any] = {"ready": True} if ready else {"ready": False, "reason": why}
        conditions = self._control.conditions()
        if conditions:  # e.g. ingest paused for disk space: ready all the same
            doc["conditions"] = conditions
        return json_response(HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE, doc)

    # --- admin ---
    def _authorize(self, request: Request) -> Response | None:
        if not self._token:
            return None  # settings allow no token only on a loopback address
        scheme, _, given = (request.authorization or "").partition(" ")
        # compare_digest: the time taken must not reveal how much of the token matched.
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self._token):
            return None
        denied = error_response(
            HTTPStatus.UNAUTHORIZED,
            "admin API requires Authorization: Bearer <http.admin_token>",
        )
        return replace(denied, headers=(("WWW-Authenticate", 'Bearer realm="delaybridge-admin"'),))

    def _stats(self, request: Request) -> Response:
        _params(request)
        return json_response(HTTPStatus.OK, self._control.stats())

    def _paused(self, request: Request) -> Response:
        _params(request)
        return json_response(HTTPStatus.OK, {"paused": self._control.paused()})

    def _pause(self, request: Request) -> Response:
        self._control.pause(_direction(request))
        return json_response(HTTPStatus.OK, {"paused": self._control.paused()})

    def _resume(self, request: Request) -> Response:
        self._control.resume(_direction(request))
        return json_response(HTTPStatus.OK, {"paused": self._control.paused()})

    def _list(self, request: Request) -> Response:
        query = pending.parse_query(_params(request, *pending.LIST_PARAMETERS))
        return json_response(HTTPStatus.OK, self._control.list_pending(query))

    def _cancel_prefix(self, request: Request) -> Response:
        """``DELETE /admin/messages?id_prefix=P[&target_topic=T][&confirm=N]``: a bulk
        cancel; above the cap, 409 with the count until ``confirm`` is at least it;
        ``dry_run=true``: the count only, nothing cancelled (never 409)."""
        params = _params(request, "id_prefix", "target_topic", "confirm", "dry_run")
        prefix = params.get("id_prefix", "")
        if not prefix.strip():
            raise BadRequest("id_prefix", "id_prefix must be given and not empty")
        target = params.get("target_topic")
        if target == "":
            raise BadRequest("target_topic", "target_topic must not be empty")
        confirm = pending.parse_int(params, "confirm")
        dry_run = params.get("dry_run", "false")
        if dry_run not in ("true", "false"):
            raise BadRequest("dry_run", f"dry_run must be true or false, not {dry_run!r}")
        result = self._control.cancel_prefix(prefix, target, confirm, dry_run == "true")
        return json_response(HTTPStatus.OK, result)

    def _pending(self, request: Request) -> Response:
        start = pending.parse_int(_params(request, "start_ms"), "start_ms")
        return json_response(HTTPStatus.OK, self._control.pending_stats(start))

    def _message(self, request: Request) -> Response:
        message_id = unquote(request.path[len(MESSAGES_PREFIX) :])
        if not message_id:
            raise BadRequest("id", "missing message id: use /admin/messages/<delay-id>")
        if request.method == "GET":
            values = pending.parse_values(_params(request, "values"))
            found = self._control.lookup(message_id, values)
            if found is None:
                return error_response(
                    HTTPStatus.NOT_FOUND, f"no pending message with id {message_id!r}"
                )
            return json_response(HTTPStatus.OK, found)
        if request.method == "DELETE":
            target = _params(request, "target_topic").get("target_topic")
            if target == "":
                raise BadRequest("target_topic", "target_topic must not be empty")
            return json_response(HTTPStatus.OK, self._control.cancel(message_id, target))
        return _not_allowed(request, "GET", "DELETE")

    @staticmethod
    def _only(request: Request, method: str) -> Response | None:
        return None if request.method == method else _not_allowed(request, method)


def _not_allowed(request: Request, *allowed: str) -> Response:
    denied = error_response(
        HTTPStatus.METHOD_NOT_ALLOWED,
        f"{request.method} not allowed on {request.path}; use {', '.join(allowed)}",
    )
    return replace(denied, headers=(("Allow", ", ".join(allowed)),))


def _params(request: Request, *allowed: str) -> dict[str, str]:
    """The query parameters, each at most once and each one of ``allowed``."""
    result: dict[str, str] = {}
    for name, values in request.query.items():
        if name not in allowed:
            expected = ", ".join(allowed) if allowed else "none"
            raise BadRequest(name, f"unknown parameter {name!r} (expected: {expected})")
        if len(values) != 1:
            raise BadRequest(name, f"parameter {name!r} given {len(values)} times")
        result[name] = values[0]
    return result


def _direction(request: Request) -> Direction:
    value = _params(request, "direction").get("direction")
    choices = "|".join(d.value for d in Direction)
    if value is None:
        raise BadRequest("direction", f"missing parameter direction={choices}")
    try:
        return Direction(value.lower())
    except ValueError:
        raise BadRequest("direction", f"direction must be {choices}, not {value!r}") from None

"""The supervisor's HTTP answers: the pod's one port, in front of its worker processes.

Each worker (``supervisor.py``) serves the single sidecar's endpoints on a loopback
port of its own; this router answers the pod's port by asking them:

- ``/metrics`` — every worker's series with a ``worker`` label, plus the supervisor's
  (``metrics_merge.py``);
- ``/healthz``, ``/readyz`` — 200 only when every worker runs and answers 200; the body
  names each worker's state (and the reason of one that is not ready);
- ``/admin/messages`` (listing) — the workers' pages merged by position, the rule
  ``delaybridge pending list`` uses across replicas (``replicas.list_page``), so the
  cursor resumes every worker; ``/admin/pending`` — the workers' counts summed;
- ``/admin/messages/<id>`` — GET: the worker that holds it answers; DELETE: sent to the
  worker that holds it (else to the first running one): one cancel record is published
  to the cancel topic, which every worker reads;
- ``DELETE /admin/messages?id_prefix=`` — a bulk cancel counted on every worker (a dry
  run each), the cap (``cancels.prefix_confirm_above``) applied to the pod's sum, then
  sent to one worker, which applies it and publishes it to the cancel topic that every
  worker reads: one decision and one count for the pod, never a cancel taken by some
  workers and refused by others;
- ``/admin/stats`` — the workers' partitions in one list, in-flight counts summed;
- anything else (pause, resume, paused) — sent to every worker; ``paused`` is the union.

The client's ``Authorization`` header is checked here and forwarded, so each worker
checks it too. A worker that is not running makes every admin call fail with 503
naming it (a listing that silently left one out would look complete).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from dataclasses import replace
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from delaybridge.bridge.admin import pending, replicas
from delaybridge.bridge.admin.control import BadRequest, ConfirmRequired
from delaybridge.bridge.http.routes import (
    MESSAGES_PREFIX,
    Request,
    Response,
    error_response,
    json_response,
)
from delaybridge.bridge.workers.metrics_merge import (
    OPENMETRICS,
    Snapshot,
    SupervisorMetrics,
    labelled,
)
from delaybridge.bridge.workers.metrics_merge import merge as merge_metrics
from delaybridge.bridge.workers.worker_http import (
    Answer,
    Ask,
    Refused,
    WorkerDown,
    as_response,
    http_ask,
    merge_pending,
    merge_stats,
    ok,
)
from delaybridge.errors import DelayBridgeError
from delaybridge.timerlog.list_cursor import Cursor

TIMEOUT_S = 30.0
PROBE_TIMEOUT_S = 3.0


#: ``confirm`` sent with a prefix cancel whose cap the pod's sum passed already.
UNCAPPED = 2**62


class FanOut:
    """Request -> Response for the supervisor's port (see the module docstring).

    ``workers()`` gives each worker's base URL by index (None while not running)."""

    def __init__(
        self,
        workers: Callable[[], dict[str, str | None]],
        registry: CollectorRegistry,
        metrics: SupervisorMetrics,
        admin_token: str,
        ask: Ask = http_ask,
    ) -> None:
        self._workers = workers
        self._registry = registry
        self._metrics = metrics
        self._token = admin_token.encode()
        self._ask = ask

    def handle(self, request: Request) -> Response:
        """Answer one request; never raises."""
        try:
            return self._dispatch(request)
        except BadRequest as exc:
            return error_response(HTTPStatus.BAD_REQUEST, str(exc), parameter=exc.parameter)
        except Refused as exc:
            return as_response(exc.answer)
        except DelayBridgeError as exc:  # WorkerDown included
            return error_response(HTTPStatus.SERVICE_UNAVAILABLE, str(exc))

    def _dispatch(self, request: Request) -> Response:
        path, method = request.path, request.method
        if path in ("/metrics", "/healthz", "/readyz") and method != "GET":
            return as_response(self._one(request, "GET"))
        if path == "/metrics":
            return self._scrape(request)
        if path in ("/healthz", "/readyz"):
            return self._probe(path)
        if path != "/admin" and not path.startswith("/admin/"):
            return error_response(HTTPStatus.NOT_FOUND, f"no such endpoint: {path}")
        denied = self._authorize(request)
        if denied is not None:
            return denied
        if path == "/admin/messages" and method == "GET":
            return self._list(request)
        if path == "/admin/pending" and method == "GET":
            return self._pending(request)
        if path == "/admin/stats" and method == "GET":
            return self._stats(request)
        if path.startswith(MESSAGES_PREFIX) and method in ("GET", "DELETE"):
            return self._message(request)
        if path == "/admin/messages" and method == "DELETE":
            return self._cancel_prefix(request)
        return self._everywhere(request)

    # -- open endpoints --------------------------------------------------------------------

    def _scrape(self, request: Request) -> Response:
        by_worker = {}
        for index, url in self._workers().items():
            families = []
            if url is not None:
                try:
                    answer = self._ask(url, "GET", "/metrics", {"Accept": OPENMETRICS}, 10.0)
                    if answer.status == HTTPStatus.OK:
                        families = labelled(answer.body.decode(), index)
                except (OSError, ValueError):
                    families = []
            self._metrics.up.labels(index).set(1 if families else 0)
            by_worker[index] = families
        snapshot = Snapshot(list(self._registry.collect()) + merge_metrics(by_worker))
        encoder, content_type = choose_encoder(request.accept or "")
        return Response(HTTPStatus.OK, encoder(snapshot), content_type)

    def _probe(self, path: str) -> Response:
        key = "healthy" if path == "/healthz" else "ready"
        states: dict[str, Any] = {}
        for index, url in self._workers().items():
            if url is None:
                states[index] = {key: False, "reason": "not running (being restarted)"}
                continue
            try:
                answer = self._ask(url, "GET", path, {}, PROBE_TIMEOUT_S)
                states[index] = answer.json()
            except (OSError, ValueError) as exc:
                states[index] = {key: False, "reason": f"no answer: {exc}"}
        ok = bool(states) and all(s.get(key) is True for s in states.values())
        doc: dict[str, Any] = {key: ok, "workers": states}
        if not ok:
            doc["reason"] = "; ".join(
                f"worker {i}: {s.get('reason', 'not ' + key)}"
                for i, s in states.items()
                if s.get(key) is not True
            )
        return json_response(HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE, doc)

    # -- admin -----------------------------------------------------------------------------

    def _authorize(self, request: Request) -> Response | None:
        if not self._token:
            return None
        scheme, _, given = (request.authorization or "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self._token):
            return None
        denied = error_response(
            HTTPStatus.UNAUTHORIZED, "admin API requires Authorization: Bearer <http.admin_token>"
        )
        return replace(denied, headers=(("WWW-Authenticate", 'Bearer realm="delaybridge-admin"'),))

    def _running(self) -> dict[str, str]:
        urls = self._workers()
        down = [i for i, url in urls.items() if url is None]
        if down:
            raise WorkerDown(f"worker {', '.join(down)} not running (being restarted); retry")
        return {i: url for i, url in urls.items() if url is not None}

    def _call(
        self,
        index: str,
        url: str,
        request: Request,
        target: str | None = None,
        method: str | None = None,
    ) -> Answer:
        headers = {"Authorization": request.authorization} if request.authorization else {}
        try:
            return self._ask(
                url, method or request.method, target or _target(request), headers, TIMEOUT_S
            )
        except OSError as exc:
            raise WorkerDown(f"worker {index} ({url}) did not answer: {exc}") from exc

    def _one(self, request: Request, method: str) -> Answer:
        index, url = next(iter(self._running().items()))
        return self._call(index, url, request, method=method)

    def _all(self, request: Request, target: str | None = None) -> dict[str, Answer]:
        return {i: self._call(i, url, request, target) for i, url in self._running().items()}

    def _list(self, request: Request) -> Response:
        params = _single(request, *pending.LIST_PARAMETERS)
        query = pending.parse_query(params)  # a bad parameter: 400 from here
        urls = self._running()
        by_url = {url: index for index, url in urls.items()}

        def fetch(url: str, path: str, params: dict[str, str]) -> dict[str, Any]:
            answer = self._call(by_url[url], url, request, f"{path}?{urlencode(params)}")
            return ok(answer)

        cursor = params.get("cursor")
        page = replicas.list_page(
            fetch, list(urls.values()), query.filter, query.limit, cursor, query.values
        )
        del page["replicas"]
        if page["cursor"] is not None:
            flt = pending.filter_fingerprint(query.filter)
            page["roll_bounds"] = Cursor.decode(page["cursor"], flt).roll_bounds
        page["workers"] = sorted(urls)
        return json_response(HTTPStatus.OK, page)

    def _pending(self, request: Request) -> Response:
        given = pending.parse_int(_single(request, "start_ms"), "start_ms")
        start = int(time.time() * 1000) if given is None else given  # one start for all
        answers = self._all(request, f"/admin/pending?start_ms={start}")
        docs = {i: ok(a) for i, a in answers.items()}
        return json_response(HTTPStatus.OK, merge_pending(docs, start))

    def _stats(self, request: Request) -> Response:
        docs = {i: ok(a) for i, a in self._all(request).items()}
        return json_response(HTTPStatus.OK, merge_stats(docs))

    def _message(self, request: Request) -> Response:
        urls = self._running()
        holder = None
        for index, url in urls.items():
            # A look-up keeps its query (values=true); a cancel's probe has none.
            probe = _target(request) if request.method == "GET" else request.path
            found = self._call(index, url, request, method="GET", target=probe)
            if found.status == HTTPStatus.OK:
                if request.method == "GET":
                    return as_response(found)
                holder = (index, url)
                break
            if found.status != HTTPStatus.NOT_FOUND:
                return as_response(found)  # e.g. 401, 503: as the worker said it
        if request.method == "GET":
            return as_response(found)  # every worker: 404
        index, url = holder or next(iter(urls.items()))
        return as_response(self._call(index, url, request))

    def _cancel_prefix(self, request: Request) -> Response:
        query = {name: list(values) for name, values in request.query.items()}
        counting = {k: v for k, v in query.items() if k not in ("confirm", "dry_run")}
        counted = self._all(request, _with_query(request, counting | {"dry_run": ["true"]}))
        for answer in counted.values():
            if answer.status != HTTPStatus.OK:
                return as_response(answer)  # e.g. 400 naming id_prefix: every worker says it
        docs = {i: a.json() for i, a in counted.items()}
        counts = {i: int(d["count"]) for i, d in docs.items()}
        total = sum(counts.values())
        prefix = query.get("id_prefix", [""])[0]
        if query.get("dry_run") == ["true"]:
            doc = {"id_prefix": prefix, "count": total, "dry_run": True, "workers": counts}
            return json_response(HTTPStatus.OK, doc)
        cap = min(int(d["confirm_above"]) for d in docs.values())
        confirm = pending.parse_int(_single(request, *query), "confirm")
        if total > cap and (confirm is None or confirm < total):
            refused = ConfirmRequired(total, cap)
            doc = {"error": str(refused), "count": total, "confirm_above": cap, "workers": counts}
            return json_response(HTTPStatus.CONFLICT, doc)
        # The cap was applied to the pod's sum: the worker that applies it must not
        # refuse on its own share (or on a few arrived since the count).
        applying = counting | {"confirm": [str(UNCAPPED)]}
        index, url = next(iter(self._running().items()))
        answer = self._call(index, url, request, _with_query(request, applying))
        if answer.status != HTTPStatus.OK:
            return as_response(answer)
        return json_response(HTTPStatus.OK, answer.json() | {"count": total, "workers": counts})

    def _everywhere(self, request: Request) -> Response:
        answers = self._all(request)
        for answer in answers.values():
            if answer.status != HTTPStatus.OK:
                return as_response(answer)  # the same error every worker gives (404, 405, 400)
        docs = {i: a.json() for i, a in answers.items()}
        merged: dict[str, Any] = {"workers": docs}
        if all(isinstance(d, dict) and "paused" in d for d in docs.values()):
            merged["paused"] = sorted({p for d in docs.values() for p in d["paused"]})
        return json_response(HTTPStatus.OK, merged)


def _with_query(request: Request, query: dict[str, list[str]]) -> str:
    return _target(replace(request, query=query))


def _target(request: Request) -> str:
    query = urlencode(request.query, doseq=True)
    return request.path + (f"?{query}" if query else "")


def _single(request: Request, *allowed: str) -> dict[str, str]:
    out = {}
    for name, values in request.query.items():
        if name not in allowed:
            raise BadRequest(name, f"unknown parameter {name!r} (expected: {', '.join(allowed)})")
        if len(values) != 1:
            raise BadRequest(name, f"parameter {name!r} given {len(values)} times")
        out[name] = values[0]
    return out

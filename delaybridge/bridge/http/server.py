"""The sidecar's HTTP server: metrics, health, readiness and the admin API.

A stdlib ``ThreadingHTTPServer`` on one background thread, one short-lived thread per
request. The traffic is a Prometheus scrape every few seconds, kubelet probes and the
occasional operator with curl, so a framework (and its dependency tree in the sidecar
image) buys nothing. This module is only transport: it parses the request line into a
:class:`~delaybridge.bridge.http.routes.Request`, asks the :class:`~.routes.Router`, and
writes the answer. Nothing here blocks the service loop; admin calls reach it through
the :class:`~delaybridge.bridge.admin.control.Control` protocol.

Security: the admin API needs ``Authorization: Bearer <token>`` whenever a token is
configured, and a server on a non-loopback address refuses to start without one (the
settings check this too; this is the second lock on the door). Requests are logged at
debug level as their request line only — never headers, so never the token.

Usage::

    with HttpServer(settings.http, control, metrics) as server:
        print(server.port)  # the bound port, also when settings.http.port is 0
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from delaybridge.bridge.admin.control import Control
from delaybridge.bridge.http.routes import Request, Response, Router
from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.errors import ConfigError
from delaybridge.settings import HttpSettings, is_loopback

log = logging.getLogger(__name__)

#: Request bodies are never used; this much is read and discarded to keep the socket sane.
MAX_BODY_BYTES = 64 * 1024
#: An idle or trickling client is dropped after this long (per socket operation).
SOCKET_TIMEOUT_S = 10.0


class HttpServer:
    """Serves the sidecar's HTTP endpoints on a background thread.

    ``start()`` binds and returns at once; ``stop()`` stops accepting, closes the socket
    and joins the thread. Both are called by the service's owner; not re-entrant.
    """

    def __init__(
        self,
        settings: HttpSettings,
        control: Control | None = None,
        metrics: Metrics | None = None,
        router: Handles | None = None,
    ) -> None:
        """Serve ``control`` and ``metrics`` (a sidecar), or ``router`` (a supervisor of
        worker processes: ``bridge/workers/fanout.py``)."""
        if not settings.admin_token and not is_loopback(settings.host):
            raise ConfigError(
                f"http.host={settings.host!r} is not a loopback address, so "
                "http.admin_token must be set (DELAYBRIDGE_HTTP__ADMIN_TOKEN)"
            )
        self._settings = settings
        if router is None:
            if control is None or metrics is None:
                raise TypeError("HttpServer needs control and metrics, or a router")
            router = Router(control, metrics.registry, settings.admin_token)
        self._router = router
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the ephemeral one when ``http.port`` is 0)."""
        if self._server is None:
            raise RuntimeError("HttpServer.port read before start()")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = self._settings.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        host, port = self._settings.host, self._settings.port
        server_class = _Server6 if ":" in host else _Server
        try:
            server = server_class((host, port), _Handler)
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on http.host={host!r} http.port={port}: {exc}"
            ) from exc
        server.router = self._router
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="delaybridge-http"
        )
        self._thread.daemon = True
        self._thread.start()
        log.info("HTTP listening on %s (admin token %s)", self.url, _token_state(self._settings))

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None

    def __enter__(self) -> HttpServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _token_state(settings: HttpSettings) -> str:
    return "required" if settings.admin_token else "not required (loopback only)"


class Handles(Protocol):
    """What answers the requests: :class:`~.routes.Router` or ``fanout.FanOut``."""

    def handle(self, request: Request) -> Response: ...


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck client never blocks shutdown
    router: Handles

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver's default prints a traceback to stderr; route it through logging.
        # A client that hangs up mid-answer is routine (a scrape timed out), not an error.
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            log.debug("HTTP client %s went away: %s", client_address, exc)
        else:
            log.exception("HTTP request from %s failed", client_address)


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = SOCKET_TIMEOUT_S
    server_version = "delaybridge"

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        # Some probes use HEAD: answer as GET, headers only.
        self._serve(head=True)

    def _serve(self, head: bool = False) -> None:
        if not self._discard_body():
            return
        parts = urlsplit(self.path)
        request = Request(
            method="GET" if head else self.command,
            path=parts.path,
            query=parse_qs(parts.query, keep_blank_values=True),
            authorization=self.headers.get("Authorization"),
            accept=self.headers.get("Accept"),
        )
        response = self.server.router.handle(request)
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in response.headers:
            self.send_header(name, value)
        self.end_headers()
        if not head:
            self.wfile.write(response.body)

    def _discard_body(self) -> bool:
        raw = self.headers.get("Content-Length") or "0"
        try:
            length = int(raw)
        except ValueError:
            self.send_error(400, f"bad Content-Length {raw!r}")
            return False
        if length < 0 or length > MAX_BODY_BYTES:
            self.send_error(413, f"request body over {MAX_BODY_BYTES} bytes")
            return False
        if length:
            self.rfile.read(length)
        return True

    def log_message(self, format: str, *args: Any) -> None:
        # The request line and status only; headers (Authorization) never reach a log.
        log.debug("%s %s", self.address_string(), format % args)

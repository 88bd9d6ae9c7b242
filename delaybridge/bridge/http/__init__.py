"""The sidecar's HTTP side: ``/metrics``, ``/healthz``, ``/readyz`` and the admin API.

- ``server``: the transport, a thread that never touches the loop's state
  (:class:`HttpServer`);
- ``routes``: what each endpoint answers, a pure ``Request -> Response`` router.
"""

from delaybridge.bridge.http.routes import Request, Response, Router
from delaybridge.bridge.http.server import HttpServer

__all__ = ["HttpServer", "Request", "Response", "Router"]

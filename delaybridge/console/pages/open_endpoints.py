"""``/healthz`` and ``/metrics``: open, like the sidecar's, and changing nothing.

``/healthz`` answers 200 while the process serves requests (the chart's probes); it does
not ask the replicas, so a replica that is down does not restart the console.
``/metrics`` is the console's own registry (audit counters, sessions).
"""

from __future__ import annotations

from flask import Flask, Response, request
from prometheus_client.exposition import choose_encoder

from delaybridge.console.pages.common import context


def register(app: Flask) -> None:
    app.add_url_rule("/healthz", "healthz", _healthz)
    app.add_url_rule("/metrics", "metrics", _metrics)


def _healthz() -> Response:
    return Response('{"healthy": true}', mimetype="application/json")


def _metrics() -> Response:
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return Response(encoder(context().audit.registry), content_type=content_type)

"""A small client for the sidecar's HTTP server, for the unit and the integration tests.

``Client(port)("GET", "/admin/stats", token)`` sends one request on a fresh connection
to 127.0.0.1 (5 s timeout) and returns a :class:`Reply`: status, lower-cased headers,
body, and ``.json()``.
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


class Client:
    def __init__(self, port: int) -> None:
        self.port = port

    def __call__(self, method: str, path: str, token: str | None = None, **headers: str) -> Reply:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            if token is not None:
                headers["Authorization"] = f"Bearer {token}"
            conn.request(method, path, headers=headers)
            resp = conn.getresponse()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            conn.close()

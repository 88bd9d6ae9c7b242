"""Serving the console: waitress, a pure-Python WSGI server with a thread pool.

:func:`serve` binds (port 0 picks a free one), prints one line naming the URL (what
tests and scripts wait for), and serves until SIGTERM or SIGINT; then it stops
accepting, lets the running requests finish and returns.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

from waitress.server import create_server

log = logging.getLogger(__name__)

ANNOUNCE = "delaybridge console: serving on "
#: Request threads: page loads fan out to the replicas from these.
THREADS = 8


class _Stop(Exception):
    """Raised in the main thread by the signal handler to leave waitress' loop."""


def serve(app: Any, host: str, port: int, on_stop: Callable[[], None] = lambda: None) -> None:
    server = create_server(
        app,
        host=host,
        port=port,
        threads=THREADS,
        ident="delaybridge-console",
        # Idle or slow clients are dropped rather than holding a thread.
        channel_timeout=30,
        # Proxy headers are honoured only through --proxy-hops (ProxyFix in the app).
        clear_untrusted_proxy_headers=True,
    )
    bound = getattr(server, "effective_port", port)
    shown = f"[{host}]" if ":" in host else host
    print(f"{ANNOUNCE}http://{shown}:{bound}", flush=True)

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise _Stop(signal.Signals(signum).name)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run()
    except _Stop as why:
        log.info("console stopping (%s)", why)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        server.close()
        on_stop()

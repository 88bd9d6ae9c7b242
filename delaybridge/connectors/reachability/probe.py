"""Does any bootstrap server accept TCP connections? The signal that Kafka is back.

librdkafka tells its application when a connection fails (the error callback:
``_TRANSPORT``, ``_ALL_BROKERS_DOWN``) but never when one succeeds again: "connected"
is only a debug log line (``debug=broker``), which is far too chatty to turn on. So
the sidecar asks the network itself: a plain TCP connect to each bootstrap server. A
listener that completes the handshake is there; "connection refused", a timeout or a
name that does not resolve means it is not. This is deliberately the listener's view,
not the broker's health: a broker frozen with SIGSTOP still completes handshakes (the
kernel does, into the listen backlog), and counts as reachable; its clients' timeouts
are then rate-limited like any other client error (``tracker.py``).

A check runs on a thread of its own, so a black-holed address (a connect that hangs
until its timeout) or a slow DNS server never stalls the service loop; the loop only
looks at the :class:`~concurrent.futures.Future` it got.
"""

from __future__ import annotations

import socket
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

from delaybridge.errors import ConfigError

#: Kafka's port when a bootstrap server names none (librdkafka's default too).
DEFAULT_PORT = 9092
#: How long one connect may take before that server counts as not listening.
CONNECT_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class ListenerCheck:
    """What one check found: the first server that accepted, or why each one did not."""

    accepted_by: str | None
    """``host:port`` of the first bootstrap server that accepted a connection."""
    failures: tuple[str, ...] = ()
    """``host:port: reason`` for every server tried before (all of them, if none accepted)."""

    @property
    def listening(self) -> bool:
        return self.accepted_by is not None

    def describe(self) -> str:
        """The failures as one clause for a log line or a readiness reason."""
        return "; ".join(self.failures) or "no bootstrap server to try"


class ListenerProbe(Protocol):
    """Starts a check and hands back its future answer; never blocks the caller."""

    def begin(self) -> Future[ListenerCheck]: ...


class TcpListenerProbe:
    """:class:`ListenerProbe` over real sockets: connect to each bootstrap server in turn.

    Each :meth:`begin` starts one daemon thread that tries the servers in order, stops
    at the first that accepts, and closes that connection at once (the broker sees a
    client that connects and leaves, nothing more).
    """

    def __init__(self, bootstrap_servers: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self.addresses = bootstrap_addresses(bootstrap_servers)
        self.timeout_s = timeout_s

    def begin(self) -> Future[ListenerCheck]:
        answer: Future[ListenerCheck] = Future()
        answer.set_running_or_notify_cancel()

        def run() -> None:
            try:
                answer.set_result(self.check())
            except BaseException as exc:  # a bug: handed to whoever reads the answer
                answer.set_exception(exc)

        threading.Thread(target=run, name="kafka-listener-probe", daemon=True).start()
        return answer

    def check(self) -> ListenerCheck:
        """One check, on the calling thread (at most ``timeout_s`` per server)."""
        failures: list[str] = []
        for host, port in self.addresses:
            where = f"{host}:{port}"
            try:
                with socket.create_connection((host, port), timeout=self.timeout_s):
                    return ListenerCheck(where, tuple(failures))
            except OSError as exc:  # refused, unreachable, timed out, name not resolved
                failures.append(f"{where}: {_reason(exc)}")
        return ListenerCheck(None, tuple(failures))


def bootstrap_addresses(bootstrap_servers: str) -> list[tuple[str, int]]:
    """``(host, port)`` of each server in a ``bootstrap.servers`` list.

    Takes what librdkafka takes: ``host``, ``host:port``, ``[v6 address]:port``, each
    optionally with a ``protocol://`` prefix, separated by commas (or spaces).
    """
    addresses = []
    for entry in bootstrap_servers.replace(" ", ",").split(","):
        entry = entry.strip()
        if not entry:
            continue
        addresses.append(_host_port(entry.rpartition("://")[2]))
    if not addresses:
        raise ConfigError(f"no bootstrap server in {bootstrap_servers!r}")
    return addresses


def _host_port(server: str) -> tuple[str, int]:
    if server.startswith("["):  # [::1]:9092
        host, _, rest = server[1:].partition("]")
        port = rest.removeprefix(":")
    elif server.count(":") == 1:
        host, _, port = server.partition(":")
    else:  # a bare name, or a bare IPv6 address
        host, port = server, ""
    if not port:
        return host, DEFAULT_PORT
    if not port.isdigit():
        raise ConfigError(f"bootstrap server {server!r}: port {port!r} is not a number")
    return host, int(port)


def _reason(exc: OSError) -> str:
    """``Connection refused``, ``timed out``, ``Name or service not known``, ..."""
    if isinstance(exc, socket.timeout | TimeoutError):
        return "timed out"
    return exc.strerror or str(exc) or type(exc).__name__

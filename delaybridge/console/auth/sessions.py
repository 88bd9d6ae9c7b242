"""Console sessions: what a login with the admin token becomes.

A successful login creates a :class:`Session` on the server and gives the browser only
its id, a 256-bit random value, in a cookie that is ``HttpOnly`` (no script reads it),
``SameSite=Strict`` (no other site's page sends it) and ``Secure`` unless the console
is told it is served over plain HTTP. The admin token itself never leaves the login
form's POST body: it is in no cookie, no URL and no page, and the console talks to the
replicas with its own copy of the token.

The store keeps sessions in memory (a restart logs everybody out, which is the safe
direction) under the SHA-256 of their id, so neither a heap dump nor a log line holds a
usable id. A session ends after ``idle_s`` without a request, after ``max_s`` in all,
or at logout. Each session has its own CSRF token (:mod:`~delaybridge.console.auth.csrf`).

Thread-safe: request threads share one store.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "delaybridge_console"
#: Sessions kept at most; the oldest idle one makes room (a flood of logins cannot
#: grow memory without bound).
MAX_SESSIONS = 1_000


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclass
class Session:
    """A logged-in browser: who said they are, from where, and its CSRF token."""

    key: str
    who: str
    remote: str
    csrf_token: str
    created_s: float
    seen_s: float

    @property
    def fingerprint(self) -> str:
        """A short, stable name of the session for audit lines (not its id)."""
        return self.key[:12]


class SessionStore:
    def __init__(
        self,
        idle_s: float,
        max_s: float,
        clock: Callable[[], float] = time.monotonic,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self.idle_s = idle_s
        self.max_s = max_s
        self._clock = clock
        self._max_sessions = max_sessions
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def create(self, who: str, remote: str) -> tuple[str, Session]:
        """A new session: the id for the cookie, and the session."""
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        session = Session(_key(session_id), who, remote, secrets.token_urlsafe(32), now, now)
        with self._lock:
            self._expire(now)
            while len(self._sessions) >= self._max_sessions:
                oldest = min(self._sessions.values(), key=lambda s: s.seen_s)
                del self._sessions[oldest.key]
            self._sessions[session.key] = session
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id (and it is seen now), or None."""
        if not session_id:
            return None
        now = self._clock()
        with self._lock:
            session = self._sessions.get(_key(session_id))
            if session is None:
                return None
            if self._expired(session, now):
                del self._sessions[session.key]
                return None
            session.seen_s = now
            return session

    def end(self, session_id: str | None) -> Session | None:
        """Log out: the session is gone (returned, for the audit line)."""
        if not session_id:
            return None
        with self._lock:
            return self._sessions.pop(_key(session_id), None)

    def __len__(self) -> int:
        with self._lock:
            self._expire(self._clock())
            return len(self._sessions)

    def _expired(self, session: Session, now: float) -> bool:
        return now - session.seen_s > self.idle_s or now - session.created_s > self.max_s

    def _expire(self, now: float) -> None:
        for key in [k for k, s in self._sessions.items() if self._expired(s, now)]:
            del self._sessions[key]

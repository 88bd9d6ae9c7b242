"""Who may use the console: sessions from a login with the admin token, CSRF checks on
every change, and a throttle on failed logins (docs/console.md, "Security")."""

from delaybridge.console.auth.csrf import FIELD, same_origin, token_matches
from delaybridge.console.auth.sessions import COOKIE, Session, SessionStore
from delaybridge.console.auth.throttle import LoginThrottle

__all__ = [
    "COOKIE",
    "FIELD",
    "LoginThrottle",
    "Session",
    "SessionStore",
    "same_origin",
    "token_matches",
]

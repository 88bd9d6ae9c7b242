"""Cross-site request forgery: every change must prove it comes from the console's page.

Two locks, either of which stops a forged request:

1. **The session's token.** Every form that changes something carries the session's
   CSRF token in a hidden field (:data:`FIELD`); the POST is refused (403) unless it
   matches, compared in constant time. Another site can make a browser send a POST, but
   cannot read the console's page to learn the token.
2. **The origin.** A POST whose ``Origin`` header (or, without one, ``Referer``) names
   another site than the console's own is refused, token or not.

The session cookie's ``SameSite=Strict`` is a third, in the browser: it is not sent
with requests that another site starts. The login form has no session yet, so only the
origin check guards it (a forged login needs the admin token anyway).
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

FIELD = "csrf_token"


def token_matches(expected: str, submitted: str | None) -> bool:
    """The submitted form field equals the session's token (constant-time compare)."""
    if not submitted:
        return False
    return hmac.compare_digest(expected.encode(), submitted.encode())


def _origin(url: str) -> str | None:
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


def same_origin(own_url: str, origin: str | None, referer: str | None) -> bool:
    """The request comes from the console's own pages, as far as the browser says.

    ``own_url`` is the console's URL as the request reached it (scheme and host).
    Browsers send ``Origin`` with every POST; ``Referer`` is the fallback (its origin
    part). A request with neither is let through to the token check: some proxies
    strip both, and the token alone already stops forgery.
    """
    own = _origin(own_url)
    if origin is not None:
        return origin.lower() != "null" and origin.lower().rstrip("/") == own
    if referer:
        return _origin(referer) == own
    return True

"""Dead-letter records: the original record, unchanged, plus why it is there.

A dead-lettered record keeps its key, value and headers and gains ``delay-error`` (a
stable :class:`Reason` code), ``delay-error-detail`` (for a person) and
``delay-origin`` (``topic/partition/offset`` in the delay topic). Nothing is dropped:
an operator can fix the headers and produce the record to the delay topic again.
"""

from __future__ import annotations

from collections.abc import Sequence

from delaybridge.bridge.headers import OUT_ERROR, OUT_ERROR_DETAIL, OUT_ORIGIN
from delaybridge.bridge.reasons import Reason

MAX_DETAIL_BYTES = 1024


def dead_letter_headers(
    headers: Sequence[tuple[str, str | bytes | None]], reason: Reason, detail: str, origin: str
) -> list[tuple[str, str | bytes | None]]:
    out: list[tuple[str, str | bytes | None]] = [
        (k, v) for k, v in headers if k not in (OUT_ERROR, OUT_ERROR_DETAIL, OUT_ORIGIN)
    ]
    out.append((OUT_ERROR, reason.value.encode()))
    out.append((OUT_ERROR_DETAIL, detail.encode()[:MAX_DETAIL_BYTES]))
    out.append((OUT_ORIGIN, origin.encode()))
    return out

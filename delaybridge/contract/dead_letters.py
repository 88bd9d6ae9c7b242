"""Dead-letter records: the original record, unchanged, plus why it is there.

A dead-lettered record keeps its key, value and headers and gains ``delay-error`` (a
stable :class:`Reason` code), ``delay-error-detail`` (for a person) and
``delay-origin`` (``topic/partition/offset`` in the delay topic). Nothing is dropped:
an operator can fix the headers and produce the record to the delay topic again.

One exception: a record the dead-letter topic refuses as too large is written again
without its value (:func:`shrunk`): key, headers, reason and origin, plus
``delay-error-value-dropped`` with the value's size; if even that is too large (the
headers are), without the producer's headers too (``delay-error-headers-dropped``: how
many). So the partition moves on, and an operator can still find the original at its
origin while the delay topic keeps it.
"""

from __future__ import annotations

from collections.abc import Sequence

from delaybridge.contract.names import OUT_ERROR, OUT_ERROR_DETAIL, OUT_ORIGIN
from delaybridge.contract.reasons import Reason

MAX_DETAIL_BYTES = 1024
VALUE_DROPPED = "delay-error-value-dropped"
HEADERS_DROPPED = "delay-error-headers-dropped"
_OURS = (OUT_ERROR, OUT_ERROR_DETAIL, OUT_ORIGIN)


def dead_letter_headers(
    headers: Sequence[tuple[str, str | bytes | None]], reason: Reason, detail: str, origin: str
) -> list[tuple[str, str | bytes | None]]:
    out: list[tuple[str, str | bytes | None]] = [(k, v) for k, v in headers if k not in _OURS]
    out.append((OUT_ERROR, reason.value.encode()))
    out.append((OUT_ERROR_DETAIL, detail.encode()[:MAX_DETAIL_BYTES]))
    out.append((OUT_ORIGIN, origin.encode()))
    return out


def shrunk(
    headers: Sequence[tuple[str, str | bytes | None]], value: bytes | None, step: int
) -> list[tuple[str, str | bytes | None]]:
    """The headers of a dead letter that was too large: ``step`` 1 drops the value,
    ``step`` 2 the producer's headers as well (ours stay)."""
    size = 0 if value is None else len(value)
    out = [*headers, (VALUE_DROPPED, str(size).encode())]
    if step >= 2:
        kept = [(k, v) for k, v in headers if k in _OURS]
        dropped = len(headers) - len(kept)
        out = [*kept, (VALUE_DROPPED, str(size).encode()), (HEADERS_DROPPED, str(dropped).encode())]
    return out

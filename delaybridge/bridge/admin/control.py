"""The interface between the HTTP thread and the sidecar's owner thread.

The HTTP server (``bridge/http/server.py``) never touches a store, a consumer or a producer: it
asks a :class:`Control`, which the service implements. The service owns its stores on
one thread with no locks in the hot path, so its implementation hands each call to that
thread through a command queue and waits for the answer. A call may therefore block
briefly; when the owner thread does not answer in time the implementation raises
:class:`ControlTimeout`, and the HTTP layer answers ``503 Service Unavailable`` instead
of hanging the request.

Contract for implementations: every method is safe to call from any thread; return
values are JSON-able (str/int/float/bool/None, lists, dicts with str keys; sets and
enums are tolerated by the HTTP encoder); errors are :class:`DelayBridgeError`
subclasses whose message is safe to show an operator (no secrets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from delaybridge.bridge.flow import Direction
from delaybridge.errors import DelayBridgeError

if TYPE_CHECKING:
    from delaybridge.bridge.admin.pending import PendingQuery


class ControlTimeout(DelayBridgeError):
    """The owner thread did not answer a control call in time (it is busy or stuck)."""


class BadRequest(DelayBridgeError):
    """A query parameter is missing, repeated, unknown or malformed (HTTP 400)."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


class ConfirmRequired(DelayBridgeError):
    """A bulk cancel by id prefix above ``cancels.prefix_confirm_above`` was not
    confirmed (HTTP 409): ask again with ``confirm=<count>``."""

    def __init__(self, count: int, cap: int) -> None:
        super().__init__(
            f"{count} pending messages match, more than cancels.prefix_confirm_above={cap}: "
            f"repeat with confirm={count} to cancel them"
        )
        self.count = count
        self.cap = cap


@runtime_checkable
class Control(Protocol):
    """What the HTTP side may ask of the running service."""

    def healthy(self) -> bool:
        """True while the service loop is alive: its heartbeat is recent."""
        ...

    def ready(self) -> tuple[bool, str]:
        """``(True, "")`` once partitions are assigned and their stores recovered, while
        Kafka is reachable; otherwise ``(False, why)`` with a short reason for an
        operator (``"Kafka unreachable for 12 s: ..."`` names Kafka)."""
        ...

    def conditions(self) -> dict[str, str]:
        """What an operator should know about the replica, ready or not, by name: e.g.
        ``disk``, while ingest is paused for want of space (it delivers meanwhile, so it
        stays ready). Empty when there is nothing to tell."""
        ...

    def stats(self) -> dict[str, Any]:
        """A JSON-able snapshot: partitions, pending counts, positions, pause state."""
        ...

    def lookup(self, id: str, values: bool = False) -> dict[str, Any] | None:
        """The pending message with this ``delay-id``, or None when no store holds it;
        ``values``: with its ``value`` (base64), as the listing's ``values=true``."""
        ...

    def cancel(self, id: str, target_topic: str | None) -> dict[str, Any]:
        """Cancel the pending message ``id`` (optionally only if it targets
        ``target_topic``); returns a JSON-able result describing what happened."""
        ...

    def cancel_prefix(
        self, prefix: str, target_topic: str | None, confirm: int | None, dry_run: bool = False
    ) -> dict[str, Any]:
        """Cancel the pending messages whose id starts with ``prefix`` (optionally only
        those bound for ``target_topic``) sent before this call, here and, through the
        cancel topic, on every replica; the result gives ``count``, what this replica's
        stores held. Raises :class:`ConfirmRequired` when that count is above the cap and
        ``confirm`` is not at least it (``bridge/cancels/prefix.py``). ``dry_run``: only
        count (the console asks every replica first, then confirms the total)."""
        ...

    def list_pending(self, query: PendingQuery) -> dict[str, Any]:
        """One page of the pending messages this replica owns (``bridge/admin/pending.py``)."""
        ...

    def pending_stats(self, start_ms: int | None) -> dict[str, Any]:
        """Pending counts per target topic and the due-time histogram from ``start_ms``
        (default: now)."""
        ...

    def pause(self, what: Direction) -> None:
        """Pause enqueue or dequeue until :meth:`resume`; idempotent."""
        ...

    def resume(self, what: Direction) -> None:
        """Undo :meth:`pause`; idempotent."""
        ...

    def paused(self) -> set[Direction]:
        """The directions currently paused by an operator."""
        ...

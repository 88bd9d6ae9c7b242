"""``delaybridge.client``: the producer's Python API to the header contract (DESIGN §2, §10).

Producers schedule, cancel and reschedule delayed messages with typed arguments instead
of hand-set headers; consumers hand a failed record back with :meth:`DelayClient.retry_later`
(exponential backoff, jitter, a dead letter after the last attempt). Guarantees and
examples: docs/client.md; runnable examples: ``examples/``.

Modules:

- ``client``: :class:`DelayClient` (``schedule``, ``cancel``, ``reschedule``,
  ``retry_later``, ``retry_later_in_transaction``): one producer, one delay topic,
  every call acknowledged by Kafka before it returns (but the transactional one);
- ``records``: the delay-topic records a schedule and a cancel are, header by header,
  checked by the sidecar's own classifier before they are sent;
- ``retry``: :class:`RetryPolicy` and the record a retry or a dead letter is;
- ``arguments``: the checks of each argument (:class:`ClientArgumentError` names it).

It stands above ``delaybridge.contract`` and below the sidecar, whose ``send`` and
``cancel`` commands use it (import-linter checks it: docs/architecture.md).
"""

from delaybridge.client.arguments import ClientArgumentError
from delaybridge.client.client import DelayClient
from delaybridge.client.records import OnDuplicate
from delaybridge.client.retry import ATTEMPT_HEADER, RetryPolicy, attempt_of

__all__ = [
    "ATTEMPT_HEADER",
    "ClientArgumentError",
    "DelayClient",
    "OnDuplicate",
    "RetryPolicy",
    "attempt_of",
]

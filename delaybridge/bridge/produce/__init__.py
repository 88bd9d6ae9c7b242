"""Everything the sidecar produces goes out through one producer.

- ``outbox``: the one producer (:class:`Outbox`): one outcome per record, what is in
  flight, the exactly-once transaction's hook;
- ``resend``: the one produce-with-retry (:class:`Resender`, :class:`Write`);
- ``retry_queue``: retries with exponential backoff on the owner thread;
- ``poison``: exactly-once mode, records that failed are judged before they are
  produced into the next transaction.
"""

from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.bridge.produce.resend import Resender, Write
from delaybridge.bridge.produce.retry_queue import RetryQueue, backoff_ms

__all__ = ["Outbox", "Resender", "RetryQueue", "Write", "backoff_ms"]

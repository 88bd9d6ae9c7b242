"""Cancels reach every store, whichever delay-topic partition they landed in.

- ``requests``: the cancel topic's record (:class:`CancelRequest`);
- ``ledger``: the protocol, applying cancels to every store and counting each once
  (:class:`CancelLedger`);
- ``feed``: the whole cancel topic, read by every sidecar, and its saved position
  (:class:`CancelFeed`).
"""

from delaybridge.bridge.cancels.feed import CancelFeed
from delaybridge.bridge.cancels.ledger import CancelLedger, apply_cancels
from delaybridge.bridge.cancels.requests import CancelRequest, UnreadableCancel

__all__ = ["CancelFeed", "CancelLedger", "CancelRequest", "UnreadableCancel", "apply_cancels"]

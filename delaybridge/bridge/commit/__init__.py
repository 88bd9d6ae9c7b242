"""The commit point: when the stores are durable, and which delay-topic offsets may commit.

``point`` states the protocol of both modes as numbered steps and the
:class:`CommitPoint` interface; ``at_least_once`` (:class:`AtLeastOnce`) and
``exactly_once`` (:class:`ExactlyOnce`) follow those steps. Every part that writes for a
partition records into its :class:`OffsetTracker` (``offsets``) and :class:`Hold`\\ s
(``holds``). ``transactions`` is exactly-once mode's transaction; ``results`` sends a
refused offset commit again.
"""

from delaybridge.bridge.commit.at_least_once import AtLeastOnce
from delaybridge.bridge.commit.exactly_once import ExactlyOnce
from delaybridge.bridge.commit.holds import Hold
from delaybridge.bridge.commit.offsets import OffsetTracker
from delaybridge.bridge.commit.point import CommitPoint
from delaybridge.bridge.commit.results import CommitResults
from delaybridge.bridge.commit.transactions import TransactionFatal, Transactions

__all__ = [
    "AtLeastOnce",
    "CommitPoint",
    "CommitResults",
    "ExactlyOnce",
    "Hold",
    "OffsetTracker",
    "TransactionFatal",
    "Transactions",
]

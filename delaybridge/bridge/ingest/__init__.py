"""Delay-topic records in: every record ends in exactly one place.

- ``ingestor``: a consumed batch into the stores, the cancel topic and the dead-letter
  topic (:class:`Ingestor`);
- ``side_writes``: cancels and dead letters, acknowledged before their offset commits
  (:class:`SideWriter`).
"""

from delaybridge.bridge.ingest.ingestor import Ingestor
from delaybridge.bridge.ingest.side_writes import SideWrite, SideWriter

__all__ = ["Ingestor", "SideWrite", "SideWriter"]

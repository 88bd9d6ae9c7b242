"""Errors the store raises besides the project-wide ones in :mod:`delaybridge.errors`."""

from delaybridge.errors import DelayBridgeError


class DelayTooLong(DelayBridgeError):
    """A record is due further ahead than ``max_delay_ms`` (the sidecar dead-letters it)."""


class StoreLocked(DelayBridgeError):
    """Another process has this store open."""

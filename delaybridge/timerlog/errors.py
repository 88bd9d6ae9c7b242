"""Errors the store raises besides the project-wide ones in :mod:`delaybridge.errors`."""

from delaybridge.errors import DelayBridgeError


class DelayTooLong(DelayBridgeError):
    """A record is due further ahead than ``max_delay_ms`` (the sidecar dead-letters it)."""


class InvalidRecord(DelayBridgeError):
    """A record cannot be stored (a field too long for its format); nothing was written."""


class StoreLocked(DelayBridgeError):
    """Another process has this store open."""

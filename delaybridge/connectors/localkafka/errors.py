"""Why a local broker could not start or stop; all are :class:`DelayBridgeError`."""

from __future__ import annotations

from delaybridge.errors import DelayBridgeError


class LocalKafkaError(DelayBridgeError):
    """The local development broker failed; the message names the data dir or port."""


class JavaNotFoundError(LocalKafkaError):
    """No Java 17+ runtime to run the broker; the message says how to install one."""


class PortInUseError(LocalKafkaError):
    """Another process (not this data dir's broker) listens on a port we need."""


class BrokerStartError(LocalKafkaError):
    """The broker did not become usable in time; the message ends with its log's tail."""

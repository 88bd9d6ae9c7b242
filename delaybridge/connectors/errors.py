"""librdkafka's failures as delaybridge errors, wrapped in one place.

confluent-kafka reports a failure three ways: a ``KafkaException`` raised by a call
(its first argument is librdkafka's ``KafkaError``), a ``KafkaError`` handed to a
delivery callback, or a ``KafkaError`` on a consumed message (``msg.error()``). Each
becomes a :class:`KafkaClientError`: a :class:`delaybridge.errors.KafkaError` (so
``except DelayBridgeError`` catches it and the message ends with the librdkafka code,
e.g. ``[_MSG_TIMED_OUT]``) that keeps librdkafka's object in :attr:`~KafkaClientError.error`
for callers that decide by it (``error.code()``, ``error.retriable()``, ``error.fatal()``).
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException

from delaybridge.errors import KafkaError


class KafkaClientError(KafkaError):
    """A Kafka client call failed; :attr:`error` is librdkafka's error, when it gave one."""

    def __init__(self, message: str, error: Any = None, *, code: str | None = None) -> None:
        if code is None and isinstance(error, RdKafkaError):
            code = error.name()
        super().__init__(message, code)
        self.detail = message  # without the code, for a caller that adds context
        self.error: Any = error  # confluent_kafka.KafkaError | None

    def context(self, where: str) -> KafkaClientError:
        """The same error (same type, code and librdkafka error) prefixed with ``where``."""
        return type(self)(f"{where}: {self.detail}", self.error, code=self.code)


class ProduceError(KafkaClientError):
    """``produce()`` refused a record, or the broker did not acknowledge it.

    A full local queue is not an error (``try_produce`` answers ``False``); this is
    everything else: an unknown topic or partition, a record too large, a fatal
    idempotence error, a delivery that failed or timed out.
    """


def from_error(
    error: Any, what: str, kind: type[KafkaClientError] = KafkaClientError
) -> KafkaClientError:
    """A delivery report's or a consumed message's ``KafkaError`` as our error."""
    return kind(f"{what}: {error.str()}", error)


def wrap(
    exc: KafkaException, what: str, kind: type[KafkaClientError] = KafkaClientError
) -> KafkaClientError:
    """A raised ``KafkaException`` as our error, naming the operation and keeping the code."""
    err = exc.args[0] if exc.args else None
    if isinstance(err, RdKafkaError):
        return from_error(err, what, kind)
    return kind(f"{what}: {exc}")


def is_fatal(err: RdKafkaError) -> bool:
    """Whether a librdkafka error leaves its client dead. A fatal error reaches a consumer
    as a consumed message whose code is ``_FATAL`` (confluent-kafka's ``fatal()`` is
    False on it: the flag is set only where librdkafka's fatal error itself is read), and
    a producer through its error callback, with ``fatal()`` True."""
    return bool(err.fatal()) or err.code() == RdKafkaError._FATAL

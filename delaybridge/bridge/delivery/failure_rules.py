"""What a failed delivery becomes: retried later, or dead-lettered now (:func:`judge`).

By the error of the delivery report:

1. the target topic or partition does not exist → retry until
   ``missing_topic_retry_ms`` after the first failure, then dead-letter;
2. a retryable failure (broker down, timeouts, too few replicas) → retry until
   ``retry_unavailable_ms`` (default an hour, well above a broker restart), then
   dead-letter as ``target-unavailable``;
3. too large for the target → dead-letter at once; any other error likewise.

How a retry waits (parked in the store) is ``bridge/delivery/attempts.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaError as RdKafkaError

from delaybridge.bridge.delivery.attempts import Attempt
from delaybridge.contract.reasons import Reason
from delaybridge.settings import DeliverySettings

_MISSING = {
    RdKafkaError._UNKNOWN_TOPIC: Reason.TARGET_TOPIC_MISSING,
    RdKafkaError.UNKNOWN_TOPIC_OR_PART: Reason.TARGET_TOPIC_MISSING,
    RdKafkaError._UNKNOWN_PARTITION: Reason.TARGET_PARTITION_MISSING,
}
TOO_LARGE = {RdKafkaError.MSG_SIZE_TOO_LARGE, RdKafkaError.RECORD_LIST_TOO_LARGE}
#: Failures that pass when the cluster recovers. librdkafka marks few of them
#: ``retriable()`` (not ``_MSG_TIMED_OUT``, which is what a broker down for longer than
#: ``message.timeout.ms`` gives), so they are listed.
_UNAVAILABLE = {
    RdKafkaError._MSG_TIMED_OUT,
    RdKafkaError._TIMED_OUT,
    RdKafkaError._TRANSPORT,
    RdKafkaError._ALL_BROKERS_DOWN,
    RdKafkaError.REQUEST_TIMED_OUT,
    RdKafkaError.NOT_ENOUGH_REPLICAS,
    RdKafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    RdKafkaError.LEADER_NOT_AVAILABLE,
    RdKafkaError.NOT_LEADER_FOR_PARTITION,
    RdKafkaError.NETWORK_EXCEPTION,
    RdKafkaError.KAFKA_STORAGE_ERROR,
    RdKafkaError.BROKER_NOT_AVAILABLE,
}


@dataclass(frozen=True, slots=True)
class Verdict:
    retry: bool
    reason: Reason
    detail: str


def judge(err: RdKafkaError, attempt: Attempt, now_ms: int, settings: DeliverySettings) -> Verdict:
    """Retry later, or dead-letter now (the rules of the module docstring)."""
    rec = attempt.due.record
    where = f"topic {rec.target_topic!r}"
    if rec.target_partition >= 0:
        where += f" partition {rec.target_partition}"
    code = err.code()
    failing_ms = now_ms - attempt.first_failure_ms
    if code in _MISSING:
        retry = failing_ms < settings.missing_topic_retry_ms
        return Verdict(retry, _MISSING[code], f"{where} missing for {failing_ms} ms: {err.str()}")
    if (code in _UNAVAILABLE or err.retriable()) and not err.fatal():
        retry = failing_ms < settings.retry_unavailable_ms
        detail = f"{where} failing for {failing_ms} ms: {err.str()} [{err.name()}]"
        return Verdict(retry, Reason.TARGET_UNAVAILABLE, detail)
    if code in TOO_LARGE:
        return Verdict(False, Reason.RECORD_TOO_LARGE, f"{where}: {err.str()}")
    return Verdict(False, Reason.DELIVERY_FAILED, f"{where}: {err.str()} [{err.name()}]")

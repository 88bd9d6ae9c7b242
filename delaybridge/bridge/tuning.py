"""What the sidecar derives from its settings for its stores and its Kafka clients."""

from __future__ import annotations

from typing import Any

from delaybridge.bridge.commit.transactions import transactional_id
from delaybridge.settings import Settings
from delaybridge.timerlog import StoreSettings

_STORE_DELAY_MARGIN_MS = 7 * 86_400_000  # producers' clocks may run ahead of ours
#: The group consumer's librdkafka settings on top of the edge's: a shallow prefetch
#: queue, since the store, not librdkafka, is where records wait (librdkafka's default
#: of 64 MiB per partition showed in the 1M-tick RSS).
CONSUMER_OVERRIDES: dict[str, Any] = {"fetch.wait.max.ms": 50, "queued.max.messages.kbytes": 8192}


def store_settings_for(settings: Settings) -> StoreSettings:
    """The stores' settings; the store accepts producers' clocks a week ahead of ours."""
    defaults = StoreSettings()
    store = StoreSettings(
        tick_ms=settings.store.tick_ms,
        wheel_slots=settings.store.wheel_slots or defaults.wheel_slots,
        max_delay_ms=settings.store.max_delay_ms + _STORE_DELAY_MARGIN_MS,
        commit_segment_bytes=settings.store.commit_segment_bytes,
        cancel_grace_ms=settings.store.cancel_grace_ms,
    )
    store.validate()
    return store


def producer_overrides(settings: Settings) -> dict[str, Any]:
    """librdkafka settings of the sidecar's producer, on top of the edge's defaults.

    Exactly-once mode makes it transactional; its ``retry.backoff.ms`` is short because
    ``send_offsets_to_transaction`` right after a commit meets the coordinator's
    CONCURRENT_TRANSACTIONS and retries: 10 ms instead of 100 took a commit interval
    from ~105 to ~20 ms on the local broker (docs/benchmarks.md).
    """
    d = settings.delivery
    eos: dict[str, Any] = {}
    if d.exactly_once:
        k = settings.kafka
        tid = transactional_id(
            d.transactional_id, k.group_id, k.instance_id, settings.store.data_dir
        )
        eos = {
            "transactional.id": tid,
            "transaction.timeout.ms": d.transaction_timeout_ms,
            "message.timeout.ms": d.transaction_timeout_ms,
            "retry.backoff.ms": 10,
        }
    return eos | {
        "linger.ms": d.linger_ms,
        "compression.type": d.compression_type,
        "allow.auto.create.topics": False,
        "topic.metadata.propagation.max.ms": 5_000,
        "message.max.bytes": 10_485_760,
        "queue.buffering.max.messages": max(100_000, 2 * d.max_in_flight_records),
        # In flight is bounded by max_in_flight_records; cap the bytes too.
        "queue.buffering.max.kbytes": 65_536,
    }


def suffix(index: int) -> str:
    """What worker ``index`` appends to the names it must not share ("" for worker 0)."""
    return "" if index == 0 else f"-w{index}"

"""The header names of the contract (DESIGN §2): what producers set, what we add.

Producers set the *control* headers (target, timing, id, cancel); the sidecar consumes
them and strips them from the delivered record, which gains ``delay-id``,
``delay-origin`` and ``delay-due-ms`` (and, in the dead-letter topic, ``delay-error`` and
``delay-error-detail``). The rules that read them are in ``contract/classify.py``.
"""

from __future__ import annotations

TARGET_TOPIC = "delay-target-topic"
TARGET_PARTITION = "delay-target-partition"
DELAY_MS = "delay-ms"
DELAY_SEC = "delay-sec"
DELIVER_AT_MS = "deliver-at-ms"
DELIVER_AT = "deliver-at"
DELAY_ID = "delay-id"
DELAY_CANCEL = "delay-cancel"
DELAY_CANCEL_PREFIX = "delay-cancel-prefix"
ON_DUPLICATE = "delay-on-duplicate"
RMQ_DELIVER_MS = "TIMER_DELIVER_MS"
RMQ_DELAY_MS = "TIMER_DELAY_MS"
RMQ_DELAY_SEC = "TIMER_DELAY_SEC"
RMQ_CANCEL = "TIMER_DEL_UNIQKEY"
RMQ_LEVEL = "DELAY"
RMQ_UNIQ_KEY = "UNIQ_KEY"
DELAY_CRON = "delay-cron"
DELAY_TIMEZONE = "delay-timezone"
DELAY_EVERY = "delay-every"
DELAY_UNTIL = "delay-until"
DELAY_COUNT = "delay-count"
DELAY_JITTER = "delay-jitter"
DELAY_EXPIRE_AFTER = "delay-expire-after"
ETF1_EPOCH = "scheduler-epoch"
ETF1_TARGET_TOPIC = "scheduler-target-topic"
ETF1_TARGET_KEY = "scheduler-target-key"
# Added to every delivered record.
OUT_ID = "delay-id"
OUT_ORIGIN = "delay-origin"
OUT_DUE_MS = "delay-due-ms"
# Added to every delivered occurrence of a recurring schedule (1-based).
OUT_OCCURRENCE = "delay-occurrence"
# Added to every dead-lettered record.
OUT_ERROR = "delay-error"
OUT_ERROR_DETAIL = "delay-error-detail"

# Control headers: consumed here, stripped from the delivered record.
CONTROL_HEADERS = frozenset(
    {
        TARGET_TOPIC,
        TARGET_PARTITION,
        DELAY_MS,
        DELAY_SEC,
        DELIVER_AT_MS,
        DELIVER_AT,
        DELAY_ID,
        DELAY_CANCEL,
        DELAY_CANCEL_PREFIX,
        ON_DUPLICATE,
        RMQ_DELIVER_MS,
        RMQ_DELAY_MS,
        RMQ_DELAY_SEC,
        RMQ_CANCEL,
        RMQ_LEVEL,
        ETF1_EPOCH,
        ETF1_TARGET_TOPIC,
        ETF1_TARGET_KEY,
        OUT_ORIGIN,
        OUT_DUE_MS,
        DELAY_CRON,
        DELAY_TIMEZONE,
        DELAY_EVERY,
        DELAY_UNTIL,
        DELAY_COUNT,
        DELAY_JITTER,
        DELAY_EXPIRE_AFTER,
        OUT_OCCURRENCE,
    }
)
RECURRENCE_HEADERS = frozenset({DELAY_CRON, DELAY_TIMEZONE, DELAY_EVERY, DELAY_UNTIL, DELAY_COUNT})

# The sidecar's own headers inside its store, never a producer's: a parked retry's state
# (``bridge/delivery/attempts.py``), the store's note on a damaged record
# (``timerlog/quarantine.py``) and a recurring schedule's state (``contract/series.py``).
# Stripped at ingest: a producer that sets one must not steer delivery (a garbage retry
# state used to crash the loop at every restart).
SERIES_HEADER = "delaybridge-series"
#: A one-off's deadline (epoch ms): past it, the message is dead-lettered as expired
#: instead of delivered (``contract/expiry.py``).
EXPIRE_HEADER = "delaybridge-expire-at"
INTERNAL_HEADERS = frozenset(
    {"delaybridge-retry", "delaybridge-store-corrupt", SERIES_HEADER, EXPIRE_HEADER}
)

"""``delaybridge bench ingest``: what one consumed record costs the sidecar's ingest.

In one process, on a real store in a scratch directory: ``Ingestor.handle`` on batches
of ``confluent_kafka.Message`` objects like the ones a consumer hands out (a target
topic, a relative delay, two headers of the producer's, a key and a 100-byte value),
everything ``handle`` does for a schedule included: the classify, building the timer
record, the store append (commit-log encode, timer log, wheel). No changelog and no
broker: the librdkafka side (``consume``, its header list) is not in it, the profile of
``bench e2e`` has that.

The compiled and the pure-Python hot path (``delaybridge/hotpath.py``) run interleaved,
round by round, on the same store (so a busy machine slows both alike); the time is the
thread's CPU time, the best of ``--repeat`` rounds, per record. Steadier than the e2e
throughput, which moves with the broker and the machine's other load.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from confluent_kafka import TIMESTAMP_CREATE_TIME, Message

from delaybridge import hotpath
from delaybridge.bridge.ingest.ingestor import Ingestor
from delaybridge.bridge.ingest.side_writes import SideWriter
from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.partition.state import PartitionState, open_partition
from delaybridge.contract.rules import HeaderRules
from delaybridge.settings import DEFAULT_DELAY_LEVELS
from delaybridge.timerlog import StoreSettings, SystemClock

TOPIC = "delay"
BATCH = 500
HEADERS = [
    ("delay-target-topic", b"orders"),
    ("delay-ms", b"5000"),
    ("trace-id", b"4bf92f3577b34da6a3ce929d0e0e4736"),
    ("content-type", b"application/json"),
]


def messages(first_offset: int, n: int, now_ms: int) -> list[Message]:
    """``n`` consumed records of partition 0 from ``first_offset`` on."""
    value = b"x" * 100
    return [
        Message(
            topic=TOPIC,
            partition=0,
            offset=o,
            key=b"order-%d" % o,
            value=value,
            headers=list(HEADERS),
            timestamp=(TIMESTAMP_CREATE_TIME, now_ms + o % 1000),
        )
        for o in range(first_offset, first_offset + n)
    ]


def run(n: int, repeat: int, data_dir: Path) -> dict[str, Any]:
    clock = SystemClock()
    rules = HeaderRules.from_strings(
        DEFAULT_DELAY_LEVELS, max_delay_ms=365 * 86_400_000, delay_topics=(TOPIC,)
    )
    settings = StoreSettings(tick_ms=100, wheel_slots=1024)
    part: PartitionState = open_partition(data_dir, TOPIC, 0, settings, clock, 0)
    ingest = Ingestor(rules, cast(SideWriter, None), "dlt", "cancels", Tally(), clock)
    was_compiled = hotpath.implementation() != "pure"
    variants = ["pure"] + (["compiled"] if _has_compiled() else [])
    best = dict.fromkeys(variants, float("inf"))
    offset = 0
    try:
        for _ in range(repeat):
            for name in variants:
                impl = hotpath.switch(name == "compiled")
                batch = messages(offset, n, clock.now_ms())
                offset += n
                started = time.thread_time()
                for i in range(0, n, BATCH):
                    rewind = ingest.handle(batch[i : i + BATCH], {part.key: part})
                    assert not rewind, rewind
                took = time.thread_time() - started
                best[name] = min(best[name], took)
                assert part.store.last_source_offset == offset - 1, (impl, offset)
            part.store.flush()
    finally:
        hotpath.switch(was_compiled)
        part.close()
    ns = {name: round(t / n * 1e9) for name, t in best.items()}
    hot_path = {name: _impl(name) for name in variants}
    hotpath.switch(was_compiled)
    return {
        "records": n,
        "repeat": repeat,
        "batch": BATCH,
        "hot_path": hot_path,
        "handle_ns_per_record": ns,
        "compiled_vs_pure": round(best["pure"] / best["compiled"], 2)
        if "compiled" in best
        else None,
    }


def _has_compiled() -> bool:
    return hotpath.switch(True) != "pure"


def _impl(name: str) -> str:
    return hotpath.switch(name == "compiled")


def run_ingest_bench(n: int, repeat: int, out: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        result = run(n, repeat, Path(tmp))
    per = result["handle_ns_per_record"]
    times = ", ".join(f"{name} {v:,} ns" for name, v in per.items())
    ratio = result["compiled_vs_pure"]
    print(
        f"delaybridge bench ingest: Ingestor.handle, {n:,} records per round, best of "
        f"{repeat}, CPU time per record: {times}"
        + (f" (compiled / pure: {ratio}x)" if ratio else "")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"ingest": result}, indent=2))
    print(f"wrote {out}")
    return 0

"""``delaybridge bench hotpath``: classify and the record codec, pure vs compiled.

Times, per record, in one process and interleaved (so a busy machine slows every
variant alike): ``classify()`` on a typical delay-topic record (target topic, a relative
delay, two headers of the producer's, a key and a 100-byte value), the commit-log
encode (``encode_batch``, batches of 500) and decode (``decode_many``, all records of a
buffer in arrival order), for each implementation:

* ``pure``: the source modules (``contract/classifier.py``, ``timerlog/commit_record.py``);
* ``mypyc``: the build ``delaybridge/hotpath.py`` selects (``delaybridge_compiled``);
* any other build named with ``--package NAME=DIR`` (e.g. the Cython build made by
  ``python -m delaybridge.tools.build_compiled --backend cython --package
  delaybridge_compiled_cython --dest DIR``).

Every variant's decisions and bytes are checked equal to pure Python's first. Times
are the thread's CPU time (a shared machine deschedules us; CPU time does not count
that), the best of ``--repeat`` short interleaved rounds; the ratio is pure's time over
the variant's (a speed-up).
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from delaybridge.contract import classifier
from delaybridge.contract.decisions import Schedule, SourceRecord
from delaybridge.contract.rules import HeaderRules
from delaybridge.hotpath import PACKAGE, source_hash
from delaybridge.settings import DEFAULT_DELAY_LEVELS
from delaybridge.timerlog import commit_record
from delaybridge.timerlog.records import TimerRecord

TS = 1_700_000_000_000
BATCH = 500
OPS = ("classify", "encode", "decode")


@dataclass(frozen=True)
class Variant:
    name: str
    classify: ModuleType
    codec: ModuleType


def load_variants(extra: Sequence[str]) -> tuple[list[Variant], list[str]]:
    """Pure, the default build if present and current, and each ``NAME=DIR`` build;
    plus a note for each build that could not be used."""
    variants = [Variant("pure", classifier, commit_record)]
    notes: list[str] = []
    for spec in [PACKAGE, *extra]:
        package, _, where = spec.partition("=")
        if where and where not in sys.path:
            sys.path.insert(0, where)
        try:
            cls = importlib.import_module(f"{package}.classifier")
            cod = importlib.import_module(f"{package}.commit_record")
        except ImportError as exc:
            notes.append(f"{package}: not built ({exc})")
            continue
        stale = [
            m.__name__
            for m, pure in ((cls, classifier), (cod, commit_record))
            if getattr(m, "SOURCE_SHA256", None) != source_hash(str(pure.__file__))
        ]
        if stale:
            notes.append(f"{package}: stale build of {', '.join(stale)}: rebuild it")
            continue
        variants.append(Variant(str(getattr(cls, "COMPILER", package)), cls, cod))
    return variants, notes


def workload(n: int) -> tuple[list[SourceRecord], list[TimerRecord]]:
    headers = (
        ("delay-target-topic", b"orders"),
        ("delay-ms", b"5000"),
        ("trace-id", b"4bf92f3577b34da6a3ce929d0e0e4736"),
        ("content-type", b"application/json"),
    )
    value = b"x" * 100
    sources = [
        SourceRecord("delay", 0, i, TS + i, b"order-%d" % i, value, headers) for i in range(n)
    ]
    rules = _rules()
    timers = []
    for s in sources:
        d = classifier.classify(s, rules, TS)
        assert isinstance(d, Schedule), d
        timers.append(
            TimerRecord(
                d.id,
                d.due_ms,
                d.target_topic,
                d.target_partition,
                d.key,
                s.value,
                d.headers,
                s.offset,
                s.timestamp_ms,
            )
        )
    return sources, timers


def _rules() -> HeaderRules:
    return HeaderRules.from_strings(
        DEFAULT_DELAY_LEVELS, max_delay_ms=365 * 86_400_000, delay_topics=("delay",)
    )


def _ops(
    v: Variant, sources: list[SourceRecord], timers: list[TimerRecord]
) -> dict[str, Callable[[], object]]:
    rules = _rules()
    classify = v.classify.classify
    encode, decode = v.codec.encode_batch, v.codec.decode_many
    batches = [timers[i : i + BATCH] for i in range(0, len(timers), BATCH)]
    enc = commit_record.encode_batch(timers)
    raw = b"".join(enc.parts)
    offsets, o = [], 0
    for size in enc.sizes:
        offsets.append(o)
        o += size
    maps = (raw,)
    paths = (Path("bench"),)
    segs = [0] * len(offsets)
    return {
        "classify": lambda: [classify(s, rules, TS) for s in sources],
        "encode": lambda: [encode(b) for b in batches],
        "decode": lambda: decode(maps, paths, segs, offsets),
    }


def _batches(batches: object) -> list[tuple[object, ...]]:
    assert isinstance(batches, list)
    return [(b.parts, b.sizes, b.id_hashes, b.due_ms, b.topics) for b in batches]


def run(n: int, repeat: int, extra: Sequence[str]) -> dict[str, object]:
    variants, notes = load_variants(extra)
    sources, timers = workload(n)
    ops = {v.name: _ops(v, sources, timers) for v in variants}
    expected = {op: fn() for op, fn in ops["pure"].items()}
    for v in variants[1:]:  # a compiled build must not change one decision or byte
        for op, fn in ops[v.name].items():
            got, want = fn(), expected[op]
            if op == "encode":
                got, want = _batches(got), _batches(want)
            if got != want:
                raise AssertionError(f"{v.name}: {op} differs from pure Python")
    best = {v.name: dict.fromkeys(OPS, float("inf")) for v in variants}
    for _ in range(repeat):
        for op in OPS:
            for v in variants:
                started = time.thread_time()
                ops[v.name][op]()
                took = time.thread_time() - started
                best[v.name][op] = min(best[v.name][op], took)
    per_record = {
        name: {op: round(t / n * 1e9) for op, t in times.items()} for name, times in best.items()
    }
    return {
        "records": n,
        "repeat": repeat,
        "ns_per_record": per_record,
        "speedup_vs_pure": {
            name: {op: round(best["pure"][op] / t, 2) for op, t in times.items()}
            for name, times in best.items()
        },
        "notes": notes,
    }


def run_hotpath_bench(n: int, repeat: int, extra: Sequence[str], out: Path) -> int:
    from rich.console import Console
    from rich.table import Table

    result = run(n, repeat, extra)
    table = Table(title=f"delaybridge bench hotpath ({n:,} records, best of {repeat}, CPU time)")
    table.add_column("implementation")
    for op in OPS:
        table.add_column(f"{op} ns/rec (x pure)", justify="right")
    per, speed = result["ns_per_record"], result["speedup_vs_pure"]
    assert isinstance(per, dict) and isinstance(speed, dict)
    for name, times in per.items():
        table.add_row(name, *(f"{times[op]:,} ({speed[name][op]:.2f}x)" for op in OPS))
    console = Console()
    console.print(table)
    for note in result["notes"]:  # type: ignore[attr-defined]
        console.print(f"[yellow]{note}[/yellow]")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"hotpath": result}, indent=2))
    print(f"wrote {out}")
    return 0

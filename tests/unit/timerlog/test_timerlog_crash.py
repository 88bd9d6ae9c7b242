"""Crash tests: cut store files at random offsets and flip random bits.

A store is built once (several flushed batches, cancels, deliveries, rolls, an
unflushed tail; the space of finished messages given back: dead prefixes and the inside
of large records punched out), then copied and damaged hundreds of times. Each damaged copy is
reopened (with ``verify_commit_log``) and drained. Required: either recovery or the
drain raises IntegrityError naming the file, or the output is exactly what the
undamaged store delivers, or -- the checkpoint damaged -- the store is rescued from its
segments and delivers at least everything the undamaged one does; damage inside data
the checkpoint vouches for must always be detected. The wheel is an index: damage to
it is repaired and must not change the output. A record the cursor has passed is dead
(its inside may be punched out to give its space back): the checkpoint vouches only
for its length. CRASH_CASES=N changes the number of
cases per kind.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from delaybridge.errors import IntegrityError
from delaybridge.fileformat import HEADER_SIZE
from delaybridge.timerlog import ManualClock, StoreSettings, TimerRecord, TimerStore, timer_entry
from tests.unit.timerlog.support import START_MS, drain, rec

CASES = int(os.environ.get("CRASH_CASES", "120"))
# Copies are made in RAM when possible: hundreds of copies, no disk I/O to wait for.
SCRATCH = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
SETTINGS = StoreSettings(
    tick_ms=100,
    wheel_slots=64,
    commit_segment_bytes=16_384,
    timer_segment_entries=128,
    cancel_grace_ms=60_000,
)
END_MS = START_MS + 3_600_000


def build(directory: Path) -> None:
    clock = ManualClock(START_MS)
    store = TimerStore.open(directory, SETTINGS, clock)
    n = 0
    for batch in range(6):
        recs = []
        for _ in range(60):
            n += 1
            delay = (n * 7919) % 20_000 - 2_000  # past, near, beyond the 6.4 s window
            recs.append(
                rec(
                    f"m{n}",
                    clock.now_ms() + delay,
                    offset=n,
                    value=bytes([n % 251]) * 90,
                    topic="a" if n % 3 else "b",
                )
            )
        for k in range(3):  # records of several blocks, due out of arrival order
            n += 1
            delay = 4_000 - 1_500 * k
            recs.append(
                rec(f"m{n}", clock.now_ms() + delay, offset=n, value=bytes([n % 251]) * 12_000)
            )
        store.append(recs)
        store.cancel([(f"m{n - 5}", None), (f"m{n - 9}", "b"), (f"later{batch}", None)])
        clock.advance(900)
        drain(store, 17)
        store.space_short = batch % 2 == 1  # the inside of finished large records punched
        store.flush(recompute_live=True)
    store.append([rec("unflushed", clock.now_ms() + 1_000, offset=n + 1)])
    store.abandon()


@dataclass
class Template:
    path: Path
    expected: list[TimerRecord]
    vouched: dict[Path, list[tuple[int, int]]]
    """Byte ranges per file (relative to the store) that recovery must check."""


def vouched_ranges(directory: Path) -> dict[Path, list[tuple[int, int]]]:
    ck = orjson.loads((directory / "checkpoint").read_bytes()[16:])
    # Not the wheel: it is an index, made again and rebuilt when damaged (the output
    # must then be exactly the template's, which check_case requires of any damage
    # outside these ranges).
    out: dict[Path, list[tuple[int, int]]] = {Path("checkpoint"): [(0, 1 << 30)]}
    store = TimerStore.open(directory, SETTINGS, ManualClock(START_MS + 5_400))
    for log, spans in (
        (store.commit_log.log, unfinished_records(store, ck)),
        (store.timer.log, [(ck["live_start"] * 32, ck["timer_end"] * 32)]),
    ):
        for i, seg in enumerate(log.segments):
            rel = seg.path.relative_to(directory)
            ranges = [(0, HEADER_SIZE)]
            for lo, hi in spans:
                a, b = max(lo, seg.base), min(hi, log.segment_end(i))
                if a < b:
                    ranges.append((seg.offset(a), seg.offset(b)))  # 20-byte timer entries
            out[rel] = ranges
    cancels = store.cancels.path.relative_to(directory)
    out[cancels] = [(0, HEADER_SIZE + ck["cancel_end"])]
    store.abandon()
    return out


def unfinished_records(store: TimerStore, ck: dict[str, int]) -> list[tuple[int, int]]:
    """The commit-log ranges of the live records not finished (ticks at or after the
    cursor's), and the length of the last record: what recovery checks. A finished
    record is dead; its inside may be punched out (timerlog/reclaim.py), and damage
    there changes nothing."""
    entries = store.timer.read(ck["live_start"], ck["timer_end"])
    if not len(entries):
        return []
    starts = timer_entry.positions_of(entries).tolist()
    ends = [*starts[1:], ck["commit_end"]]
    spans = [
        (a, b)
        for a, b, slot in zip(starts, ends, entries["slot_ms"].tolist(), strict=True)
        if slot >= ck["done_tick_ms"]
    ]
    return [*spans, (starts[-1], starts[-1] + 4)]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Template]:
    root = Path(tempfile.mkdtemp(prefix="dbcrash-", dir=SCRATCH))
    base = root / "template"
    build(base)
    vouched = vouched_ranges(base)
    probe = base.with_name("probe")
    shutil.copytree(base, probe)
    expected = run(probe)
    assert len(expected) > 100  # the template holds real pending work
    yield Template(base, expected, vouched)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def scratch(template: Template) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="case-", dir=template.path.parent))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(directory: Path) -> list[TimerRecord]:
    return run_and_tell(directory)[0]


def run_and_tell(directory: Path) -> tuple[list[TimerRecord], bool]:
    """What the store delivers, and whether it had to be rescued from its segments."""
    clock = ManualClock(START_MS + 5_400)
    store = TimerStore.open(directory, SETTINGS, clock, verify_commit_log=True)
    try:
        out = drain(store)
        clock.set(END_MS)
        return out + drain(store), store.rescued
    finally:
        store.abandon()


def files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name != "LOCK")


def inside(template: Template, rel: Path, offset: int) -> bool:
    return any(a <= offset < b for a, b in template.vouched.get(rel, []))


def check_case(template: Template, work: Path, rel: Path, offset: int, what: str) -> bool:
    """True if the damage was detected, False if it was harmless; fails otherwise."""
    try:
        got, rescued = run_and_tell(work)
    except IntegrityError as exc:
        assert str(work) in str(exc) or "checkpoint" in str(exc), exc
        return True
    if rescued:  # the checkpoint was lost: at least once, everything still pending
        assert rel == Path("checkpoint"), f"{what} in {rel} at {offset}: rescued"
        missing = set(template.expected) - set(got)
        assert not missing, f"{what} in {rel} at {offset}: rescue lost {len(missing)}"
        return True
    assert not inside(template, rel, offset), f"{what} in {rel} at {offset} went unnoticed"
    assert got == template.expected, f"{what} in {rel} at {offset} changed the output"
    return False


@pytest.mark.parametrize("seed", range(3))
def test_truncation_anywhere_is_detected_or_harmless(
    template: Template, scratch: Path, seed: int
) -> None:
    rnd = random.Random(seed)
    detected = 0
    for case in range(CASES // 3):
        work = scratch / f"t{case}"
        shutil.copytree(template.path, work)
        target = rnd.choice(files(work))
        size = target.stat().st_size
        cut = rnd.randrange(0, size) if size else 0
        os.truncate(target, cut)
        detected += check_case(template, work, target.relative_to(work), cut, "truncation")
        shutil.rmtree(work)
    assert detected > 0  # the cases do reach data that matters


@pytest.mark.parametrize("seed", range(3))
def test_bit_flip_anywhere_is_detected_or_harmless(
    template: Template, scratch: Path, seed: int
) -> None:
    rnd = random.Random(100 + seed)
    detected = 0
    for case in range(CASES // 3):
        work = scratch / f"f{case}"
        shutil.copytree(template.path, work)
        target = rnd.choice(files(work))
        rel = target.relative_to(work)
        ranges = template.vouched.get(rel)
        size = target.stat().st_size
        if ranges and rnd.random() < 0.7:  # aim most flips at data that matters
            a, b = rnd.choice(ranges)
            offset = rnd.randrange(a, min(b, size))
        else:
            offset = rnd.randrange(0, size)
        with open(target, "r+b") as f:
            f.seek(offset)
            byte = f.read(1)[0]
            f.seek(offset)
            f.write(bytes([byte ^ (1 << rnd.randrange(8))]))
        detected += check_case(template, work, rel, offset, "bit flip")
        shutil.rmtree(work)
    assert detected > CASES // 6  # most flips aim at vouched data


def test_clean_copy_reproduces_the_template(template: Template, tmp_path: Path) -> None:
    work = tmp_path / "clean"
    shutil.copytree(template.path, work)
    got = run(work)
    assert got == template.expected
    assert "unflushed" not in {r.id for r in got}

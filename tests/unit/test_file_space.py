"""A file's space: reserved, given back as holes, and its data ranges found (file_space.py).

These run on the test machine's own file system (ext4 here); the same calls on a full
tmpfs are tests/integration/timerlog/test_store_full_tmpfs.py.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from delaybridge import file_space
from delaybridge.durable import allocated_bytes
from delaybridge.file_space import HOLES_UNSUPPORTED, block_size, data_ranges, punch_hole, reserve

MIB = 1 << 20


@pytest.fixture
def fd(tmp_path: Path) -> Iterator[int]:
    descriptor = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o644)
    yield descriptor
    os.close(descriptor)


def allocated(fd: int) -> int:
    return os.fstat(fd).st_blocks * 512


def test_reserve_allocates_a_range_of_a_sparse_file(fd: int) -> None:
    os.ftruncate(fd, 4 * MIB)
    assert allocated(fd) == 0
    reserve(fd, MIB, MIB)
    assert allocated(fd) == MIB
    assert os.fstat(fd).st_size == 4 * MIB


def test_a_punched_hole_gives_its_blocks_back_and_reads_as_zeros(fd: int) -> None:
    os.pwrite(fd, b"x" * (4 * MIB), 0)
    unit = block_size(fd)
    punch_hole(fd, unit, 2 * MIB)
    assert allocated(fd) == 4 * MIB - 2 * MIB
    assert os.fstat(fd).st_size == 4 * MIB  # positions do not move
    assert os.pread(fd, 8, unit) == b"\0" * 8
    assert os.pread(fd, 8, 0) == b"x" * 8
    assert data_ranges(fd, 0, 4 * MIB) == [(0, unit), (unit + 2 * MIB, 4 * MIB)]


def test_data_ranges_of_a_file_with_nothing_after_a_point(fd: int, tmp_path: Path) -> None:
    os.ftruncate(fd, 4 * MIB)
    assert data_ranges(fd, 0, 4 * MIB) == []
    os.pwrite(fd, b"x", 0)
    assert data_ranges(fd, 0, 4 * MIB) == [(0, block_size(fd))]
    assert allocated_bytes(tmp_path / "f") == block_size(fd)


def test_a_libc_without_fallocate_is_a_file_system_without_holes(
    fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_space, "_fallocate", lambda: None)
    with pytest.raises(OSError) as raised:
        punch_hole(fd, 0, 4096)
    assert raised.value.errno in HOLES_UNSUPPORTED and raised.value.errno == errno.ENOSYS

"""``delaybridge bench store`` reports each phase's own peak RSS (VmHWM reset before it),
not only samples taken after the store let its mapped pages go."""

from __future__ import annotations

from pathlib import Path

from delaybridge.timerlog.bench import peak_mb, run_one


def test_each_phase_reports_its_own_peak(tmp_path: Path) -> None:
    ballast = bytearray(256 * 1024 * 1024)
    ballast[::4096] = b"x" * len(range(0, len(ballast), 4096))  # resident: in the peak
    before = peak_mb()
    del ballast
    result = run_one(20_000, tmp_path, 5_000)
    assert result.deliver_count >= 5_000
    assert result.rss_peak_mb_append is not None and result.rss_peak_mb_deliver is not None
    # Reset before each phase: the 256 MB freed before the run is in neither peak.
    assert result.rss_peak_mb_append < before - 200
    assert result.rss_peak_mb_deliver < before - 200
    assert result.rss_peak_mb_deliver >= result.rss_mb_end * 0.5  # a real reading

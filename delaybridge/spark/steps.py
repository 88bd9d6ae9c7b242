"""Named, timed steps of a long job: a rich spinner on a terminal, a log line always."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

log = logging.getLogger("delaybridge.spark")


class Steps:
    """``with steps("read"): ...`` shows what runs now and keeps each step's seconds.

    Not thread-safe; the driver thread uses it.
    """

    def __init__(self, *, enabled: bool = True) -> None:
        self._console = Console(stderr=True)
        self._spinner = enabled and sys.stderr.isatty()
        self.durations: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        if self._spinner:
            with self._console.status(f"[bold]{name}[/] ..."):
                yield
        else:
            yield
        elapsed = time.monotonic() - started
        self.durations[name] = round(elapsed, 3)
        log.info("%s: %.1f s", name, elapsed)
        if self._spinner:
            self._console.print(f"[green]✓[/] {name} [dim]({elapsed:.1f} s)[/]")

"""A progress bar per downloaded file, for long fetches (the pinned Maven jars)."""

from __future__ import annotations

import os
import sys
from types import TracebackType

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TransferSpeedColumn,
)


class FetchProgress:
    """A rich bar per jar, in bytes, labelled ``[n/total] file``.

    Disabled (every method a no-op) when asked, when stderr is not a terminal,
    or under CI, so logs stay readable; :func:`fetch` logs a summary instead.
    """

    def __init__(self, files: int, *, enabled: bool) -> None:
        enabled = enabled and sys.stderr.isatty() and not os.environ.get("CI")
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            disable=not enabled,
            transient=True,
        )
        self._files = files
        self._started = 0

    def __enter__(self) -> FetchProgress:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.stop()

    def start_file(self, name: str, total_bytes: int | None) -> TaskID:
        self._started += 1
        return self._progress.add_task(f"[{self._started}/{self._files}] {name}", total=total_bytes)

    def advance(self, task: TaskID, nbytes: int) -> None:
        self._progress.advance(task, nbytes)

    def finish_file(self, task: TaskID) -> None:
        self._progress.remove_task(task)

"""Debian's chromium, driven by Playwright, for the console's browser tests.

Playwright cannot download its own browser here, so it is pointed at the system's
(``scripts/install-chromium`` installs it and exports ``DELAYBRIDGE_CHROMIUM``). A
missing browser is a failure naming the script, never a skip. The flags are the ones
known to work as root on these machines (no sandbox, headless, no GPU, no background
network); Playwright gives every launch a fresh, empty ``--user-data-dir`` of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright

FLAGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    path = os.environ.get("DELAYBRIDGE_CHROMIUM") or "/usr/bin/chromium"
    if not Path(path).exists():
        raise AssertionError(
            f"no chromium at {path}: run scripts/install-chromium (scripts/test does), or set "
            "DELAYBRIDGE_CHROMIUM to a Chromium binary"
        )
    return path


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()

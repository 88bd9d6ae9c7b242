"""Subcommands of the bridge part (filled in by its issue)."""

from __future__ import annotations

import argparse
from typing import Any


def register(commands: Any, bench: Any) -> None:
    """Add this part's subcommands to ``commands`` and its benchmarks to ``bench``."""
    del commands, bench


def _unused(args: argparse.Namespace) -> int:
    return 0

"""Extra sidecar settings from a benchmark's command line, laid over the settings it writes.

``--set store.cancel_grace_ms=2000`` names a setting by its dotted path in the settings
file (docs/configuration.md) and gives its value in YAML (``2000`` is a number, ``true`` a
boolean, ``'007'`` a string); ``--overlay FILE`` is a YAML document of settings. Both are
merged into the benchmark's own settings key by key at every depth, files first, then
each ``--set`` in order, so a benchmark can be run with a setting on and off without a
code change (the sidecar validates the result when it starts).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml


def parse_set(text: str) -> dict[str, Any]:
    """``a.b=value`` as ``{"a": {"b": value}}`` (the value read as YAML); argparse's
    ``type=`` for ``--set``."""
    path, sep, raw = text.partition("=")
    keys = path.strip().split(".")
    if not sep or not all(keys):
        raise argparse.ArgumentTypeError(f"expected key.path=value, not {text!r}")
    try:
        value: Any = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: the value is not YAML: {exc}") from None
    for key in reversed(keys):
        value = {key: value}
    return dict(value)


def load_overlay(path: Path) -> dict[str, Any]:
    """A YAML file of settings; argparse's ``type=`` for ``--overlay``."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise argparse.ArgumentTypeError(f"{path}: {exc}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise argparse.ArgumentTypeError(f"{path}: expected a mapping of settings")
    return doc


def merged(base: Mapping[str, Any], overlays: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``base`` with each overlay laid over it in turn: mappings merge key by key at every
    depth, anything else replaces. Neither input is changed."""
    out = dict(base)
    for overlay in overlays:
        for key, value in overlay.items():
            current = out.get(key)
            if isinstance(value, Mapping) and isinstance(current, Mapping):
                out[key] = merged(current, [value])
            else:
                out[key] = value
    return out

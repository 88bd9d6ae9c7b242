"""The Helm chart's `config` mirrors the sidecar's settings (helm/delaybridge).

`config` is written verbatim into the sidecar's file, so values.schema.json must
accept exactly the settings the sidecar accepts, with the same bounds, and values.yaml
must show the sidecar's own defaults. These tests read the chart's files only (no
helm), so they run with the unit suite: a new setting fails them before it is
committed, not in CI (tests/integration/test_helm_chart.py renders the chart).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from delaybridge.settings import Settings

CHART = Path(__file__).resolve().parents[2] / "helm" / "delaybridge"
# Settings the chart sets itself (volume path, listen address, pod name, token) instead
# of taking them from `config`.
CHART_OWNED = {"store.data_dir", "http.host", "http.admin_token", "kafka.instance_id"}
# Where the chart is stricter than the sidecar on purpose: (lower, upper) it accepts.
STRICTER = {
    # Port 0 means "any free port", which the probes and the Services cannot reach.
    "http.port": (1, 65535),
    # CreateTopics takes -1 (the broker's default) or a real count.
    "changelog.replication_factor": (-1, math.inf),
}
# Shown empty in values.yaml (the release must name its brokers; the schema requires it).
CHART_DEFAULTS = {"kafka.bootstrap_servers": ""}
JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _settings(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _settings(annotation, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", field


def _schema(tree: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    for name, sub in tree.get("properties", {}).items():
        if sub.get("type") == "object" and "properties" in sub:
            yield from _schema(sub, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", sub


def _values(tree: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, value in tree.items():
        if isinstance(value, dict) and value and name not in ("client", "routes"):
            yield from _values(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def _config_schema() -> dict[str, dict[str, Any]]:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    return dict(_schema(schema["properties"]["config"]))


def _config_values() -> dict[str, Any]:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    return dict(_values(values["config"]))


def _settings_bounds(field: FieldInfo) -> tuple[float, float]:
    """The closed integer range (or the bounds, for floats) a Field() accepts."""
    step = 1 if field.annotation is int else 0
    low, high = -math.inf, math.inf
    for meta in field.metadata:
        low = max(low, getattr(meta, "ge", -math.inf), getattr(meta, "gt", -math.inf) + step)
        high = min(high, getattr(meta, "le", math.inf), getattr(meta, "lt", math.inf) - step)
    return low, high


def _schema_bounds(sub: dict[str, Any]) -> tuple[float, float]:
    step = 1 if sub.get("type") == "integer" else 0
    low = max(sub.get("minimum", -math.inf), sub.get("exclusiveMinimum", -math.inf) + step)
    high = min(sub.get("maximum", math.inf), sub.get("exclusiveMaximum", math.inf) - step)
    return low, high


def test_values_schema_covers_every_sidecar_setting() -> None:
    """`config` mirrors the sidecar's settings: a new setting must reach the chart."""
    in_schema = set(_config_schema())
    in_settings = {path for path, _ in _settings(Settings)} - CHART_OWNED
    assert in_settings - in_schema == set(), "settings missing from values.schema.json"
    assert in_schema - in_settings == set(), "values.schema.json has keys the sidecar rejects"
    assert set(_config_values()) <= in_schema, "values.yaml has keys the schema rejects"


def test_values_schema_has_the_settings_types_and_bounds() -> None:
    schema = _config_schema()
    for path, field in _settings(Settings):
        if path in CHART_OWNED:
            continue
        sub, annotation = schema[path], field.annotation
        if get_origin(annotation) is Literal:
            assert sub.get("enum") == list(get_args(annotation)), path
        elif annotation in JSON_TYPES:
            assert sub.get("type") == JSON_TYPES[annotation], path
        if annotation in (int, float):
            wanted = STRICTER.get(path, _settings_bounds(field))
            assert _schema_bounds(sub) == wanted, f"{path}: schema bounds differ from Field()"


def test_values_yaml_shows_the_sidecars_defaults() -> None:
    """A value left alone in values.yaml behaves as the setting left out of the file."""
    defaults = {
        path: field.get_default(call_default_factory=True) for path, field in _settings(Settings)
    }
    for path, value in _config_values().items():
        assert value == CHART_DEFAULTS.get(path, defaults[path]), f"values.yaml config.{path}"

"""Keep the chart README's table of values in step with values.yaml.

values.yaml documents each value with a ``# --`` comment right above it (the helm-docs
convention; continuation lines are ordinary comments directly below). This script
reads those comments, takes each value's default from the parsed YAML, and writes
the table between the ``<!-- values:start -->`` and ``<!-- values:end -->`` markers
of README.md. A mapping with its own ``# --`` comment is one row (its whole default
shown); a mapping without one is walked into. A leaf without a comment is an error,
so a new value cannot land undocumented.

Usage: ``chart_readme.py CHART_DIR`` rewrites the README; ``--check`` only reports
(exit 1) when the README is out of date.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

START = "<!-- values:start -->"
END = "<!-- values:end -->"
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.\-]+):(?P<rest>.*)$")
DOC_START = re.compile(r"^ *# -- ?(?P<text>.*)$")
DOC_MORE = re.compile(r"^ *# ?(?P<text>.*)$")


@dataclass(frozen=True)
class Row:
    path: str
    default: Any
    description: str


class UndocumentedValue(ValueError):
    """A leaf value in values.yaml has no ``# --`` comment."""


def parse_rows(values_path: Path) -> list[Row]:
    """One row per documented value, in file order."""
    text = values_path.read_text(encoding="utf-8")
    defaults = yaml.safe_load(text)
    lines = text.splitlines()
    rows: list[Row] = []
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing mappings
    documented_depth: int | None = None  # inside a mapping documented as one row
    doc: list[str] | None = None
    for number, line in enumerate(lines, start=1):
        if (start := DOC_START.match(line)) is not None:
            doc = [start["text"]]
            continue
        if doc is not None and line.strip().startswith("#"):
            more = DOC_MORE.match(line)
            doc.append(more["text"] if more else "")
            continue
        match = KEY_LINE.match(line)
        if match is None:
            if not line.strip():
                doc = None
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if documented_depth is not None and len(stack) < documented_depth:
            documented_depth = None
        path = [key for _, key in stack] + [match["key"]]
        if documented_depth is None:
            value = _lookup(defaults, path)
            if doc is not None:
                rows.append(Row(".".join(path), value, " ".join(doc).strip()))
                if isinstance(value, dict) and value:
                    documented_depth = len(path)
            elif not isinstance(value, dict) or not value:
                raise UndocumentedValue(
                    f"{values_path}:{number}: value {'.'.join(path)} has no '# --' comment"
                )
        doc = None
        stack.append((indent, match["key"]))
    return rows


def _lookup(tree: Any, path: list[str]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def render(rows: list[Row]) -> str:
    out = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for row in rows:
        default = json.dumps(row.default, separators=(", ", ": "))
        description = row.description.replace("|", "\\|")
        out.append(f"| `{row.path}` | {_type_name(row.default)} | `{default}` | {description} |")
    return "\n".join(out)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"


def updated_readme(readme: str, table: str, readme_path: Path) -> str:
    if START not in readme or END not in readme:
        raise ValueError(f"{readme_path}: markers {START} and {END} are missing")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chart_dir", type=Path)
    parser.add_argument("--check", action="store_true", help="fail if README.md is stale")
    args = parser.parse_args(argv)
    readme_path: Path = args.chart_dir / "README.md"
    try:
        rows = parse_rows(args.chart_dir / "values.yaml")
    except UndocumentedValue as exc:
        print(f"chart_readme: {exc}", file=sys.stderr)
        return 1
    current = readme_path.read_text(encoding="utf-8")
    wanted = updated_readme(current, render(rows), readme_path)
    if current == wanted:
        print(f"chart_readme: {readme_path} is up to date ({len(rows)} values)")
        return 0
    if args.check:
        print(
            f"chart_readme: {readme_path} is out of date with values.yaml; "
            f"run tools/chart_readme.py {args.chart_dir}",
            file=sys.stderr,
        )
        return 1
    readme_path.write_text(wanted, encoding="utf-8")
    print(f"chart_readme: wrote {len(rows)} values to {readme_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

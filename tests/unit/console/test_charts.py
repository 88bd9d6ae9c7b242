"""The server-side SVG charts: well-formed, escaped, one mark per value."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from delaybridge.console.charts import bars, columns, lines

SVG = "{http://www.w3.org/2000/svg}"


def test_columns_one_bar_per_bin_with_its_number_on_hover() -> None:
    svg = ET.fromstring(str(columns([0, 3, 12], ["+0m", "+1m", "+2m"], title="due")))
    rects = svg.findall(f"{SVG}rect")
    assert len(rects) == 3
    assert [r.find(f"{SVG}title").text for r in rects] == ["+0m: 0", "+1m: 3", "+2m: 12"]  # type: ignore[union-attr]
    heights = [float(r.get("height", "0")) for r in rects]
    assert heights[0] == 0 and heights[1] < heights[2]


def test_labels_are_escaped() -> None:
    hostile = '<script>alert("x")</script>&'
    out = str(bars([(hostile, 5)], title=hostile))
    assert "<script>" not in out
    svg = ET.fromstring(out)
    assert svg.find(f"{SVG}title").text == hostile  # type: ignore[union-attr]


def test_lines_and_empty_input() -> None:
    svg = ET.fromstring(str(lines([("delivered/s", [1.0, 2.0, 0.5]), ("dead", [])], title="r")))
    assert len(svg.findall(f"{SVG}polyline")) == 1
    assert ET.fromstring(str(columns([], [], title="none"))) is not None
    assert ET.fromstring(str(bars([], title="none"))) is not None

"""Charts drawn on the server as SVG, inline in the page.

Why SVG from Python rather than a JavaScript chart library: the pages need three simple
pictures (a due-time histogram, counts per topic, a rate over time), which are ~150 lines
here; the console then ships no script at all, so its Content-Security-Policy forbids
scripts outright (``script-src 'none'``), the pages work with JavaScript off, a
screenshot or a saved page shows the same picture, and there is no vendored bundle to
keep patched. Every bar carries a ``<title>``, which the browser shows on hover, so the
exact numbers are one mouse move away; the tables beside the charts have them too.

Colours come from the stylesheet (classes ``bar``, ``line``, ``axis``...), not inline
styles, which the policy also forbids.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from markupsafe import Markup


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _nice_max(value: float) -> float:
    """The axis' top: 1, 2 or 5 times a power of ten, at least ``value`` (and 1)."""
    if value <= 1:
        return 1.0
    scale = 1.0
    while scale * 10 <= value:
        scale *= 10
    for step in (1, 2, 5, 10):
        if step * scale >= value:
            return step * scale
    return 10 * scale


def columns(
    values: Sequence[float],
    labels: Sequence[str],
    *,
    title: str,
    every: int = 1,
    width: int = 720,
    height: int = 180,
    unit: str = "",
) -> Markup:
    """A column per value (a histogram's bins); ``labels[i]`` under every ``every``-th."""
    left, bottom, top = 44, 22, 8
    plot_w, plot_h = width - left - 6, height - bottom - top
    peak = _nice_max(max(values, default=0))
    n = max(1, len(values))
    slot = plot_w / n
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    for frac in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - frac)
        parts.append(f'<line class="grid" x1="{left}" x2="{width - 6}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(
            f'<text class="axis" x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(_num(peak * frac))}</text>"
        )
    for i, value in enumerate(values):
        h = plot_h * value / peak
        x = left + i * slot
        label = labels[i] if i < len(labels) else str(i)
        parts.append(
            f'<rect class="bar" x="{x + 0.5:.1f}" y="{top + plot_h - h:.1f}" '
            f'width="{max(1.0, slot - 1):.1f}" height="{h:.1f}">'
            f"<title>{escape(label)}: {escape(_num(value))}{escape(unit)}</title></rect>"
        )
        if i % every == 0:
            parts.append(
                f'<text class="axis" x="{x + slot / 2:.1f}" y="{height - 6}" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def bars(items: Sequence[tuple[str, float]], *, title: str, width: int = 720) -> Markup:
    """A horizontal bar per (label, value): counts per topic, per reason."""
    row, label_w = 22, 220
    height = max(row, row * len(items)) + 4
    peak = _nice_max(max((v for _, v in items), default=0))
    plot_w = width - label_w - 70
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    for i, (label, value) in enumerate(items):
        y = 2 + i * row
        w = plot_w * value / peak
        shown = label if len(label) <= 32 else label[:31] + "…"
        number = escape(_num(value))
        parts.append(
            f'<text class="label" x="{label_w - 6}" y="{y + 15}" text-anchor="end">'
            f"{escape(shown)}</text>"
            f'<rect class="bar" x="{label_w}" y="{y + 3}" '
            f'width="{max(1.0, w):.1f}" height="{row - 6}">'
            f"<title>{escape(label)}: {number}</title></rect>"
            f'<text class="value" x="{label_w + w + 6:.1f}" y="{y + 15}">{number}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def lines(
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    title: str,
    width: int = 720,
    height: int = 140,
    unit: str = "/s",
) -> Markup:
    """One polyline per named series of equally spaced values (rates over time)."""
    left, bottom, top = 44, 18, 8
    plot_w, plot_h = width - left - 6, height - bottom - top
    peak = _nice_max(max((v for _, vs in series for v in vs), default=0))
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    for frac in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - frac)
        parts.append(f'<line class="grid" x1="{left}" x2="{width - 6}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(
            f'<text class="axis" x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(_num(peak * frac))}</text>"
        )
    for k, (name, values) in enumerate(series):
        n = len(values)
        if n == 0:
            continue
        step = plot_w / max(1, n - 1)
        points = " ".join(
            f"{left + i * step:.1f},{top + plot_h * (1 - v / peak):.1f}"
            for i, v in enumerate(values)
        )
        latest = f"{escape(name)}: now {escape(_num(values[-1]))}{escape(unit)}"
        parts.append(
            f'<polyline class="line line{k}" points="{points}"><title>{latest}</title></polyline>'
        )
        parts.append(
            f'<text class="legend legend{k}" x="{left + 8 + 190 * k}" y="{height - 4}">'
            f"{escape(name)}</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))

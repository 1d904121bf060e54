"""Plots as text, so a check can print its figures into the page with the rest of its output.

A page shows what its check printed for this build; these charts are part of that output, so
every value they draw was measured in the same run as the numbers beside them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["bars", "scatter"]


def bars(rows: Sequence[tuple[str, float]], *, width: int = 40, fmt: str = "{:.2f}", unit: str = "") -> str:
    """A horizontal bar chart: one line per ``(label, value)``, bars scaled to the largest value."""
    if not rows:
        return ""
    top = max(v for _, v in rows)
    pad = max(len(label) for label, _ in rows)
    lines = []
    for label, v in rows:
        n = 0 if top <= 0 else round(width * v / top)
        lines.append(f"{label:>{pad}} |{'#' * n}{' ' * (width - n)}| {fmt.format(v)}{unit}")
    return "\n".join(lines)


def _scale(v: float, lo: float, hi: float, n: int, log: bool) -> int:
    if log:
        v, lo, hi = math.log10(v), math.log10(lo), math.log10(hi)
    if hi <= lo:
        return 0
    return min(n - 1, max(0, round((v - lo) / (hi - lo) * (n - 1))))


def scatter(
    points: Sequence[tuple[float, float, str]],
    *,
    width: int = 56,
    height: int = 14,
    xlabel: str = "x",
    ylabel: str = "y",
    logx: bool = False,
    logy: bool = False,
) -> str:
    """Points ``(x, y, mark)`` on a character grid; the mark's first character is drawn.

    Axis ends are labelled with the data's range. Log axes need positive values.
    """
    if not points:
        return ""
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    grid = [[" "] * width for _ in range(height)]
    for x, y, mark in points:
        col = _scale(x, x0, x1, width, logx)
        row = height - 1 - _scale(y, y0, y1, height, logy)
        grid[row][col] = mark[:1] or "*"
    top, bottom = f"{y1:.3g}", f"{y0:.3g}"
    pad = max(len(top), len(bottom))
    lines = [f"{ylabel}{' (log)' if logy else ''}"]
    for i, cells in enumerate(grid):
        tick = top if i == 0 else bottom if i == height - 1 else ""
        lines.append(f"{tick:>{pad}} |{''.join(cells)}")
    lines.append(f"{'':>{pad}} +{'-' * width}")
    left, right = f"{x0:.3g}", f"{x1:.3g}"
    gap = max(1, width - len(left) - len(right))
    lines.append(f"{'':>{pad}}  {left}{' ' * gap}{right}")
    lines.append(f"{'':>{pad}}  {xlabel}{' (log)' if logx else ''}")
    return "\n".join(lines)

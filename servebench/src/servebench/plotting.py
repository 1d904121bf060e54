"""Figures that read in light and dark mode and on a phone: one style for every check's plots.

A figure is drawn on a transparent background with mid-grey axes, ticks, labels and grid
(``GREY``, which keeps its contrast on white and on the dark theme's ``#1e2129``), lines in
colours that read on both, and text large enough after an SVG scaled to a 390 px screen.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GREY", "COLORS", "new_figure", "finish"]

GREY = "#8a8f98"
COLORS = ("#3b8fd9", "#e0803a", "#4caf50", "#c05bc8")


def new_figure(ncols: int = 1, *, width: float = 5.0, height: float = 3.3) -> tuple[Any, Any]:
    """A figure of ``ncols`` axes side by side (stacked vertically when more than one: phones are narrow)."""
    import matplotlib.pyplot as plt

    rc = {
        "font.size": 11,
        "text.color": GREY,
        "axes.labelcolor": GREY,
        "axes.edgecolor": GREY,
        "xtick.color": GREY,
        "ytick.color": GREY,
        "grid.color": GREY,
        "grid.alpha": 0.35,
        "legend.frameon": False,
        "axes.prop_cycle": plt.cycler(color=list(COLORS)),
    }
    with plt.rc_context(rc):
        fig, axes = plt.subplots(ncols, 1, figsize=(width, height * ncols), squeeze=False)
    return fig, [a for row in axes for a in row] if ncols > 1 else axes[0][0]


def finish(fig: Any) -> Any:
    """Transparent background, grey text everywhere, tight layout; returns the figure."""
    fig.patch.set_alpha(0.0)
    for ax in fig.axes:
        ax.set_facecolor("none")
        ax.grid(True, alpha=0.35, color=GREY)
        for spine in ax.spines.values():
            spine.set_color(GREY)
        ax.tick_params(colors=GREY, which="both")
        ax.xaxis.label.set_color(GREY)
        ax.yaxis.label.set_color(GREY)
        ax.title.set_color(GREY)
        legend = ax.get_legend()
        if legend is not None:
            legend.get_frame().set_alpha(0.0)
            for text in legend.get_texts():
                text.set_color(GREY)
    fig.tight_layout()
    return fig

"""A grid of coloured cells for attention weights and masks, drawn with matplotlib alone (no reference code).

The chapters' heatmaps need only this, so a notebook (and every grading child) starts without importing
seaborn and pandas, which took about 0.6 s of each start.
"""
from __future__ import annotations

import numpy as np


def heatmap(ax, values, *, cmap: str, vmin: float, vmax: float, xticklabels, yticklabels,
            annotate: bool = False, fmt: str = ".2f", fontsize: float = 8, linewidth: float = 0.5):
    """Draw a (T, S) array on `ax`, row 0 on top, one square cell per entry; NaN cells stay blank.

    `annotate` writes each value in its cell, white on dark cells and black on light ones.
    Returns the QuadMesh (its array holds the values, masked where they are NaN).
    """
    grid = np.ma.masked_invalid(np.asarray(values, dtype=float))
    T, S = grid.shape
    mesh = ax.pcolormesh(grid, cmap=cmap, vmin=vmin, vmax=vmax, edgecolors="white", linewidth=linewidth)
    ax.set_xlim(0, S)
    ax.set_ylim(T, 0)  # row 0 on top
    ax.set_aspect("equal")
    ax.set_xticks(np.arange(S) + 0.5, labels=[str(label) for label in xticklabels])
    ax.set_yticks(np.arange(T) + 0.5, labels=[str(label) for label in yticklabels])
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if annotate:
        colours, blank = mesh.cmap(mesh.norm(grid)), np.ma.getmaskarray(grid)
        for t in range(T):
            for s in range(S):
                if blank[t, s]:
                    continue
                r, g, b, _ = colours[t, s]
                ink = "white" if 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.5 else "black"
                ax.text(s + 0.5, t + 0.5, format(grid[t, s], fmt), ha="center", va="center", color=ink,
                        fontsize=fontsize)
    return mesh

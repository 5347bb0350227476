"""Conceptual figures for chapter 03 (positional encoding), drawn into chapters/03_positional_encoding/images/.

Run: python images/positional_encoding_figures.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: grader.authoring
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch, Rectangle

from grader.authoring.figures import Figures

OUT = Path(__file__).resolve().parents[1] / "chapters" / "03_positional_encoding" / "images"
FIG = Figures("positional_encoding")  # draws each edition; _ translates a text
_ = FIG._
DPI = 100


def binary_counter() -> plt.Figure:
    """Bits of a counter next to smooth waves whose wavelengths double, like the bits' periods."""
    positions = np.arange(32)
    bits = (positions[:, None] >> np.arange(5)[None, :]) & 1  # (32, 5), lowest bit first
    # The smooth analogue of bit i: a wave with the same period 2**(i+1), between -1 and 1.
    waves = -np.cos(np.pi * positions[:, None] / 2.0 ** np.arange(5)[None, :])
    fig, axes = plt.subplots(1, 2, figsize=(8.2, 4.2))
    axes[0].imshow(bits, aspect="auto", cmap="Greys", interpolation="nearest")
    axes[0].set_title(_("binary counter: bit i of p\n(flips every $2^i$ positions)"), fontsize=10)
    axes[0].set_xticks(range(5), [_("bit {i}").format(i=i) for i in range(5)], fontsize=8)
    axes[1].imshow(waves, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    axes[1].set_title(_("smooth version: one wave per column\n(wavelengths 2, 4, 8, 16, 32)"), fontsize=10)
    axes[1].set_xticks(range(5), [_("wave {i}").format(i=i) for i in range(5)], fontsize=8)
    for ax in axes:
        ax.set_ylabel(_("position p"))
    fig.suptitle(_("fast columns on the left, slow columns on the right: every row is different"), fontsize=11)
    fig.tight_layout()
    return fig


def rotation() -> plt.Figure:
    """Each (sin, cos) pair walks round the unit circle; a shift by k turns it by omega * k."""
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 4.3))
    for ax, omega, name in zip(axes, (0.6, 0.15), (_("a fast pair"), _("a slow pair"))):
        circle = np.linspace(0, 2 * np.pi, 200)
        ax.plot(np.sin(circle), np.cos(circle), color="0.8", lw=1)
        p = np.arange(9)
        xs, ys = np.sin(omega * p), np.cos(omega * p)
        ax.plot(xs, ys, "o", color="tab:blue", ms=6)
        for q in (0, 2, 4, 8):
            ax.annotate(f"p={q}", (xs[q], ys[q]), textcoords="offset points", xytext=(8, 4), fontsize=8)
        start, k = 2, 3
        arrow = FancyArrowPatch((xs[start], ys[start]), (xs[start + k], ys[start + k]),
                                connectionstyle=f"arc3,rad={-0.25 if omega > 0.3 else -0.5}",
                                arrowstyle="-|>", mutation_scale=14, color="tab:red", lw=1.6)
        ax.add_patch(arrow)
        ax.plot([0, xs[start]], [0, ys[start]], color="tab:red", lw=0.8, ls="--")
        ax.plot([0, xs[start + k]], [0, ys[start + k]], color="tab:red", lw=0.8, ls="--")
        ax.text(0.0, -0.25, _(r"shift by k={k}: turn by $\omega k$ = {turn:.2f} rad").format(k=k, turn=omega * k),
                ha="center", color="tab:red", fontsize=9)
        ax.set_title(rf"{name}: $\omega$ = {omega}", fontsize=10)
        ax.set_xlabel(_(r"$\sin(\omega p)$  (column 2i)"))
        ax.set_ylabel(_(r"$\cos(\omega p)$  (column 2i+1)"))
        ax.set_aspect("equal")
        ax.set_xlim(-1.3, 1.3)
        ax.set_ylim(-1.3, 1.3)
    fig.suptitle(_("moving k positions rotates every pair; the angle depends on k, never on p"), fontsize=11)
    fig.tight_layout()
    return fig


def layout() -> plt.Figure:
    """Interleaved column layout (this course and the 2017 paper) next to the concatenated one."""
    D = 8
    colours = plt.get_cmap("tab10")
    fig, axes = plt.subplots(2, 1, figsize=(8.4, 2.8))
    interleaved = [("sin", i) if c % 2 == 0 else ("cos", i) for c in range(D) for i in [c // 2]]
    concatenated = [("sin", c) for c in range(D // 2)] + [("cos", c) for c in range(D // 2)]
    rows = [(_("interleaved: P[:, 0::2] = sin, P[:, 1::2] = cos   (this course)"), interleaved),
            (_("concatenated: all sin, then all cos   (a different convention)"), concatenated)]
    for ax, (title, cells) in zip(axes, rows):
        for c, (fn, i) in enumerate(cells):
            ax.add_patch(Rectangle((c, 0), 0.94, 1, color=colours(i), alpha=0.35 if fn == "sin" else 0.7))
            ax.text(c + 0.47, 0.5, rf"{fn} $\omega_{i}p$", ha="center", va="center", fontsize=9)
            ax.text(c + 0.47, -0.28, str(c), ha="center", va="center", fontsize=8, color="0.4")
        ax.set_xlim(0, D)
        ax.set_ylim(-0.5, 1.05)
        ax.axis("off")
        ax.set_title(title, fontsize=10, loc="left")
    fig.text(0.5, 0.01, _(r"column index below each cell; one colour per frequency $\omega_i = 10000^{-2i/D}$"),
             ha="center", fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def main() -> None:
    for _lang in FIG.editions():
        FIG.out().mkdir(parents=True, exist_ok=True)
        for name, draw in (("binary_counter", binary_counter), ("rotation", rotation), ("layout", layout)):
            fig = draw()
            FIG.savefig(fig, FIG.out() / f"{name}.png", dpi=DPI)
            plt.close(fig)
            print(FIG.out() / f"{name}.png")


if __name__ == "__main__":
    main()

"""Conceptual figures for chapter 04 (multi-head attention), drawn into chapters/04_multi_head_attention/images/.

Run: python images/multi_head_attention_figures.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: grader.authoring
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from grader.authoring.figures import Figures

OUT = Path(__file__).resolve().parents[1] / "chapters" / "04_multi_head_attention" / "images"
FIG = Figures("multi_head_attention")  # draws each edition; _ translates a text
_ = FIG._
DPI = 100
HEAD_COLOURS = ["#f6b26b", "#93c47d", "#6fa8dc"]  # head 0, 1, 2
T, H, DH = 4, 3, 2  # a toy sequence: 4 tokens, D = 6 features, 3 heads of 2


def _box(ax, x, y, w, h, text, color, fontsize=10):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, edgecolor="#333333", linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, text=None, fontsize=9, dy=0.08, rad=0.0):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="#444444",
                                 linewidth=1.1, shrinkA=2, shrinkB=2, connectionstyle=f"arc3,rad={rad}"))
    if text:
        ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + dy, text, ha="center",
                va="bottom", fontsize=fontsize, color="#444444")


def _grid(ax, x0, y0, cells, title=None, size=0.42):
    """Draw rows of (token, head) cells with their top-left corner at (x0, y0)."""
    for r, row in enumerate(cells):
        for c, (token, head, feature) in enumerate(row):
            ax.add_patch(Rectangle((x0 + c * size, y0 - (r + 1) * size), size, size,
                                   facecolor=HEAD_COLOURS[head], edgecolor="white", linewidth=1.5))
            ax.text(x0 + (c + 0.5) * size, y0 - (r + 0.5) * size, f"t{token}\nf{feature}", ha="center",
                    va="center", fontsize=6.5, linespacing=0.9)
    if title:
        ax.text(x0 + len(cells[0]) * size / 2, y0 + 0.12, title, ha="center", va="bottom", fontsize=8.5)


def split_layout(path: Path) -> None:
    """x (T, D) coloured by head slice; the right split (view + transpose) and the wrong one (view only)."""
    # Cell (t, f) of x: token t, feature f, which belongs to head f // DH.
    x = [[(t, f // DH, f) for f in range(H * DH)] for t in range(T)]
    flat = [cell for row in x for cell in row]  # the memory order of a contiguous (T, D) tensor
    right = [[[x[t][h * DH + j] for j in range(DH)] for t in range(T)] for h in range(H)]
    wrong = [[[flat[(h * T + t) * DH + j] for j in range(DH)] for t in range(T)] for h in range(H)]

    fig, ax = plt.subplots(figsize=(9.6, 5.0))
    ax.set_xlim(0, 10.6)
    ax.set_ylim(0.3, 5.4)
    ax.axis("off")
    _grid(ax, 0.2, 4.1, x, _("x: (T, D) = (4, 6)\ncolour = head slice $h \\cdot D_h:(h+1) D_h$"))
    ax.text(1.46, 2.0, _("t = token\nf = feature"), ha="center", fontsize=8, color="#555555")
    for h in range(H):
        _grid(ax, 4.0 + h * 1.2, 5.0, right[h], _("head {h}").format(h=h))
        _grid(ax, 4.0 + h * 1.2, 2.3, wrong[h], _("head {h}").format(h=h))
    ax.text(8.35, 4.15, _("right: view (T, H, Dh),\nthen transpose(T, H)\n\nevery head sees all 4 tokens,\n"
            "each through its own\n2 features"), fontsize=8.5, va="center", color="#38761d")
    ax.text(8.35, 1.45, _("wrong: view straight\nto (H, T, Dh)\n\nhead 0 gets all of token 0\n"
            "and part of token 1:\nrows are no longer tokens"), fontsize=8.5, va="center", color="#cc0000")
    _arrow(ax, (2.85, 3.5), (3.9, 4.1), "split_heads", rad=-0.15)
    _arrow(ax, (2.85, 2.6), (3.9, 1.6), _("reshape only"), rad=0.15, dy=-0.35)
    fig.suptitle(_("split_heads on one sequence (batch axis left out): D = H x Dh = 3 x 2"), fontsize=10)
    fig.tight_layout()
    FIG.savefig(fig, path, dpi=DPI)
    plt.close(fig)


def mha_overview(path: Path) -> None:
    """query/key/value -> four projections -> H heads in parallel -> merge -> W_o."""
    fig, ax = plt.subplots(figsize=(10, 4.2))
    ax.set_xlim(0, 11)
    ax.set_ylim(0, 4.6)
    ax.axis("off")
    inputs = {_("query\n(B, T, D)"): 3.6, _("key\n(B, S, D)"): 2.3, _("value\n(B, S, D)"): 1.0}
    projections = ["$W_q$", "$W_k$", "$W_v$"]
    for (label, y), w in zip(inputs.items(), projections):
        _box(ax, 0.7, y, 1.1, 0.8, label, "#e8eef7", fontsize=8.5)
        _box(ax, 2.2, y, 0.8, 0.6, w + "\nD→D", "#fff2cc", fontsize=8.5)
        _arrow(ax, (1.27, y), (1.78, y))
    ax.text(2.2, 0.25, _("one D×D matrix each;\nhead h uses rows h·Dh:(h+1)·Dh"), ha="center",
            fontsize=7.5, color="#555555")
    # Three heads, drawn as stacked cards.
    for h, colour in reversed(list(enumerate(HEAD_COLOURS))):
        dx, dy = 0.18 * h, -0.18 * h
        _box(ax, 5.0 + dx, 2.5 + dy, 2.2, 2.6, "", colour)
    ax.text(5.0, 3.45, _("split_heads\n(B, H, T, Dh)"), ha="center", fontsize=8.5)
    ax.text(5.0, 2.35, _("attention per head\n$\\mathrm{softmax}(q k^\\top/\\sqrt{D_h})\\,v$"), ha="center",
            fontsize=8.5)
    ax.text(5.0, 1.5, _("weights (B, H, T, S)"), ha="center", fontsize=8.5)
    for y in inputs.values():
        _arrow(ax, (2.62, y), (3.85, 2.5 + (y - 2.3) * 0.6))
    _box(ax, 7.9, 2.5, 1.3, 0.9, _("merge_heads\n(B, T, H·Dh)"), "#e4dcf1", fontsize=8.5)
    _arrow(ax, (6.45, 2.5), (7.23, 2.5))
    _box(ax, 9.2, 2.5, 0.7, 0.6, "$W_o$\nD→D", "#fff2cc", fontsize=8.5)
    _arrow(ax, (8.57, 2.5), (8.83, 2.5))
    _box(ax, 10.35, 2.5, 1.0, 0.8, _("output\n(B, T, D)"), "#e8eef7", fontsize=8.5)
    _arrow(ax, (9.57, 2.5), (9.83, 2.5))
    ax.text(5.0, 4.3, _("H heads run side by side: the head axis is just another batch axis"),
            ha="center", fontsize=9, style="italic", color="#555555")
    ax.text(8.9, 1.35, _("$W_o$ mixes what the\nheads found"), ha="center", fontsize=8, color="#555555")
    fig.tight_layout()
    FIG.savefig(fig, path, dpi=DPI)
    plt.close(fig)


def main() -> None:
    for _lang in FIG.editions():
        FIG.out().mkdir(parents=True, exist_ok=True)
        split_layout(FIG.out() / "split_layout.png")
        mha_overview(FIG.out() / "mha_overview.png")
        for png in sorted(FIG.out().glob("*.png")):
            print(f"{png.relative_to(FIG.out().parent.parent)}: {png.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()

"""Conceptual figures for chapter 05 (residuals, LayerNorm, the encoder layer), drawn into
chapters/05_add_and_norm/images/.

Run: python images/add_and_norm_figures.py
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

OUT = Path(__file__).resolve().parents[1] / "chapters" / "05_add_and_norm" / "images"
FIG = Figures("add_and_norm")  # draws each edition; _ translates a text
_ = FIG._
DPI = 100
COLOURS = {"attn": "#fde2c8", "ffn": "#d9ead3", "norm": "#fff2cc", "add": "#ffffff", "io": "#e8eef7"}


def _box(ax, x, y, w, h, text, color, fontsize=9):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, edgecolor="#333333", linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _add(ax, x, y):
    ax.add_patch(plt.Circle((x, y), 0.17, facecolor="white", edgecolor="#333333", linewidth=1, zorder=3))
    ax.text(x, y, "+", ha="center", va="center", fontsize=12, zorder=4)


def _arrow(ax, points, color="#444444"):
    """A polyline from points[0] to points[-1] with an arrow head at the end."""
    for a, b in zip(points[:-2], points[1:-1]):
        ax.plot([a[0], b[0]], [a[1], b[1]], color=color, lw=1.2)
    ax.add_patch(FancyArrowPatch(points[-2], points[-1], arrowstyle="-|>", mutation_scale=11, color=color,
                                 linewidth=1.2, shrinkA=0, shrinkB=1))


def _sublayer(ax, x, y0, name, colour, norm_first, norm_name):
    """One residual block from height y0 upwards; returns the height where its output leaves."""
    skip_x = x - 1.15
    if norm_first:
        _box(ax, x, y0 + 0.7, 1.7, 0.5, norm_name, COLOURS["norm"])
        _box(ax, x, y0 + 1.6, 1.7, 0.65, name, colour)
        _add(ax, x, y0 + 2.5)
        _arrow(ax, [(x, y0), (x, y0 + 0.45)])
        _arrow(ax, [(x, y0 + 0.95), (x, y0 + 1.27)])
        _arrow(ax, [(x, y0 + 1.93), (x, y0 + 2.33)])
        _arrow(ax, [(x, y0 + 0.2), (skip_x, y0 + 0.2), (skip_x, y0 + 2.5), (x - 0.17, y0 + 2.5)], color="tab:blue")
        return y0 + 2.67
    _box(ax, x, y0 + 0.8, 1.7, 0.65, name, colour)
    _add(ax, x, y0 + 1.7)
    _box(ax, x, y0 + 2.45, 1.7, 0.5, norm_name, COLOURS["norm"])
    _arrow(ax, [(x, y0), (x, y0 + 0.47)])
    _arrow(ax, [(x, y0 + 1.13), (x, y0 + 1.53)])
    _arrow(ax, [(x, y0 + 1.87), (x, y0 + 2.2)])
    _arrow(ax, [(x, y0 + 0.2), (skip_x, y0 + 0.2), (skip_x, y0 + 1.7), (x - 0.17, y0 + 1.7)], color="tab:blue")
    return y0 + 2.7


def encoder_layer(path: Path) -> None:
    """Post-LN and Pre-LN encoder layers side by side; the residual paths in blue."""
    fig, axes = plt.subplots(1, 2, figsize=(8.6, 5.4))
    for ax, norm_first, title in ((axes[0], False, _("Post-LN (2017 paper, norm_first=False)")),
                                  (axes[1], True, _("Pre-LN (GPT-2 and later, norm_first=True)"))):
        ax.set_xlim(0, 4.6)
        ax.set_ylim(-0.3, 6.75)
        ax.axis("off")
        x = 2.6
        _box(ax, x, 0.0, 1.5, 0.4, "x  (B, T, D)", COLOURS["io"])
        y = _sublayer(ax, x, 0.2, _("multi-head\nself-attention"), COLOURS["attn"], norm_first, "norm1")
        y = _sublayer(ax, x, y, _("feed-forward\nlinear, ReLU, linear"), COLOURS["ffn"], norm_first, "norm2")
        _arrow(ax, [(x, y), (x, y + 0.35)])
        _box(ax, x, y + 0.55, 1.5, 0.4, "x  (B, T, D)", COLOURS["io"])
        ax.set_title(title, fontsize=10)
        if norm_first:
            ax.text(x + 0.85, y + 0.55, _("  a Pre-LN stack ends with\n  one more LayerNorm\n  (Encoder.norm)"),
                    ha="left", va="center", fontsize=8, color="#555555", style="italic")
            ax.text(0.05, 1.3, _("the residual\nstream x is\nnever\nnormalised"), fontsize=8, color="tab:blue")
        else:
            ax.text(0.05, 1.3, _("every sum\nis normalised\nbefore the next\nsub-layer"), fontsize=8, color="tab:blue")
    fig.tight_layout()
    FIG.savefig(fig, path, dpi=DPI)
    plt.close(fig)


def layer_vs_batch_norm(path: Path) -> None:
    """Which numbers share one mean and variance: a row (LayerNorm) or a column (BatchNorm)."""
    lengths = [5, 3, 4]  # three sentences of a batch, padded to length 5
    T, D = 5, 6
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 4.6))
    for ax, kind in zip(axes, ("LayerNorm", "BatchNorm")):
        ax.set_xlim(-1.8, D + 0.3)
        ax.set_ylim(len(lengths) * (T + 0.6) + 0.2, -1.5)
        ax.axis("off")
        for b, n in enumerate(lengths):
            top = b * (T + 0.6)
            for t in range(T):
                for d in range(D):
                    padding = t >= n
                    face = "#eeeeee" if padding else "white"
                    if kind == "LayerNorm" and b == 1 and t == 1:
                        face = "#f6b26b"
                    if kind == "BatchNorm" and d == 2:
                        face = "#d5a6bd" if padding else "#a4c2f4"
                    ax.add_patch(Rectangle((d, top + t), 1, 1, facecolor=face, edgecolor="#999999", lw=0.6))
                label = _("sentence {b}, token {t}").format(b=b + 1, t=t + 1) if not padding else "<pad>"
                ax.text(-0.1, top + t + 0.5, label, ha="right", va="center", fontsize=7,
                        color="#999999" if padding else "#333333")
        for d in range(D):
            ax.text(d + 0.5, -0.12, f"f{d + 1}", ha="center", va="bottom", fontsize=7)
        ax.text(D / 2, -0.75, _("features (the D axis)"), ha="center", va="bottom", fontsize=8)
        if kind == "LayerNorm":
            ax.set_title(_("LayerNorm: statistics of ONE token over its D features\n"
                         "(no other token is involved, in training or at test time)"), fontsize=9)
        else:
            ax.set_title(_("BatchNorm: statistics of ONE feature over the whole batch\n"
                         "(every sentence is involved, <pad> too, in pink)"), fontsize=9)
    fig.tight_layout()
    FIG.savefig(fig, path, dpi=DPI)
    plt.close(fig)


def main() -> None:
    for _lang in FIG.editions():
        FIG.out().mkdir(parents=True, exist_ok=True)
        encoder_layer(FIG.out() / "encoder_layer.png")
        layer_vs_batch_norm(FIG.out() / "layer_vs_batch_norm.png")
        for png in sorted(FIG.out().glob("*.png")):
            print(f"{png.relative_to(FIG.out().parent.parent)}: {png.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()

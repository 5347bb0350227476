"""Conceptual figures for chapter 02 (self-attention), drawn into chapters/02_self_attention/images/."""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: grader.authoring
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from grader.authoring.figures import Figures

OUT = Path(__file__).resolve().parents[1] / "chapters" / "02_self_attention" / "images"
FIG = Figures("self_attention")  # draws each edition; _ translates a text
_ = FIG._
DPI = 100


def _box(ax, x, y, w, h, text, color, fontsize=10):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, edgecolor="#333333", linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, text=None, fontsize=10, dy=0.12):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="#444444",
                                 linewidth=1.1, shrinkA=2, shrinkB=2))
    if text:
        ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + dy, text, ha="center",
                va="bottom", fontsize=fontsize, color="#444444")


def self_attention_flow(path: Path) -> None:
    """x -> (W_q, W_k, W_v) -> Q, K, V -> scores -> softmax -> weights @ V."""
    fig, ax = plt.subplots(figsize=(9.5, 3.6))
    ax.set_xlim(0, 10.4)
    ax.set_ylim(0, 4)
    ax.axis("off")
    _box(ax, 0.8, 2.0, 1.2, 2.6, _("X\n(T, D)\n\none row\nper token"), "#e8eef7")
    rows = {"Q": (3.2, "#fde2c8", "$W_q$"), "K": (2.0, "#d9ead3", "$W_k$"), "V": (0.8, "#e4dcf1", "$W_v$")}
    for name, (y, color, w) in rows.items():
        size = "(T, $d_v$)" if name == "V" else "(T, $d_k$)"
        _arrow(ax, (1.45, 2.0), (2.55, y), w)
        _box(ax, 3.1, y, 1.1, 0.75, f"{name}\n{size}", color)
    _box(ax, 5.2, 2.6, 1.7, 1.0, _("scores\n$QK^\\top/\\sqrt{d_k}$\n(T, T)"), "#fff2cc")
    _arrow(ax, (3.7, 3.2), (4.33, 2.8))
    _arrow(ax, (3.7, 2.0), (4.33, 2.4))
    _box(ax, 7.2, 2.6, 1.45, 1.0, _("mask\n(optional)\nthen softmax\nover keys"), "#fce4ec", fontsize=9)
    _arrow(ax, (6.08, 2.6), (6.45, 2.6))
    _box(ax, 9.2, 2.0, 1.6, 1.3, _("output\nweights @ V\n(T, $d_v$)"), "#e8eef7")
    _arrow(ax, (7.95, 2.4), (8.38, 2.15), _("weights"), fontsize=8, dy=-0.45)
    _arrow(ax, (3.7, 0.8), (8.38, 1.75))
    ax.text(5.2, 0.25, _("queries, keys and values are three views of the same sequence X"),
            ha="center", fontsize=9, style="italic", color="#555555")
    fig.tight_layout()
    FIG.savefig(fig, path, dpi=DPI)
    plt.close(fig)


def masks(path: Path) -> None:
    """A causal mask and a padding mask as True/False grids (True = may attend)."""
    sentence = ["the", "cat", "sat", "on", "the", "mat"]
    padded = ["the", "cat", "sat", "down", "<pad>", "<pad>"]
    T = len(sentence)
    causal = np.tril(np.ones((T, T), dtype=bool))
    padding = np.broadcast_to(np.array([w != "<pad>" for w in padded]), (T, T))
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.9))
    cmap = matplotlib.colors.ListedColormap(["#d0d0d0", "#6aa84f"])
    for ax, mask, words, title in ((axes[0], causal, sentence, _("causal mask: no peeking ahead")),
                                   (axes[1], padding, padded, _("padding mask: ignore <pad> keys"))):
        ax.imshow(mask, cmap=cmap, vmin=0, vmax=1)
        for i in range(T):
            for j in range(T):
                ax.text(j, i, "T" if mask[i, j] else "F", ha="center", va="center", fontsize=8,
                        color="white" if mask[i, j] else "#555555")
        ax.set_xticks(range(T), words, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(T), words, fontsize=8)
        ax.set_xlabel(_("key"))
        ax.set_ylabel(_("query"))
        ax.set_title(title, fontsize=10)
    fig.suptitle(_("True (green) = may attend; False (grey) = score set to -inf before the softmax"),
                 fontsize=9)
    fig.tight_layout()
    FIG.savefig(fig, path, dpi=DPI)
    plt.close(fig)


def softmax_saturation(path: Path) -> None:
    """The same logits multiplied by a growing factor: the softmax turns into a one-hot vector."""
    logits = np.array([1.0, 0.4, -0.3, 0.8, -1.0, 0.1])
    fig, axes = plt.subplots(1, 3, figsize=(9, 2.6), sharey=True)
    for ax, factor in zip(axes, (1, 4, 16)):
        z = factor * logits
        p = np.exp(z - z.max())
        p /= p.sum()
        ax.bar(range(len(p)), p, color="#cc4125")
        ax.set_title(_("softmax({factor} x logits)\nmax weight {top:.2f}").format(factor=factor, top=p.max()),
                     fontsize=9)
        ax.set_xticks(range(len(p)))
        ax.set_ylim(0, 1.05)
    axes[0].set_ylabel(_("weight"))
    fig.suptitle(_("larger scores -> a sharper softmax -> almost all weight on one key"), fontsize=10)
    fig.tight_layout()
    FIG.savefig(fig, path, dpi=DPI)
    plt.close(fig)


def main() -> None:
    for _lang in FIG.editions():
        FIG.out().mkdir(parents=True, exist_ok=True)
        self_attention_flow(FIG.out() / "self_attention_flow.png")
        masks(FIG.out() / "masks.png")
        softmax_saturation(FIG.out() / "softmax_saturation.png")
        for png in sorted(FIG.out().glob("*.png")):
            print(f"{png.relative_to(FIG.out().parent.parent)}: {png.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()

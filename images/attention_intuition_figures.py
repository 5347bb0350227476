"""Draw the conceptual figures of chapter 01 into chapters/01_attention_intuition/images/.

Run: python images/attention_intuition_figures.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: grader.authoring
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from grader.authoring.figures import Figures

OUT = Path(__file__).resolve().parents[1] / "chapters" / "01_attention_intuition" / "images"
FIG = Figures("attention_intuition")  # draws each edition; _ translates a text
_ = FIG._
DPI = 100

QUERY, KEY, VALUE, WEIGHT = "#c6dbef", "#fdd0a2", "#c7e9c0", "#de2d26"


def box(ax, x, y, w, h, text, color, fontsize=10, weight="normal"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, edgecolor="#444444", lw=1))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, weight=weight)


def arrow(ax, start, end, lw=1.2, color="#444444", style="-|>"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, lw=lw, color=color,
                                 shrinkA=2, shrinkB=2))


def library() -> None:
    """A reader's query is compared with every book's catalogue key; the answer blends the contents."""
    books = [(_("key: 'neural networks'"), _("value: chapters on\nbackprop, CNNs"), 0.30),
             (_("key: 'Roman history'"), _("value: emperors,\nlegions, roads"), 0.01),
             (_("key: 'deep learning, intro'"), _("value: tensors,\nSGD, attention"), 0.66),
             (_("key: 'bread baking'"), _("value: flour,\nyeast, ovens"), 0.03)]
    fig, ax = plt.subplots(figsize=(10, 5.0))
    ax.set(xlim=(0, 10), ylim=(-0.35, 4.75))
    ax.axis("off")
    box(ax, 0.1, 1.9, 2.0, 1.0, _("query:\n'a book on\ndeep learning'"), QUERY, weight="bold")
    for i, (key, value, w) in enumerate(books):
        y = 3.95 - i * 1.1
        box(ax, 3.3, y, 2.3, 0.7, key, KEY, fontsize=9)
        box(ax, 6.0, y, 1.7, 0.7, value, VALUE, fontsize=8)
        arrow(ax, (2.1, 2.4), (3.3, y + 0.35), lw=0.6 + 7 * w, color=WEIGHT)
        t = 0.75  # label each arrow three quarters of the way to its key
        ax.text(2.1 + t * 1.2, 2.4 + t * (y + 0.35 - 2.4), f"{w:.2f}", color=WEIGHT, fontsize=9,
                ha="center", va="center", weight="bold", bbox=dict(facecolor="white", edgecolor="none", pad=1))
        arrow(ax, (5.6, y + 0.35), (6.0, y + 0.35), lw=0.8)
        arrow(ax, (7.7, y + 0.35), (8.3, 2.4), lw=0.6 + 7 * w, color=WEIGHT)
    box(ax, 8.3, 1.8, 1.6, 1.2, _("answer:\nmostly the\nintro book,\nsome of the\nNN book"), "#efedf5", fontsize=8.5)
    ax.text(2.7, -0.25, _("weight = softmax over the books\nof score(query, key)"), ha="center", fontsize=9,
            color=WEIGHT)
    ax.text(8.6, -0.25, _("answer = sum over the books\nof weight x value"), ha="center", fontsize=9, color=WEIGHT)
    ax.set_title(_("Attention as a soft library search: compare the query with every key, "
                 "then blend the values"), fontsize=11)
    FIG.savefig(fig, FIG.out() / "library_qkv.png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)


def pooling() -> None:
    """The general attention-pooling pipeline that every later chapter reuses."""
    fig, ax = plt.subplots(figsize=(10, 4.4))
    ax.set(xlim=(0, 10), ylim=(-0.1, 4.5))
    ax.axis("off")
    box(ax, 0.1, 0.0, 1.3, 0.6, _("query q"), QUERY, weight="bold")
    rows = [3.3, 2.3, 0.8]
    bus = 3.45  # the query reaches every score box along this line, clear of the key boxes
    ax.plot([1.4, bus, bus], [0.3, 0.3, rows[0] + 0.15], color="#444444", lw=1.2)
    for i, y in enumerate(rows):
        label = "n" if i == 2 else str(i + 1)
        box(ax, 2.0, y, 1.2, 0.6, _("key {k}").format(k=f"$k_{label}$"), KEY)
        box(ax, 3.7, y, 1.6, 0.6, f"$a(q, k_{label})$", "white")
        box(ax, 6.0, y, 1.0, 0.6, fr"$\alpha_{label}$", "#fee0d2")
        box(ax, 7.3, y, 1.2, 0.6, _("value {v}").format(v=f"$v_{label}$"), VALUE)
        arrow(ax, (bus, y + 0.15), (3.7, y + 0.15))
        arrow(ax, (3.2, y + 0.42), (3.7, y + 0.42))
        arrow(ax, (7.0, y + 0.3), (7.3, y + 0.3), style="-")
        arrow(ax, (8.5, y + 0.3), (9.2, 2.1))
    ax.text(2.6, 1.75, r"$\vdots$", fontsize=16, ha="center")
    ax.text(6.5, 1.75, r"$\vdots$", fontsize=16, ha="center")
    ax.add_patch(FancyBboxPatch((5.45, 0.7), 0.35, 3.3, boxstyle="round,pad=0.02", facecolor="#fcbba1",
                                edgecolor="#444444"))
    ax.text(5.625, 2.35, "softmax", rotation=90, ha="center", va="center", fontsize=10)
    box(ax, 9.2, 1.7, 0.75, 0.8, r"$\sum_i \alpha_i v_i$", "#efedf5", fontsize=9)
    ax.text(4.5, 4.1, _("scores"), ha="center", fontsize=10)
    ax.text(6.5, 4.1, _("weights (sum to 1)"), ha="center", fontsize=10)
    ax.text(9.55, 2.75, _("output"), ha="center", fontsize=10)
    ax.set_title(_("Attention pooling: scores -> softmax over the keys -> weighted average of the values"),
                 fontsize=11)
    FIG.savefig(fig, FIG.out() / "attention_pooling.png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    for _lang in FIG.editions():
        FIG.out().mkdir(parents=True, exist_ok=True)
        library()
        pooling()


if __name__ == "__main__":
    main()

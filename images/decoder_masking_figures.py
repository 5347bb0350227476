"""Conceptual figures for chapter 06 (decoder, masks, the full Transformer), drawn into
chapters/06_decoder_masking/images/.

Run: python images/decoder_masking_figures.py
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

OUT = Path(__file__).resolve().parents[1] / "chapters" / "06_decoder_masking" / "images"
FIG = Figures("decoder_masking")  # draws each edition; _ translates a text
_ = FIG._
DPI = 100

ATTN, NORM, FFN, EMB, OUTC = "#fde2c8", "#f3f3f3", "#d9ead3", "#e8eef7", "#e4dcf1"


def _box(ax, x, y, w, h, text, color, fontsize=9):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                facecolor=color, edgecolor="#333333", linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, color="#444444", rad=0.0, text=None, fontsize=8, offset=(0.0, 0.0)):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, color=color, linewidth=1.2,
                                 shrinkA=1, shrinkB=1, connectionstyle=f"arc3,rad={rad}"))
    if text:
        ax.text((start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1], text,
                fontsize=fontsize, color=color, ha="center", va="center")


def encoder_decoder() -> plt.Figure:
    """The encoder stack, the decoder stack with its three sublayers, cross-attention, tied embedding."""
    fig, ax = plt.subplots(figsize=(8.6, 6.6))
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.2, 10.2)
    ax.axis("off")
    ex, dx, w = 2.6, 7.2, 2.9

    # Encoder column.
    ax.add_patch(Rectangle((ex - 1.75, 2.55), 3.5, 3.5, fill=False, ls="--", ec="0.5"))
    ax.text(ex - 1.65, 5.85, _("encoder layer × N"), fontsize=8, color="0.35")
    _box(ax, ex, 3.1, w, 0.55, _("self-attention\n(source padding mask)"), ATTN, 8)
    _box(ax, ex, 3.95, w, 0.4, _("add & norm"), NORM, 8)
    _box(ax, ex, 4.7, w, 0.55, _("feed-forward"), FFN, 8)
    _box(ax, ex, 5.5, w, 0.4, _("add & norm"), NORM, 8)
    for y0, y1 in ((3.38, 3.75), (4.15, 4.42), (4.98, 5.3)):
        _arrow(ax, (ex, y0), (ex, y1))
    _box(ax, ex, 1.75, w, 0.6, _("embedding × √D + positions"), EMB, 8)
    _arrow(ax, (ex, 2.05), (ex, 2.82))
    ax.text(ex, 0.75, _("source  (B, S)\n a b c d <pad>"), ha="center", va="center", fontsize=9)
    _arrow(ax, (ex, 1.2), (ex, 1.45))
    _box(ax, ex, 6.75, w, 0.55, _("memory (B, S, D)"), "#fff2a8", 9)
    _arrow(ax, (ex, 5.7), (ex, 6.47))

    # Decoder column.
    ax.add_patch(Rectangle((dx - 1.75, 2.55), 3.5, 5.6, fill=False, ls="--", ec="0.5"))
    ax.text(dx - 1.65, 7.95, _("decoder layer × N"), fontsize=8, color="0.35")
    _box(ax, dx, 3.1, w, 0.55, _("masked self-attention\n(causal mask)"), ATTN, 8)
    _box(ax, dx, 3.95, w, 0.4, _("add & norm   (norm1)"), NORM, 8)
    _box(ax, dx, 4.85, w, 0.6, _("cross-attention\nQ: decoder   K, V: memory"), "#f9cb9c", 8)
    _box(ax, dx, 5.75, w, 0.4, _("add & norm   (norm2)"), NORM, 8)
    _box(ax, dx, 6.55, w, 0.55, _("feed-forward"), FFN, 8)
    _box(ax, dx, 7.45, w, 0.4, _("add & norm   (norm3)"), NORM, 8)
    for y0, y1 in ((3.38, 3.75), (4.15, 4.55), (5.15, 5.55), (5.95, 6.27), (6.83, 7.25)):
        _arrow(ax, (dx, y0), (dx, y1))
    _box(ax, dx, 1.75, w, 0.6, _("embedding × √D + positions"), EMB, 8)
    _arrow(ax, (dx, 2.05), (dx, 2.82))
    ax.text(dx, 0.75, _("target input  (B, T)\n<s> d c b a"), ha="center", va="center", fontsize=9)
    _arrow(ax, (dx, 1.2), (dx, 1.45))
    _box(ax, dx, 8.75, w, 0.6, _("logits = h @ Wᵀ  (B, T, V)"), OUTC, 9)
    _arrow(ax, (dx, 7.65), (dx, 8.45))
    ax.text(dx, 9.55, _("next tokens:  d c b a </s>"), ha="center", fontsize=9)
    _arrow(ax, (dx, 9.05), (dx, 9.35))

    # Memory feeds every decoder layer's cross-attention as keys and values.
    _arrow(ax, (ex + w / 2, 6.75), (dx - w / 2, 4.95), color="tab:red", rad=-0.15, text=_("keys, values"),
           fontsize=9, offset=(0.1, -0.5))
    # One table W is shared: source embedding, target embedding and the output layer.
    ax.text(5.0, 0.1, _("one table W (V, D): source embedding = target embedding = output layer (tied)"),
            ha="center", fontsize=9, color="tab:blue")
    ax.set_title(_("the encoder-decoder Transformer"), fontsize=11)
    fig.tight_layout()
    return fig


def _tokens(ax, x0, y, tokens, color, width=0.9):
    for i, t in enumerate(tokens):
        ax.add_patch(FancyBboxPatch((x0 + i * width - 0.38, y - 0.22), 0.76, 0.44,
                                    boxstyle="round,pad=0.01,rounding_size=0.05", facecolor=color,
                                    edgecolor="#555555", linewidth=0.8))
        ax.text(x0 + i * width, y, t, ha="center", va="center", fontsize=9)


def teacher_forcing() -> plt.Figure:
    """Training: the whole shifted answer in one pass, with a causal mask. Inference: one token at a time."""
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.4), gridspec_kw={"width_ratios": [1, 1.15]})
    ax = axes[0]
    ax.set_xlim(-0.6, 5.0)
    ax.set_ylim(-0.2, 3.3)
    ax.axis("off")
    ax.set_title(_("training (teacher forcing): one parallel pass"), fontsize=10)
    inp, out = ["<s>", "d", "c", "b", "a"], ["d", "c", "b", "a", "</s>"]
    _tokens(ax, 0, 0.35, inp, EMB)
    _tokens(ax, 0, 2.55, out, OUTC)
    ax.add_patch(Rectangle((-0.45, 1.05), 4.5, 0.8, facecolor="#fde2c8", edgecolor="#333333", lw=0.8))
    ax.text(1.8, 1.45, _("decoder with a causal mask"), ha="center", va="center", fontsize=9)
    for i in range(5):
        _arrow(ax, (i * 0.9, 0.6), (i * 0.9, 1.03))
        _arrow(ax, (i * 0.9, 1.87), (i * 0.9, 2.3))
    ax.text(1.8, -0.1, _("input: the answer shifted right by one"), ha="center", fontsize=8, color="0.3")
    ax.text(1.8, 3.05, _("targets: the answer, one position ahead of the input"), ha="center", fontsize=8, color="0.3")

    ax = axes[1]
    ax.set_xlim(-0.6, 5.6)
    ax.set_ylim(-0.2, 3.3)
    ax.axis("off")
    ax.set_title(_("inference (greedy decoding): one token per step"), fontsize=10)
    steps = [["<s>"], ["<s>", "d"], ["<s>", "d", "c"], ["<s>", "d", "c", "b"]]
    nxt = ["d", "c", "b", "a"]
    for row, (prefix, new) in enumerate(zip(steps, nxt)):
        y = 2.8 - row * 0.75
        _tokens(ax, 0, y, prefix, EMB)
        x = len(prefix) * 0.9
        _arrow(ax, (x - 0.4, y), (x + 0.35, y))
        _tokens(ax, x + 0.8, y, [new], OUTC)
        ax.text(x + 1.35, y, _("argmax of the last position") if row == 0 else "", fontsize=8, va="center",
                color="0.3")
    ax.text(2.5, -0.1, _("... until every sequence has produced </s>, or max_len"), ha="center", fontsize=8,
            color="0.3")
    fig.tight_layout()
    return fig


def main() -> None:
    for _lang in FIG.editions():
        FIG.out().mkdir(parents=True, exist_ok=True)
        for name, draw in (("encoder_decoder", encoder_decoder), ("teacher_forcing", teacher_forcing)):
            fig = draw()
            FIG.savefig(fig, FIG.out() / f"{name}.png", dpi=DPI)
            plt.close(fig)
            print(FIG.out() / f"{name}.png")


if __name__ == "__main__":
    main()

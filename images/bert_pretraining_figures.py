"""Conceptual figures for chapter 07 (BERT's input, masking, the pretraining model), drawn into
chapters/07_bert_pretraining/images/.

Run: python images/bert_pretraining_figures.py
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

OUT = Path(__file__).resolve().parents[1] / "chapters" / "07_bert_pretraining" / "images"
FIG = Figures("bert_pretraining")  # draws each edition; _ translates a text
_ = FIG._
DPI = 100

TOK, SEG_A, SEG_B, POS, SUM = "#e8eef7", "#fde2c8", "#d9ead3", "#f3f3f3", "#fff2a8"
ATTN, FFN, NORM, HEAD, MASKC = "#fde2c8", "#d9ead3", "#f3f3f3", "#e4dcf1", "#f4cccc"


def _box(ax, x, y, w, h, text, color, fontsize=9, edge="#333333"):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                facecolor=color, edgecolor=edge, linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, color="#444444", text=None, fontsize=8, offset=(0.0, 0.0)):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color=color, linewidth=1.1,
                                 shrinkA=1, shrinkB=1))
    if text:
        ax.text((start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1], text, fontsize=fontsize,
                color=color, ha="center", va="center")


def input_embeddings() -> plt.Figure:
    """[CLS] a [SEP] b [SEP]: token + segment + position embeddings, summed, then LayerNorm."""
    tokens = ["[CLS]", "anna", "fed", "the", "duck", "[SEP]", "she", "rowed", "the", "boat", "[SEP]"]
    segments = [0] * 6 + [1] * 5
    fig, ax = plt.subplots(figsize=(10.4, 3.9))
    ax.set_xlim(-1.9, len(tokens) + 0.2)
    ax.set_ylim(-0.4, 4.7)
    ax.axis("off")
    rows = [(4.0, _("input"), None), (3.0, _("token"), TOK), (2.0, _("segment"), None), (1.0, _("position"), POS)]
    for y, label, _colour in rows:
        ax.text(-0.8, y, label, ha="right", va="center", fontsize=10)
    for i, (t, s) in enumerate(zip(tokens, segments)):
        x = i + 0.5
        ax.text(x, 4.0, t, ha="center", va="center", fontsize=10, fontweight="bold" if t.startswith("[") else None)
        _box(ax, x, 3.0, 0.86, 0.55, f"E$_{{{t.strip('[]')}}}$" if not t.startswith("[") else f"E$_{{{t[1:-1]}}}$",
             TOK, 8)
        _box(ax, x, 2.0, 0.86, 0.55, "E$_A$" if s == 0 else "E$_B$", SEG_A if s == 0 else SEG_B, 9)
        _box(ax, x, 1.0, 0.86, 0.55, f"P$_{{{i}}}$", POS, 9)
        for y in (2.5, 1.5):
            ax.text(x, y, "+", ha="center", va="center", fontsize=11, color="0.35")
    ax.text(len(tokens) / 2, 0.2, _("sum  →  LayerNorm (eps 1e-12)  →  dropout  →  the encoder"), ha="center",
            fontsize=10)
    ax.add_patch(Rectangle((0.05, 1.65), 5.9, 0.7, fill=False, ls="--", ec="tab:orange", lw=1))
    ax.add_patch(Rectangle((6.05, 1.65), 4.9, 0.7, fill=False, ls="--", ec="tab:green", lw=1))
    ax.text(3.0, 4.45, _("sentence A (segment 0), up to and including the first [SEP]"), ha="center", fontsize=9,
            color="tab:orange")
    ax.text(8.5, 4.45, _("sentence B (segment 1)"), ha="center", fontsize=9, color="tab:green")
    fig.tight_layout()
    return fig


def masking() -> plt.Figure:
    """Choose 15% of the tokens; of those, 80% [MASK], 10% a random token, 10% unchanged; predict all chosen."""
    fig, ax = plt.subplots(figsize=(10.4, 3.6))
    ax.set_xlim(-0.2, 10.6)
    ax.set_ylim(-0.3, 3.6)
    ax.axis("off")
    original = ["[CLS]", "anna", "fed", "the", "duck", "in", "the", "lake", "[SEP]"]
    corrupted = ["[CLS]", "anna", "[MASK]", "the", "duck", "in", "the", "coin", "[SEP]"]
    chosen = {2: _("80%: [MASK]"), 4: _("10%: unchanged"), 7: _("10%: random id")}
    for i, (a, b) in enumerate(zip(original, corrupted)):
        x = 0.6 + 1.15 * i
        color = MASKC if i in chosen else TOK
        _box(ax, x, 2.9, 1.0, 0.5, a, TOK, 9)
        _box(ax, x, 1.6, 1.0, 0.5, b, color, 9, edge="tab:red" if i in chosen else "#333333")
        _arrow(ax, (x, 2.62), (x, 1.88))
        if i in chosen:
            ax.text(x, 1.15, chosen[i], ha="center", fontsize=8, color="tab:red")
            ax.text(x, 0.55, _("label: {token}").format(token=a), ha="center", fontsize=8)
        else:
            ax.text(x, 0.55, "-100", ha="center", fontsize=8, color="0.5")
    ax.text(0.6 + 1.15 * 4, 3.45, _("each non-special token is chosen with probability 0.15"), ha="center",
            fontsize=10)
    ax.text(0.6 + 1.15 * 4, -0.15,
            _("the loss is taken at the chosen positions only, always against the ORIGINAL token"),
            ha="center", fontsize=9)
    fig.tight_layout()
    return fig


def bert_model() -> plt.Figure:
    """Embeddings, N Post-LN encoder layers with a GELU feed-forward block, the MLM and NSP heads."""
    fig, ax = plt.subplots(figsize=(8.6, 6.4))
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.3, 10.3)
    ax.axis("off")
    cx, w = 4.2, 3.6
    ax.text(cx, 0.35, _("[CLS] anna [MASK] the duck [SEP] she rowed the boat [SEP]\nsegments 0 0 0 0 0 0 1 1 1 1 1"),
            ha="center", fontsize=8.5)
    _box(ax, cx, 1.6, w, 0.6, _("BertEmbeddings: token + segment + position\nLayerNorm"), "#e8eef7", 8.5)
    _arrow(ax, (cx, 0.8), (cx, 1.28))
    ax.add_patch(Rectangle((cx - 2.2, 2.35), 4.4, 3.8, fill=False, ls="--", ec="0.5"))
    ax.text(cx - 2.1, 5.95, _("encoder layer × N (Post-LN)"), fontsize=8, color="0.35")
    _box(ax, cx, 2.9, w, 0.55, _("multi-head self-attention\n(padding mask on the keys)"), ATTN, 8)
    _box(ax, cx, 3.75, w, 0.4, _("add & LayerNorm  (norm1, eps 1e-12)"), NORM, 8)
    _box(ax, cx, 4.55, w, 0.55, _("feed-forward: linear1 → GELU → linear2"), FFN, 8)
    _box(ax, cx, 5.4, w, 0.4, _("add & LayerNorm  (norm2, eps 1e-12)"), NORM, 8)
    for y0, y1 in ((1.92, 2.6), (3.18, 3.55), (3.95, 4.27), (4.83, 5.2)):
        _arrow(ax, (cx, y0), (cx, y1))
    _box(ax, cx, 6.75, w, 0.5, _("hidden states h  (B, T, D)"), "#fff2a8", 9)
    _arrow(ax, (cx, 5.6), (cx, 6.5))
    # MLM head (every position), NSP head (the [CLS] position).
    mx, nx = 2.3, 7.6
    _box(ax, mx, 8.05, 3.4, 0.75, _("MLM head: mlm_transform → GELU\n→ mlm_norm"), HEAD, 8)
    _box(ax, mx, 9.3, 3.4, 0.7, _("@ token tableᵀ + mlm_bias\n(tied decoder)  →  (B, T, V)"), HEAD, 8)
    _arrow(ax, (mx + 0.3, 7.0), (mx, 7.67), text=_("every position"), offset=(-0.9, 0.0))
    _arrow(ax, (mx, 8.43), (mx, 8.95))
    _box(ax, nx, 8.05, 3.0, 0.75, _("pooler: dense + tanh\non h[:, 0] ([CLS])"), HEAD, 8)
    _box(ax, nx, 9.3, 3.0, 0.7, _("nsp_head  →  (B, 2)\n0 = IsNext, 1 = NotNext"), HEAD, 8)
    _arrow(ax, (cx + 1.6, 7.0), (nx - 0.6, 7.67), text="[CLS] only", offset=(0.75, -0.1))
    _arrow(ax, (nx, 8.43), (nx, 8.95))
    ax.annotate("", xy=(0.55, 9.3), xytext=(0.55, 1.6),
                arrowprops=dict(arrowstyle="-|>", color="tab:blue", ls="--", lw=1.1, connectionstyle="arc3,rad=0"))
    ax.text(0.35, 5.4, _("the same token table"), rotation=90, color="tab:blue", fontsize=8, va="center")
    ax.set_title(_("BertForPretraining"), fontsize=11)
    fig.tight_layout()
    return fig


def main() -> None:
    for _lang in FIG.editions():
        FIG.out().mkdir(parents=True, exist_ok=True)
        for name, draw in (("input_embeddings", input_embeddings), ("masking", masking), ("bert_model", bert_model)):
            fig = draw()
            FIG.savefig(fig, FIG.out() / f"{name}.png", dpi=DPI)
            plt.close(fig)


if __name__ == "__main__":
    main()

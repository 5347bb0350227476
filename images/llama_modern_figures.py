"""Conceptual figures for chapter 09 (the 2017 block vs the LLaMA block, grouped-query attention,
sparse attention patterns and their cost, a mixture of experts), drawn into chapters/09_llama_modern/images/.

Run: python images/llama_modern_figures.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: grader.authoring
import matplotlib.pyplot as plt
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from grader.authoring.figures import Figures

OUT = Path(__file__).resolve().parents[1] / "chapters" / "09_llama_modern" / "images"
FIG = Figures("llama_modern")  # draws each edition; _ translates a text
_ = FIG._
DPI = 100

ATTN, NORM, FFN, EMB, OUTC, NEW = "#fde2c8", "#f3f3f3", "#d9ead3", "#e8eef7", "#e4dcf1", "#fff2a8"


def _box(ax, x, y, w, h, text, color, fontsize=9, edge="#333333", lw=1.0):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                facecolor=color, edgecolor=edge, linewidth=lw))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, color="#444444", rad=0.0, lw=1.2):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, color=color, linewidth=lw,
                                 shrinkA=1, shrinkB=1, connectionstyle=f"arc3,rad={rad}"))


def _plus(ax, x, y):
    ax.add_patch(plt.Circle((x, y), 0.14, facecolor="white", edgecolor="#333333", lw=1))
    ax.text(x, y, "+", ha="center", va="center", fontsize=10)


def block_comparison() -> plt.Figure:
    """The decoder block of 2017 (Post-LN, added sinusoids, ReLU MLP) next to LLaMA's (Pre-RMSNorm, RoPE, GQA,
    SwiGLU)."""
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 6.4))
    specs = [
        (_("2017: Attention Is All You Need (decoder-only use)"), [
            ("LayerNorm", NORM), (_("feed-forward: ReLU, 4D"), FFN), ("LayerNorm", NORM),
            (_("multi-head attention\n(H heads for q, k and v)"), ATTN)],
         _("token embedding × √D\n+ sinusoidal positions"), "post"),
        (_("2023: LLaMA block"), [
            (_("SwiGLU feed-forward\nw_down(silu(w_gate x) * w_up x)"), FFN), ("RMSNorm", NEW),
            (_("grouped-query attention\nRoPE on q and k"), ATTN), ("RMSNorm", NEW)],
         _("token embedding\n(no position vectors)"), "pre"),
    ]
    for ax, (title, boxes, embedding, order) in zip(axes, specs):
        ax.set_xlim(0, 6)
        ax.set_ylim(0, 10)
        ax.axis("off")
        ax.set_title(title, fontsize=10)
        x, w = 3.0, 3.4
        _box(ax, x, 1.0, w, 0.8, embedding, EMB, 8.5)
        if order == "post":
            # x -> attention -> + -> LayerNorm -> FFN -> + -> LayerNorm
            ys = {"attn": 3.0, "add1": 4.1, "norm1": 4.8, "ffn": 6.1, "add2": 7.2, "norm2": 7.9}
            _box(ax, x, ys["attn"], w, 0.9, boxes[3][0], boxes[3][1], 8.5)
            _box(ax, x, ys["norm1"], w, 0.5, "LayerNorm", NORM, 8.5)
            _box(ax, x, ys["ffn"], w, 0.7, boxes[1][0], boxes[1][1], 8.5)
            _box(ax, x, ys["norm2"], w, 0.5, "LayerNorm", NORM, 8.5)
            _plus(ax, x, ys["add1"])
            _plus(ax, x, ys["add2"])
            _arrow(ax, (x, 1.4), (x, 2.55))
            _arrow(ax, (x, 3.45), (x, 3.96))
            _arrow(ax, (x, 4.24), (x, 4.55))
            _arrow(ax, (x, 5.05), (x, 5.75))
            _arrow(ax, (x, 6.45), (x, 7.06))
            _arrow(ax, (x, 7.34), (x, 7.65))
            _arrow(ax, (x, 8.15), (x, 9.0))
            ax.plot([x, 0.7, 0.7], [2.1, 2.1, ys["add1"]], color="#444444", lw=1.2)
            _arrow(ax, (0.7, ys["add1"]), (x - 0.15, ys["add1"]))
            ax.plot([x, 0.7, 0.7], [5.35, 5.35, ys["add2"]], color="#444444", lw=1.2)
            _arrow(ax, (0.7, ys["add2"]), (x - 0.15, ys["add2"]))
            ax.text(x, 9.3, _("LayerNorm AFTER each residual sum (Post-LN):\nthe residual stream is normalised"),
                    ha="center", fontsize=8, color="0.3")
        else:
            ys = {"norm1": 2.7, "attn": 3.9, "add1": 5.0, "norm2": 5.9, "ffn": 7.1, "add2": 8.2}
            _box(ax, x, ys["norm1"], w, 0.5, "RMSNorm", NEW, 8.5)
            _box(ax, x, ys["attn"], w, 0.9, boxes[2][0], boxes[2][1], 8.5)
            _box(ax, x, ys["norm2"], w, 0.5, "RMSNorm", NEW, 8.5)
            _box(ax, x, ys["ffn"], w, 0.9, boxes[0][0], boxes[0][1], 8.5)
            _plus(ax, x, ys["add1"])
            _plus(ax, x, ys["add2"])
            _arrow(ax, (x, 1.4), (x, 2.45))
            _arrow(ax, (x, 2.95), (x, 3.45))
            _arrow(ax, (x, 4.35), (x, 4.86))
            _arrow(ax, (x, 5.14), (x, 5.65))
            _arrow(ax, (x, 6.15), (x, 6.65))
            _arrow(ax, (x, 7.55), (x, 8.06))
            _arrow(ax, (x, 8.34), (x, 9.0))
            ax.plot([x, 0.7, 0.7], [2.1, 2.1, ys["add1"]], color="#444444", lw=1.2)
            _arrow(ax, (0.7, ys["add1"]), (x - 0.15, ys["add1"]))
            ax.plot([x, 0.7, 0.7], [5.4, 5.4, ys["add2"]], color="#444444", lw=1.2)
            _arrow(ax, (0.7, ys["add2"]), (x - 0.15, ys["add2"]))
            ax.text(x, 9.3, _("RMSNorm BEFORE each sublayer (Pre-norm):\nthe residual stream is never normalised"),
                    ha="center", fontsize=8, color="0.3")
        ax.text(0.45, 3.5, _("residual"), rotation=90, fontsize=8, color="0.4", va="center")
    fig.tight_layout()
    return fig


def _heads(ax, y, n, x0, x1, color, label):
    xs = [x0 + (x1 - x0) * (i + 0.5) / n for i in range(n)]
    for x in xs:
        _box(ax, x, y, 0.42, 0.42, "", color, lw=0.8)
    ax.text(x0 - 0.15, y, label, ha="right", va="center", fontsize=8)
    return xs


def gqa_heads() -> plt.Figure:
    """Which key/value head each query head reads, for MHA, GQA and MQA with 8 query heads."""
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.0))
    for ax, (title, kv) in zip(axes, ((_("multi-head (MHA): Hkv = H = 8"), 8), (_("grouped-query (GQA): Hkv = 2"), 2),
                                      (_("multi-query (MQA): Hkv = 1"), 1))):
        ax.set_xlim(-0.9, 5)
        ax.set_ylim(0, 3)
        ax.axis("off")
        ax.set_title(title, fontsize=10)
        q = _heads(ax, 2.3, 8, 0.2, 4.8, ATTN, _("queries"))
        k = _heads(ax, 0.7, kv, 0.2, 4.8, OUTC, _("keys &\nvalues"))
        for j, x in enumerate(q):
            _arrow(ax, (k[j // (8 // kv)], 0.93), (x, 2.07), color="0.45", lw=0.8)
        ax.text(2.5, 0.1, _("cache: {kv} key + {kv} value vectors per token and layer").format(kv=kv),
                ha="center", fontsize=8, color="0.3")
    fig.tight_layout()
    return fig


def sparse_patterns(T: int = 16) -> plt.Figure:
    """Sparse attention patterns (full, local, strided, sliding window, + global tokens) and their cost."""
    t = torch.arange(T)
    distance = t[:, None] - t[None, :]
    causal = distance >= 0
    window, side, stride, num_global = 4, 3, 4, 2
    sliding = causal & (distance < window)
    patterns = {
        _("full causal (2017, GPT)"): causal,
        _("local band, {side} keys each side\n(encoder; Longformer-style)").format(side=side): distance.abs() <= side,
        _("strided, every {stride}th key\n(Sparse Transformer head)").format(stride=stride):
            causal & (distance % stride == 0),
        _("sliding window W = {window}\n(Mistral)").format(window=window): sliding,
        # Causal like the panel before it: a global key is seen by every later query, and a global
        # query (rows 0-1) still sees only the keys before it.
        _("sliding window W = {window} + {num_global} global\ntokens (causal; Longformer's idea)").format(
            window=window, num_global=num_global):
            sliding | (causal & (t[None, :] < num_global)),
    }
    fig, axes = plt.subplots(1, len(patterns), figsize=(14, 3.4))
    for ax, (title, mask) in zip(axes, patterns.items()):
        ax.imshow(mask.float(), cmap="Blues", vmin=-0.25, vmax=1.0, interpolation="nearest")
        ax.set_title(_("{title}\n{n} of {total} scores").format(title=title, n=int(mask.sum()), total=T * T),
                     fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(_("key s"), fontsize=8)
        ax.set_ylabel(_("query t"), fontsize=8)
    fig.suptitle(_("T = {T}: full attention costs O(T²) scores, a window of W costs O(T·W)").format(T=T), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig


def moe_routing() -> plt.Figure:
    """One token through a sparse mixture of experts with top-2 routing."""
    fig, ax = plt.subplots(figsize=(9.0, 3.6))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 4)
    ax.axis("off")
    _box(ax, 0.9, 2.0, 1.3, 0.6, _("token x (D,)"), EMB, 9)
    _box(ax, 2.9, 2.0, 1.6, 0.9, _("router\nsoftmax(W_r x)"), NEW, 9)
    _arrow(ax, (1.55, 2.0), (2.1, 2.0))
    probs = [0.05, 0.42, 0.08, 0.03, 0.06, 0.27, 0.05, 0.04]
    chosen = sorted(range(8), key=lambda e: -probs[e])[:2]
    total = sum(probs[e] for e in chosen)
    for e, p in enumerate(probs):
        y = 3.6 - e * 0.45
        on = e in chosen
        _box(ax, 5.6, y, 1.5, 0.36, _("expert {e}  p={p:.2f}").format(e=e, p=p), FFN if on else "#f7f7f7", 8,
             edge="#333333" if on else "#bbbbbb")
        _arrow(ax, (3.7, 2.0), (4.83, y), color="#444444" if on else "#dddddd", lw=1.2 if on else 0.8)
        if on:
            _arrow(ax, (6.37, y), (7.75, 2.0), color="tab:green")
            ax.text(7.15, (y + 2.0) / 2 + (0.2 if y > 2.0 else -0.25), f"× {p / total:.2f}", fontsize=8,
                    color="tab:green")
    _plus(ax, 7.95, 2.0)
    _box(ax, 9.1, 2.0, 1.3, 0.6, _("output (D,)"), OUTC, 9)
    _arrow(ax, (8.1, 2.0), (8.44, 2.0))
    ax.text(5.6, 0.05, _("top-2 of 8: only 2 experts run for this token; their weights are renormalised to sum to 1"),
            ha="center", fontsize=8, color="0.3")
    fig.tight_layout()
    return fig


def main() -> None:
    for _lang in FIG.editions():
        FIG.out().mkdir(parents=True, exist_ok=True)
        for name, draw in (("block_comparison", block_comparison), ("gqa_heads", gqa_heads),
                           ("sparse_patterns", sparse_patterns), ("moe_routing", moe_routing)):
            fig = draw()
            FIG.savefig(fig, FIG.out() / f"{name}.png", dpi=DPI)
            plt.close(fig)
            print(FIG.out() / f"{name}.png")


if __name__ == "__main__":
    main()

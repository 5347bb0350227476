"""Conceptual figures for chapter 08 (GPT, the KV cache), drawn into chapters/08_gpt_generation/images/.

Run: python images/gpt_generation_figures.py
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

OUT = Path(__file__).resolve().parents[1] / "chapters" / "08_gpt_generation" / "images"
FIG = Figures("gpt_generation")  # draws each edition; _ translates a text
_ = FIG._
DPI = 100

ATTN, NORM, FFN, EMB, OUTC, CACHE = "#fde2c8", "#f3f3f3", "#d9ead3", "#e8eef7", "#e4dcf1", "#fff2a8"


def _box(ax, x, y, w, h, text, color, fontsize=9):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                facecolor=color, edgecolor="#333333", linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, color="#444444", rad=0.0):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, color=color, linewidth=1.2,
                                 shrinkA=1, shrinkB=1, connectionstyle=f"arc3,rad={rad}"))


def gpt_block() -> plt.Figure:
    """GPT-2: embeddings, n_layer Pre-LN blocks with residual paths, the final norm, the tied output."""
    fig, ax = plt.subplots(figsize=(7.4, 7.2))
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.3, 10.4)
    ax.axis("off")
    x, w = 4.2, 3.6
    ax.text(x, 0.0, _("idx  (B, T)   e.g.  T h e ␣ a t t"), ha="center", fontsize=9)
    _box(ax, x, 0.9, w, 0.6, _("token_embedding(idx) + position_embedding(0..T-1)"), EMB, 8)
    _arrow(ax, (x, 0.22), (x, 0.58))
    ax.add_patch(Rectangle((x - 2.35, 1.75), 4.7, 5.35, fill=False, ls="--", ec="0.5"))
    ax.text(x + 2.25, 6.9, _("block × n_layer"), fontsize=8, color="0.35", ha="right")
    _box(ax, x, 2.45, 2.6, 0.42, "ln_1", NORM, 8)
    _box(ax, x, 3.35, 2.6, 0.7, _("causal self-attention\nqkv → H heads → attn_out"), ATTN, 8)
    _box(ax, x, 4.75, 2.6, 0.42, "ln_2", NORM, 8)
    _box(ax, x, 5.7, 2.6, 0.7, _("mlp_in → GELU (tanh)\n→ mlp_out"), FFN, 8)
    for y0, y1 in ((1.2, 2.22), (2.66, 2.98), (4.96, 5.33)):
        _arrow(ax, (x, y0), (x, y1))
    # Residual stream: the input bypasses each sublayer and is added back.
    for y_in, y_sum in ((1.95, 4.1), (4.35, 6.55)):
        ax.plot([x - 1.9, x - 1.9], [y_in, y_sum], color="tab:blue", lw=1.4)
        ax.plot([x - 1.9, x], [y_in, y_in], color="tab:blue", lw=1.4)
        ax.add_patch(plt.Circle((x, y_sum), 0.16, facecolor="white", edgecolor="tab:blue", lw=1.4))
        ax.text(x, y_sum, "+", ha="center", va="center", fontsize=10, color="tab:blue")
        _arrow(ax, (x - 1.9, y_sum), (x - 0.17, y_sum), color="tab:blue")
    _arrow(ax, (x, 3.7), (x, 3.94))
    _arrow(ax, (x, 4.26), (x, 4.53))
    _arrow(ax, (x, 6.05), (x, 6.39))
    ax.text(x - 2.05, 3.1, _("residual"), rotation=90, fontsize=8, color="tab:blue", va="center", ha="right")
    _box(ax, x, 7.75, w, 0.5, _("ln_f  (final LayerNorm)"), NORM, 8)
    _arrow(ax, (x, 6.71), (x, 7.5))
    _box(ax, x, 8.75, w, 0.6, _("logits = h @ token_embedding.weightᵀ\n(B, T, V)"), OUTC, 8)
    _arrow(ax, (x, 8.0), (x, 8.45))
    ax.text(x, 9.55, _("next tokens:  h e ␣ a t t e"), ha="center", fontsize=9)
    _arrow(ax, (x, 9.05), (x, 9.35))
    notes = [_("GPT-2's choices:"), _("• Pre-LN: x + sublayer(norm(x))"), _("• a final LayerNorm"),
             _("• learned positions"), _("   (GPT-1 had them too)"), _("• output tied to the"),
             _("   token embedding"), _("• GELU, tanh form"), _("• no encoder, no"), _("   cross-attention")]
    for i, line in enumerate(notes):
        ax.text(7.0, 8.2 - i * 0.45, line, fontsize=8.5, color="0.2" if i else "black",
                weight="bold" if i == 0 else "normal")
    ax.set_title(_("a GPT (the GPT-2 layout)"), fontsize=11)
    fig.tight_layout()
    return fig


def _cells(ax, x0, y, n, color, label=None, new=None):
    for i in range(n):
        face = "#f4a582" if new is not None and i == new else color
        ax.add_patch(Rectangle((x0 + i * 0.42, y), 0.38, 0.38, facecolor=face, edgecolor="#555555", lw=0.7))
    if label:
        ax.text(x0 - 0.15, y + 0.19, label, ha="right", va="center", fontsize=8)


def kv_cache() -> plt.Figure:
    """Without a cache every step recomputes keys and values of the whole prefix; with one, only the new token's."""
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 3.6))
    for ax, cached in zip(axes, (False, True)):
        ax.set_xlim(-1.6, 4.2)
        ax.set_ylim(-0.6, 4.3)
        ax.axis("off")
        ax.set_title(_("with a KV cache: one new column per step") if cached else
                     _("without a cache: recompute every position"), fontsize=10)
        for step in range(4):
            y = 3.5 - step * 1.05
            n = 4 + step
            ax.text(-1.5, y + 0.3, _("step {n}").format(n=step + 1), fontsize=8, color="0.3")
            if cached and step > 0:
                _cells(ax, 0, y, n - 1, CACHE, "K, V")
                _cells(ax, (n - 1) * 0.42, y, 1, "#f4a582")
                _cells(ax, (n - 1) * 0.42, y - 0.43, 1, ATTN, None)
                ax.text((n - 1) * 0.42 + 0.55, y - 0.24, _("q: 1 token"), fontsize=7.5, va="center")
            else:
                _cells(ax, 0, y, n, "#f4a582", "K, V")
                _cells(ax, 0, y - 0.43, n, ATTN, "q")
        ax.text(1.3, -0.55, (_("step 1 runs the prompt and fills the cache; later steps read old keys and values\n"
                             "from it (yellow) and compute only the newest token (orange)")) if cached else
                (_("every step computes q, k, v for all positions again (orange):\nwork per step grows with the "
                 "length, the total quadratically")), ha="center", fontsize=8, color="0.25")
    fig.tight_layout()
    return fig


def main() -> None:
    for _lang in FIG.editions():
        FIG.out().mkdir(parents=True, exist_ok=True)
        for name, draw in (("gpt_block", gpt_block), ("kv_cache", kv_cache)):
            fig = draw()
            FIG.savefig(fig, FIG.out() / f"{name}.png", dpi=DPI)
            plt.close(fig)
            print(FIG.out() / f"{name}.png")


if __name__ == "__main__":
    main()

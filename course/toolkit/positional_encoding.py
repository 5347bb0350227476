"""Chapter 03 helpers: toy data and plots. Every plot takes tensors YOU computed with your own code."""
from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from course import tr


def show_table(P: torch.Tensor, title: str = tr("sinusoidal position table P"), ax=None):
    """Heatmap of a (positions, D) table: one row per position, one column per dimension."""
    P = P.detach().cpu()
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.2))
    image = ax.imshow(P, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xlabel(tr("dimension (column)"))
    ax.set_ylabel(tr("position p (row)"))
    ax.set_title(title)
    plt.colorbar(image, ax=ax, fraction=0.04)
    return ax


def plot_columns(P: torch.Tensor, columns: list[int], ax=None):
    """A few columns of the table as curves over the positions."""
    P = P.detach().cpu()
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.2))
    for c in columns:
        kind = "sin" if c % 2 == 0 else "cos"
        ax.plot(P[:, c], lw=1.6, label=tr("column {c} ({kind}, pair {pair})", c=c, kind=kind, pair=c // 2))
    ax.set_xlabel(tr("position p"))
    ax.set_ylabel(tr("P[p, column]"))
    ax.set_ylim(-1.15, 1.15)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    ax.set_title(tr("each column is a wave; the wavelength grows with the pair index"))
    return ax


def plot_dot_vs_distance(P: torch.Tensor, starts=(0, 30, 90), max_k: int = 60, ax=None):
    """P[t] . P[t + k] as a function of k, one curve per start t (the curves should coincide)."""
    P = P.detach().cpu()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.4))
    ks = torch.arange(max_k + 1)
    for t, style in zip(starts, ["-", "--", ":", "-."] * 3):
        ax.plot(ks, (P[t] * P[t + ks]).sum(-1), style, lw=2.2, label=f"t = {t}")
    ax.set_xlabel(tr("distance k"))
    ax.set_ylabel(r"$P_t \cdot P_{t+k}$")
    ax.set_title(tr("similarity of two positions vs their distance"))
    ax.legend()
    return ax


def plot_row_change(moved: torch.Tensor, train_len: int, ax=None):
    """Bar chart: how far each row of a learned table moved from its initial value (one bar per position)."""
    moved = moved.detach().cpu()
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 2.8))
    colours = ["tab:blue" if p < train_len else "tab:orange" for p in range(len(moved))]
    ax.bar(torch.arange(len(moved)), moved, color=colours, width=0.8)
    ax.axvline(train_len - 0.5, color="k", lw=1, ls="--")
    ax.text(train_len - 0.3, ax.get_ylim()[1] * 0.9,
            tr(" positions >= {train_len}: never in a training sequence", train_len=train_len), fontsize=9, va="top")
    ax.set_xlabel(tr("position p"))
    # mathtext has no CJK glyphs: a translation writes its words outside the $...$
    ax.set_ylabel(tr(r"$\|E_p^{{after}} - E_p^{{before}}\|$"))
    ax.set_title(tr("how much training changed each row of the learned position table"))
    return ax


def previous_token_batch(batch_size: int, length: int, vocab_size: int, generator: torch.Generator | None = None):
    """Random token ids and the "previous token" targets: target[t] = ids[t - 1], -100 (ignored) at t = 0.

    Returns ids (B, T) and targets (B, T), both int64.
    """
    ids = torch.randint(0, vocab_size, (batch_size, length), generator=generator)
    targets = torch.full_like(ids, -100)
    targets[:, 1:] = ids[:, :-1]
    return ids, targets


def plot_accuracy_by_position(curves: dict[str, torch.Tensor], train_len: int, chance: float | None = None, ax=None):
    """Accuracy at each position for several models; the shaded part is the length seen in training."""
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.6))
    length = max(len(c) for c in curves.values())
    ax.axvspan(-0.5, train_len - 0.5, color="0.9", label=tr("trained on length {train_len}", train_len=train_len))
    for (name, acc), style in zip(curves.items(), ["-o", "-s", "-^", "-d"]):
        ax.plot(torch.arange(1, len(acc)), acc[1:].cpu(), style, ms=3.5, lw=1.3, label=name)
    if chance is not None:
        ax.axhline(chance, color="k", lw=0.8, ls=":", label=tr("chance"))
    ax.set_xlim(-0.5, length - 0.5)
    ax.set_ylim(-0.03, 1.05)
    ax.set_xlabel(tr("position t"))
    ax.set_ylabel(tr("accuracy"))
    ax.set_title(tr("previous-token accuracy at each position"))
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9)
    return ax

"""Toy data and plotting helpers for chapter 04 (no reference code: plots take your tensors)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from course import tr
from course.toolkit.heatmap import heatmap


def neighbour_batch(batch_size: int, seq_len: int, vocab_size: int,
                    generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random token sequences and, for every position, its left and right neighbour.

    The sequences wrap around: the left neighbour of position 0 is the last token and the
    right neighbour of the last position is token 0, so every position has both.

    Returns:
        ids (B, T), left (B, T) with left[:, t] = ids[:, t - 1], right (B, T) with right[:, t] = ids[:, t + 1].
    """
    ids = torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator)
    return ids, ids.roll(1, dims=1), ids.roll(-1, dims=1)


def show_heads(weights: torch.Tensor, labels: list[str] | None = None, title: str | None = None,
               axes=None, annotate: bool = False):
    """One heatmap per head for a (H, T, S) weight tensor: row = query position, column = key position."""
    w = weights.detach().cpu().float()
    if w.dim() != 3:
        raise ValueError(tr("weights should be (H, T, S), got {shape}", shape=tuple(w.shape)))
    H, T, S = w.shape
    if axes is None:
        _, axes = plt.subplots(1, H, figsize=(2.6 * H + 0.6, 2.7), squeeze=False)
        axes = axes[0]
    for h, ax in enumerate(axes):
        ticks = labels is not None
        heatmap(ax, w[h].numpy(), cmap="Reds", vmin=0, vmax=1, annotate=annotate, fontsize=6, linewidth=0,
                xticklabels=labels[:S] if ticks else list(range(S)),
                yticklabels=labels[:T] if ticks else list(range(T)))
        ax.set_title(tr("head {h}", h=h), fontsize=9)
        ax.set_xlabel(tr("key position"), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.tick_params(axis="x", rotation=90)
        ax.tick_params(axis="y", rotation=0)
    axes[0].set_ylabel(tr("query position"), fontsize=8)
    if title:
        axes[0].figure.suptitle(title, fontsize=10)
    axes[0].figure.tight_layout()
    return axes


def plot_losses(curves: dict[str, list[float]], ax=None, title: str | None = None):
    """Training-loss curves, one per label, on a log axis."""
    if ax is None:
        _, ax = plt.subplots(figsize=(4.8, 3.2))
    for label, values in curves.items():
        ax.plot(values, label=label, linewidth=1.2)
    ax.set_yscale("log")
    ax.set_xlabel(tr("step"))
    ax.set_ylabel(tr("loss"))
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def plot_cost(heads: list[int], d_model: int, flops: dict[str, list[float]], memory_mb: list[float],
              times_ms: list[float], title: str | None = None):
    """Three panels against the number of heads H (head size d_model / H): stacked FLOP counts
    (label -> one count per H), megabytes of attention weights, measured milliseconds."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
    positions = range(len(heads))
    bottom = [0.0] * len(heads)
    for label, values in flops.items():
        axes[0].bar(positions, [v / 1e9 for v in values], bottom=bottom, label=label)
        bottom = [b + v / 1e9 for b, v in zip(bottom, values)]
    axes[0].set_ylabel(tr("GFLOP per forward pass"))
    axes[0].set_title(tr("arithmetic: almost flat"), fontsize=10)
    axes[0].legend(fontsize=7, loc="lower left")
    axes[1].bar(positions, memory_mb, color="tab:purple")
    axes[1].set_ylabel(tr("MB of attention weights"))
    axes[1].set_title(tr("the (B, H, T, S) weights grow like H"), fontsize=10)
    axes[2].plot(positions, times_ms, marker="o", color="tab:red")
    axes[2].set_ylim(bottom=0)
    axes[2].set_ylabel(tr("ms per forward pass"))
    axes[2].set_title(tr("measured time (your module, CPU)"), fontsize=10)
    for ax in axes:
        ax.set_xticks(positions, [f"{h}\n({d_model // h})" for h in heads], fontsize=8)
        ax.set_xlabel(tr("H heads (Dh)"), fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return axes



def plot_length_scaling(lengths: list[int], times_ms: dict[str, list[float]], d_model: int, ax=None):
    """Measured milliseconds against the sequence length T on log-log axes, one line per layer,
    with dotted guides of slope 1 (like T) and 2 (like T^2) through each line's first point."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5.6, 3.6))
    for (label, values), color in zip(times_ms.items(), ("tab:red", "tab:blue", "tab:green")):
        ax.loglog(lengths, values, marker="o", color=color, label=label)
    first = min(values[0] for values in times_ms.values())
    for power, style in ((1, ":"), (2, "--")):
        ax.loglog(lengths, [first * (t / lengths[0]) ** power for t in lengths], style, color="gray",
                  linewidth=0.8, label=tr("grows like T^{power}", power=power))
    ax.axvline(d_model, color="gray", linewidth=0.6)
    ax.text(d_model, ax.get_ylim()[1], f" T = D = {d_model}", fontsize=7, va="top")
    ax.set_xlabel(tr("sequence length T"))
    ax.set_ylabel(tr("ms per forward pass"))
    ax.set_title(tr("one layer, one sequence, CPU"), fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return ax

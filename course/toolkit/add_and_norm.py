"""Chapter 05 helpers: a toy task and plots. Every plot takes numbers YOUR code computed."""
from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from course import tr


def sort_batch(batch_size: int, length: int, vocab_size: int, generator: torch.Generator | None = None):
    """Random sequences of token ids and their sorted versions: the target at position t is the
    t-th smallest input token.

    Returns inputs (B, T) and targets (B, T), both int64.
    """
    inputs = torch.randint(0, vocab_size, (batch_size, length), generator=generator)
    return inputs, inputs.sort(dim=-1).values


def _colour(label: str, i: int) -> str:
    """Post-LN red and Pre-LN blue in every plot of the chapter; other labels take the default cycle."""
    if label.startswith("Post"):
        return "tab:red"
    if label.startswith("Pre"):
        return "tab:blue"
    return f"C{i}"


def plot_per_layer(curves: dict[str, list[float]], ylabel: str, title: str, log: bool = True, ax=None):
    """One line per model: a quantity measured at each layer (or block), layer 1 at the left."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.6))
    for i, ((label, values), marker) in enumerate(zip(curves.items(), "osd^v<>")):
        values = torch.as_tensor(values, dtype=torch.float64)
        ax.plot(torch.arange(1, len(values) + 1), values, marker=marker, ms=4, lw=1.6, label=label,
                color=_colour(label, i))
    if log:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel(tr("layer (1 = next to the input)"))
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    return ax


def plot_against_depth(depths: list[int], curves: dict[str, list[float]], ylabel: str, title: str, ax=None):
    """One line per model: a quantity measured for stacks of different depths N (log-scaled N axis)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5.2, 3.6))
    for i, ((label, values), marker) in enumerate(zip(curves.items(), "osd^v<>")):
        ax.plot(depths, values, marker=marker, ms=5, lw=1.6, label=label, color=_colour(label, i))
    ax.set_xscale("log", base=2)
    ax.set_xticks(depths, [str(d) for d in depths])
    ax.set_ylim(bottom=0)
    ax.set_xlabel(tr("number of layers N"))
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    return ax


def _smooth(values: torch.Tensor, window: int) -> torch.Tensor:
    if window <= 1 or len(values) < window:
        return values
    kernel = torch.ones(window, dtype=values.dtype) / window
    padded = torch.cat([values[:1].repeat(window - 1), values])  # no dip at the start
    return torch.nn.functional.conv1d(padded[None, None], kernel[None, None])[0, 0]


def plot_training(losses: dict[str, list[float]], schedules: dict[str, list[float]],
                  chance: float | None = None, window: int = 10):
    """Left: the learning rate at each step, one line per schedule; right: the training loss
    (moving average), one line per run. Runs whose label starts with "Post" are red, "Pre" blue.
    A schedule whose rate rises at the start (a warm-up) is dashed, and so is each run whose label
    ends with that schedule's label ("Pre-LN, with warm-up" and "with warm-up")."""
    # Told apart by the rates, not by words in the labels, which a translated notebook writes in its language.
    warm = [label for label, values in schedules.items() if len(values) and values[0] < max(values)]
    fig, (ax_lr, ax_loss) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1, 2]})
    for label, values in schedules.items():
        ax_lr.plot(values, "--" if label in warm else "-", color="0.3", lw=1.8, label=label)
    for label, values in losses.items():
        colour = _colour(label, 0)
        style = "--" if any(label.endswith(w) for w in warm) else "-"
        values = torch.as_tensor(values, dtype=torch.float64)
        ax_loss.plot(_smooth(values, window), style, color=colour, lw=1.8, label=label)
    if chance is not None:
        ax_loss.axhline(chance, color="0.5", lw=1, ls=":")
        # named outside the axes, right of the line's end: inside it sat on the stalled run's curve
        ax_loss.annotate(tr("guessing (ln V) "), xy=(1, chance), xycoords=("axes fraction", "data"), xytext=(3, 0),
                         textcoords="offset points", ha="left", va="center", fontsize=8, color="0.4")
    ax_lr.set_xlabel(tr("step"))
    ax_lr.set_ylabel(tr("learning rate"))
    ax_lr.set_title(tr("learning-rate schedules"), fontsize=10)
    ax_lr.legend(fontsize=9)
    ax_loss.set_xlabel(tr("step"))
    ax_loss.set_ylabel(tr("training loss ({window}-step average)", window=window))
    ax_loss.set_title(tr("Post-LN (red) and Pre-LN (blue), with (dashed) and without (solid) warm-up"), fontsize=10)
    ax_loss.legend(fontsize=9)
    for ax in (ax_lr, ax_loss):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig

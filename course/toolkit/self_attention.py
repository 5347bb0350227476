"""Toy data and plotting helpers for chapter 02 (no reference code: plots take your tensors)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from course import tr
from course.toolkit.heatmap import heatmap

# Hand-made 4-d embeddings. The four features mean roughly:
#   [is an animal or person, is an action, describes something, is a function word]
VOCAB = {
    "the": [0.0, 0.0, 0.1, 1.0],
    "hungry": [0.2, 0.1, 1.0, 0.0],
    "cat": [1.0, 0.0, 0.3, 0.0],
    "chased": [0.1, 1.0, 0.0, 0.1],
    "mouse": [0.9, 0.0, 0.1, 0.1],
    "dog": [1.0, 0.1, 0.0, 0.0],
    "bites": [0.0, 1.0, 0.2, 0.0],
    "man": [0.8, 0.0, 0.0, 0.3],
    "ran": [0.0, 0.9, 0.0, 0.2],
    "<pad>": [0.0, 0.0, 0.0, 0.0],
}
SENTENCE = ["the", "hungry", "cat", "chased", "the", "mouse"]


def embed(words: list[str]) -> torch.Tensor:
    """The (T, 4) matrix of hand-made embeddings for a list of words."""
    unknown = [w for w in words if w not in VOCAB]
    if unknown:
        raise ValueError(tr("no embedding for {unknown}; known words: {known}", unknown=unknown, known=sorted(VOCAB)))
    return torch.tensor([VOCAB[w] for w in words])


def show_attention(weights: torch.Tensor, queries: list[str], keys: list[str] | None = None,
                   ax=None, title: str | None = None, annotate: bool = True):
    """Heatmap of a (T, S) weight matrix: one row per query, one column per key."""
    keys = queries if keys is None else keys
    w = weights.detach().cpu().float()
    if w.dim() != 2 or w.shape != (len(queries), len(keys)):
        raise ValueError(tr("weights should be ({queries}, {keys}), got {shape}", queries=len(queries), keys=len(keys),
                            shape=tuple(w.shape)))
    if ax is None:
        _, ax = plt.subplots(figsize=(0.6 * len(keys) + 2, 0.5 * len(queries) + 1.2))
    # Masked-out rows of nothing (all -inf) come back as NaN: those cells stay blank.
    heatmap(ax, w.numpy(), cmap="Reds", vmin=0, vmax=max(1e-6, float(w.nan_to_num().max())), annotate=annotate,
            xticklabels=keys, yticklabels=queries)
    ax.set_xticklabels(keys, rotation=45, ha="right")
    ax.set_xlabel(tr("key (attended to)"))
    ax.set_ylabel(tr("query"))
    if title:
        ax.set_title(title)
    return ax


def plot_score_distributions(scores: dict[str, torch.Tensor], ax=None, title: str | None = None):
    """The distribution of attention scores, one curve per entry (label -> scores of any shape),
    e.g. q.k before and after dividing by sqrt(d_k): the unscaled ones spread out with d_k."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2))
    for label, values in scores.items():
        xs, density = _density(values.detach().cpu().flatten().double().numpy())
        (line,) = ax.plot(xs, density, label=label, linewidth=1.2)
        ax.fill_between(xs, density, color=line.get_color(), alpha=0.25, linewidth=0)
    ax.set_xlabel(tr("score"))
    ax.set_ylabel(tr("density"))
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def _density(values: np.ndarray, points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """A Gaussian kernel density estimate over the values' own range (Scott's bandwidth)."""
    n = len(values)
    bandwidth = max(values.std() * n ** -0.2, 1e-12)
    xs = np.linspace(values.min(), values.max(), points)
    sample = values if n <= 5000 else np.random.default_rng(0).choice(values, 5000, replace=False)
    z = (xs[:, None] - sample[None, :]) / bandwidth  # (points, n)
    return xs, np.exp(-0.5 * z ** 2).mean(axis=1) / (bandwidth * np.sqrt(2 * np.pi))


def plot_against_dk(dims: list[int], curves: dict[str, list[float]], ylabel: str, ax=None,
                    logy: bool = False, title: str | None = None, reference: dict[str, list[float]] | None = None):
    """One line per entry of `curves` (label -> values, one per d_k), d_k on a log axis; `reference`
    (label -> values) adds dashed grey lines that are no measurement, such as a theory's."""
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 3.2))
    for label, values in curves.items():
        ax.plot(dims, values, marker="o", markersize=3, label=label)
    for label, values in (reference or {}).items():  # passed apart: a label in any language says nothing
        ax.plot(dims, values, linestyle="--", color="grey", label=label)
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log", base=2)
    ax.set_xlabel("$d_k$")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax

"""Chapter 01 helpers: the toy regression data and the plots. No reference code: every plot
takes the learner's functions (or their outputs) as arguments."""
from __future__ import annotations

from typing import Callable, NamedTuple

import matplotlib.pyplot as plt
import torch

from course import tr


def true_function(x: torch.Tensor) -> torch.Tensor:
    """The function the toy data is sampled from: f(x) = 2 sin(x) + x."""
    return 2 * torch.sin(x) + x


class ToyData(NamedTuple):
    x_train: torch.Tensor  # (N,) sorted inputs in [0, 5)
    y_train: torch.Tensor  # (N,) noisy targets f(x) + noise
    x_query: torch.Tensor  # (Q,) evenly spaced queries 0, 0.1, ..., 4.9
    y_true: torch.Tensor  # (Q,) the noise-free f at the queries


def make_toy_data(n_train: int = 40, noise: float = 0.5, seed: int = 0, step: float = 0.1) -> ToyData:
    """n_train sorted points on [0, 5) with y = 2 sin(x) + x + N(0, noise^2), and a query grid."""
    generator = torch.Generator().manual_seed(seed)
    x_train = torch.sort(torch.rand(n_train, generator=generator) * 5).values
    y_train = true_function(x_train) + noise * torch.randn(n_train, generator=generator)
    x_query = torch.arange(0, 5, step)
    return ToyData(x_train, y_train, x_query, true_function(x_query))


def plot_data(data: ToyData, ax=None, title: str = tr("toy data")):
    ax = ax or plt.gca()
    ax.plot(data.x_query, data.y_true, color="black", lw=1.5, label=tr("true f(x) = 2 sin(x) + x"))
    ax.plot(data.x_train, data.y_train, "o", color="tab:orange", ms=4, alpha=0.8, label=tr("training points"))
    ax.set(xlabel="x", ylabel="y", title=title)
    return ax


def plot_fit(data: ToyData, y_hat: torch.Tensor, ax=None, title: str = "", label: str = tr("prediction")):
    """The true function, the training points and a prediction at the query points."""
    ax = plot_data(data, ax, title)
    ax.plot(data.x_query, y_hat.detach().cpu(), color="tab:blue", lw=2, ls="--", label=label)
    return ax


def plot_kernels(kernels: dict[str, Callable[[torch.Tensor], torch.Tensor]], span: float = 3.0):
    """One small panel per kernel, each drawn on u in [-span, span]."""
    u = torch.linspace(-span, span, 301)
    fig, axes = plt.subplots(1, len(kernels), figsize=(3 * len(kernels), 2.6), sharey=True)
    for ax, (name, kernel) in zip(axes, kernels.items()):
        ax.plot(u, kernel(u).detach(), color="tab:red")
        ax.fill_between(u, kernel(u).detach(), alpha=0.15, color="tab:red")
        ax.set(title=name, xlabel="u = (x - x_i) / h")
    axes[0].set_ylabel("K(u)")
    fig.tight_layout()
    return fig


def plot_weights(weights: torch.Tensor, x_query: torch.Tensor, ax=None, title: str = tr("attention weights"),
                 colorbar: bool = True):
    """Heatmap of a (Q, N) weight matrix: one row per query, one column per sorted training point."""
    ax = ax or plt.gca()
    Q, N = weights.shape
    image = ax.imshow(weights.detach().cpu(), cmap="Reds", aspect="auto",
                      extent=(-0.5, N - 0.5, float(x_query[-1]), float(x_query[0])))
    ax.set(xlabel=tr("training point (sorted by x)"), ylabel=tr("query x"), title=title)
    if colorbar:
        plt.colorbar(image, ax=ax, fraction=0.046)
    return ax


def plot_bandwidth_sweep(nadaraya_watson: Callable, data: ToyData, bandwidths=(0.1, 0.3, 0.6, 1.0)):
    """Fits (top row) and weight heatmaps (bottom row) for each bandwidth, with the test MSE
    against the noise-free function. Returns {bandwidth: mse}."""
    fig, axes = plt.subplots(2, len(bandwidths), figsize=(3.6 * len(bandwidths), 6.2))
    errors = {}
    for col, h in enumerate(bandwidths):
        y_hat, weights = nadaraya_watson(data.x_query, data.x_train, data.y_train, h)
        errors[h] = ((y_hat - data.y_true) ** 2).mean().item()
        plot_fit(data, y_hat, axes[0, col], title=tr("h = {h:g}: MSE {mse:.3f}", h=h, mse=errors[h]))
        plot_weights(weights, data.x_query, axes[1, col], title=tr("weights, h = {h:g}", h=h), colorbar=False)
        if col:
            axes[0, col].set_ylabel("")
            axes[1, col].set_ylabel("")
    axes[0, 0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return errors

"""Chapter 06 helpers: the toy reversal task and plots. Every plot takes tensors YOU computed."""
from __future__ import annotations

import contextlib

import matplotlib.pyplot as plt
import torch

from course import tr
from course.toolkit.heatmap import heatmap

PAD, BOS, EOS = 0, 1, 2  # special token ids; the symbols of the task are FIRST_SYMBOL, FIRST_SYMBOL + 1, ...
FIRST_SYMBOL = 3
SPECIAL_NAMES = {PAD: "<pad>", BOS: "<s>", EOS: "</s>"}


def token_name(i: int) -> str:
    """A short printable name: the special tokens by name, symbol k as the letter 'a' + k."""
    return SPECIAL_NAMES.get(i, chr(ord("a") + i - FIRST_SYMBOL))


def show_tokens(ids) -> str:
    """Token ids as a readable string, e.g. '<s> d c a </s>'."""
    return " ".join(token_name(int(i)) for i in ids)


def reversal_batch(batch_size: int, num_symbols: int = 10, min_len: int = 3, max_len: int = 10,
                   generator: torch.Generator | None = None):
    """A batch of the reversal task: the target is the source read backwards.

    Each source is a random string of symbols with a random length in [min_len, max_len],
    padded on the right with PAD. The decoder is trained with "teacher forcing": its input is
    the correct answer shifted right by one (starting with BOS), and at each position it must
    predict the next token of the answer (ending with EOS).

    Returns:
        src (B, max_len): symbols, then PAD.
        tgt_in (B, max_len + 1): BOS, the reversed symbols, then PAD.
        tgt_out (B, max_len + 1): the reversed symbols, EOS, then PAD.
    """
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)  # (B,)
    symbols = torch.randint(FIRST_SYMBOL, FIRST_SYMBOL + num_symbols, (batch_size, max_len), generator=generator)
    positions = torch.arange(max_len)
    real = positions[None, :] < lengths[:, None]  # (B, max_len) True on the real tokens
    src = torch.where(real, symbols, PAD)
    # Reverse only the real part of each row: position p takes symbol (length - 1 - p).
    flipped = (lengths[:, None] - 1 - positions[None, :]).clamp(min=0)  # (B, max_len)
    reversed_ = torch.where(real, symbols.gather(1, flipped), PAD)
    tgt_in = torch.cat([torch.full((batch_size, 1), BOS), reversed_], dim=1)
    tgt_out = torch.cat([reversed_, torch.full((batch_size, 1), PAD)], dim=1)
    tgt_out[torch.arange(batch_size), lengths] = EOS  # EOS right after the last symbol
    return src, tgt_in, tgt_out


class ReversalTask:
    """The reversal task with a fixed held-out set that training batches never contain.

    task.held_out is (src, tgt_in, tgt_out) for `num_held_out` sequences drawn first;
    task.batch(B) draws training examples and redraws any whose source is in the held-out set,
    so the held-out accuracy measures sequences the model has never seen.
    """

    def __init__(self, num_symbols: int = 10, min_len: int = 3, max_len: int = 10,
                 num_held_out: int = 1000, seed: int = 0):
        self.num_symbols, self.min_len, self.max_len = num_symbols, min_len, max_len
        self.vocab_size = FIRST_SYMBOL + num_symbols
        self.generator = torch.Generator().manual_seed(seed)
        self.held_out = reversal_batch(num_held_out, num_symbols, min_len, max_len, self.generator)
        self._held_out_keys = {tuple(row.tolist()) for row in self.held_out[0]}

    def batch(self, batch_size: int):
        """(src, tgt_in, tgt_out) for batch_size fresh training examples (see reversal_batch)."""
        src, tgt_in, tgt_out = reversal_batch(batch_size, self.num_symbols, self.min_len, self.max_len,
                                              self.generator)
        clash = [i for i, row in enumerate(src.tolist()) if tuple(row) in self._held_out_keys]
        while clash:  # redraw the (rare) rows that happen to be held-out sequences
            s, i, o = reversal_batch(len(clash), self.num_symbols, self.min_len, self.max_len, self.generator)
            src[clash], tgt_in[clash], tgt_out[clash] = s, i, o
            clash = [i for i in clash if tuple(src[i].tolist()) in self._held_out_keys]
        return src, tgt_in, tgt_out


def show_output(ids) -> str:
    """A decoded row up to and including its first end token (later columns only repeat it)."""
    ids = [int(i) for i in ids]
    return show_tokens(ids[:ids.index(EOS) + 1] if EOS in ids else ids)


def strip(ids) -> list[int]:
    """The tokens of one decoded row between the start token and the first end token."""
    out = []
    for i in ids.tolist()[1:] if ids[0] == BOS else ids.tolist():
        if i in (EOS, PAD):
            break
        out.append(i)
    return out


def exact_match(decoded: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """(B,) bool: row b is True when decoded[b] (BOS, answer, EOS, ...) spells exactly the answer in tgt_out[b]."""
    return torch.tensor([strip(d) == strip(t) for d, t in zip(decoded.cpu(), tgt_out.cpu())])


def show_mask(mask: torch.Tensor, title: str, ax=None, xlabels=None, ylabels=None):
    """A boolean (T, S) mask as a grid: dark = may attend (True), light = hidden (False)."""
    mask = mask.detach().cpu().bool()
    if ax is None:
        _, ax = plt.subplots(figsize=(3.4, 3.4))
    T, S = mask.shape
    heatmap(ax, mask.float().numpy(), cmap="Blues", vmin=-0.25, vmax=1.0, linewidth=1,
            xticklabels=list(xlabels) if xlabels is not None else list(range(S)),
            yticklabels=list(ylabels) if ylabels is not None else list(range(T)))
    ax.tick_params(labelsize=8)
    ax.tick_params(axis="x", rotation=90)
    ax.tick_params(axis="y", rotation=0)
    ax.set_xlabel(tr("key s (attended to)"))
    ax.set_ylabel(tr("query t (attending)"))
    ax.set_title(title, fontsize=10)
    return ax


def plot_smoothing(rows: dict[str, torch.Tensor], target: int, ax=None):
    """Bar charts of target distributions over the classes, side by side, one group per class."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    width = 0.8 / len(rows)
    for k, (name, row) in enumerate(rows.items()):
        row = row.detach().cpu()
        ax.bar(torch.arange(len(row)) + (k - (len(rows) - 1) / 2) * width, row, width=width, label=name)
    ax.set_xticks(range(len(row)))
    ax.set_ylim(0, 1.45)
    ax.set_xlabel(tr("class (the target is class {target})", target=target))
    ax.set_ylabel(tr("probability"))
    ax.legend(fontsize=9, loc="upper left")
    return ax


def plot_schedules(curves: dict[str, tuple[list, list]], ax=None, title: str = tr("learning-rate schedule")):
    """One line per schedule: name -> (steps, rates)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.2))
    for name, (steps, rates) in curves.items():
        ax.plot(steps, rates, lw=1.8, label=name)
    ax.set_xlabel(tr("step"))
    ax.set_ylabel(tr("learning rate"))
    ax.set_title(title)
    ax.legend(fontsize=9)
    return ax


def plot_training(losses: list[float], rates: list[float]):
    """Loss per step and the learning rate the scheduler set, one above the other."""
    fig, axes = plt.subplots(2, 1, figsize=(7, 4.2), sharex=True)
    axes[0].plot(losses, lw=1)
    axes[0].set_ylabel(tr("training loss (KL)"))
    axes[0].set_yscale("log")
    axes[1].plot(rates, color="tab:orange", lw=1.5)
    axes[1].set_ylabel(tr("learning rate"))
    axes[1].set_xlabel(tr("step"))
    fig.tight_layout()
    return fig


@contextlib.contextmanager
def recording_attention(modules: dict[str, torch.nn.Module]):
    """While the block runs, keep the weights each attention module returns: name -> (B, H, T, S).

    Works with any module whose forward returns (output, weights), such as MultiHeadAttention."""
    weights: dict[str, torch.Tensor] = {}

    def keep(name):
        def hook(module, args, output):
            weights[name] = output[1].detach().cpu()
        return hook

    handles = [module.register_forward_hook(keep(name)) for name, module in modules.items()]
    try:
        yield weights
    finally:
        for handle in handles:
            handle.remove()


def plot_attention_grid(maps: list[torch.Tensor], query_labels: list[str], key_labels: list[str], title: str,
                        xlabel: str = tr("key"), ylabel: str = tr("query")):
    """One row per layer, one column per head: maps[i] is layer i's (H, T, S) weights for one example."""
    L, H = len(maps), maps[0].shape[0]
    fig, axes = plt.subplots(L, H, figsize=(2.3 * H + 0.8, 2.3 * L + 0.6), squeeze=False)
    for i, layer_maps in enumerate(maps):
        for h in range(H):
            ax = axes[i, h]
            ax.imshow(layer_maps[h].detach().cpu(), cmap="viridis", vmin=0, vmax=1, aspect="auto")
            ax.set_xticks(range(len(key_labels)), key_labels, fontsize=6, rotation=90)
            ax.set_yticks(range(len(query_labels)), query_labels if h == 0 else [], fontsize=6)
            ax.set_title(tr("layer {i}, head {h}", i=i, h=h), fontsize=8)
        axes[i, 0].set_ylabel(ylabel, fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel, fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig

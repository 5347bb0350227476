"""Chapter 08 helpers: the course's own text, a character vocabulary, measurements and plots of
decoding, a toy table model for beam search, timing of forward calls, and a loader that copies
Hugging Face GPT-2 weights into the course's GPT. Every measurement uses YOUR model and code."""
from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import torch.nn as nn

from course import tr

CORPUS_FILE = "course_text.txt"


def load_course_text() -> str:
    """The narrative of chapters 01-06, as collected into this chapter's folder by `grader build`."""
    here = Path(CORPUS_FILE)
    path = here if here.is_file() else Path(__file__).resolve().parents[1] / "08_gpt_generation" / CORPUS_FILE
    return path.read_text(encoding="utf-8")


class CharVocab:
    """Characters <-> ids: one token per distinct character of the text it was built from."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}
        self.vocab_size = len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor([self.index[c] for c in text], dtype=torch.long)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


def random_windows(data: torch.Tensor, batch_size: int, length: int,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """(batch_size, length) windows cut from the 1-D token tensor `data` at random offsets."""
    starts = torch.randint(0, len(data) - length + 1, (batch_size,), generator=generator)
    return torch.stack([data[s:s + length] for s in starts.tolist()])


def plot_losses(curves: dict[str, tuple[list, list]], title: str = "", ax=None, log: bool = True):
    """One line per curve: name -> (steps, losses)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.2))
    for name, (steps, values) in curves.items():
        ax.plot(steps, values, lw=1.5, label=name, marker="o" if len(steps) < 30 else None, ms=3)
    ax.set_xlabel(tr("step"))
    ax.set_ylabel(tr("cross-entropy"))
    if log:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=9)
    return ax


def entropy_bits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy in bits of softmax(logits) over the last axis (-inf logits count as probability 0)."""
    log_p = torch.log_softmax(logits.double(), dim=-1)
    p = log_p.exp()
    return -(torch.where(p > 0, p * log_p, torch.zeros_like(p))).sum(-1).float() / math.log(2)


def distinct_ngrams(texts: list[str], n: int = 4) -> float:
    """The fraction of all n-grams (of characters) in the texts that are distinct: 1 = never repeats."""
    grams = [t[i:i + n] for t in texts for i in range(len(t) - n + 1)]
    return len(set(grams)) / max(len(grams), 1)


@torch.no_grad()
def continuation_log_prob(model: nn.Module, ids: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """(B,) total natural-log probability that `model` gives to ids[:, prompt_len:] after the prompt,
    in one forward pass (the whole sequence must fit in model.block_size)."""
    if ids.shape[1] > model.block_size:
        raise ValueError(tr("{count} tokens do not fit in block_size={block_size}", count=ids.shape[1],
                            block_size=model.block_size))
    log_p = torch.log_softmax(model(ids[:, :-1]).double(), dim=-1)  # (B, T-1, V)
    picked = log_p.gather(-1, ids[:, 1:, None])[..., 0]  # (B, T-1)
    return picked[:, prompt_len - 1:].sum(1)


class TableModel(nn.Module):
    """A toy language model: the next token depends only on the current one, through a fixed table
    of probabilities. table[a, b] = P(next = b | current = a). It has the GPT interface:
    model(idx (B, T)) -> logits (B, T, V), and a block_size."""

    def __init__(self, table, block_size: int = 64):
        super().__init__()
        table = torch.as_tensor(table, dtype=torch.float32)
        self.register_buffer("log_table", table.clamp_min(1e-30).log())
        self.block_size = block_size

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.log_table[idx]  # (B, T, V)


@contextlib.contextmanager
def forward_times(model: nn.Module):
    """Record the wall-clock time at the end of every forward call of `model`:
    with forward_times(model) as stamps: ...; then stamps[i] is the time after call i."""
    stamps: list[float] = []
    handle = model.register_forward_hook(lambda *_: stamps.append(time.perf_counter()))
    try:
        stamps.append(time.perf_counter())
        yield stamps
    finally:
        handle.remove()


def plot_step_times(runs: dict[str, list[float]], prompt_len: int):
    """Per-step time (ms) against the position of the generated token, and the running total."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    for name, stamps in runs.items():
        steps = torch.tensor(stamps).diff() * 1000  # ms per generated token
        positions = range(prompt_len, prompt_len + len(steps))
        axes[0].plot(positions, steps, lw=1, label=name)
        axes[1].plot(positions, steps.cumsum(0) / 1000, lw=1.8, label=name)
    axes[0].set_xlabel(tr("position of the generated token"))
    axes[0].set_ylabel(tr("time for this token (ms)"))
    axes[0].set_title(tr("one step"), fontsize=10)
    axes[1].set_xlabel(tr("position of the generated token"))
    axes[1].set_ylabel(tr("total time so far (s)"))
    axes[1].set_title(tr("all steps so far"), fontsize=10)
    for ax in axes:
        ax.legend(fontsize=9)
    fig.tight_layout()
    return fig


def load_hf_gpt2(hf_model: nn.Module, gpt_class: type) -> nn.Module:
    """A `gpt_class` (this chapter's GPT) holding the weights of a Hugging Face GPT2LMHeadModel.

    GPT-2 stores its linear layers as Conv1D with weights (in, out), the transpose of nn.Linear's
    (out, in); its `c_attn` holds the query, key and value projections side by side (in that
    order), which is exactly the course's `qkv` once transposed. The output layer is tied to the
    token embedding in both. Returns the model in eval mode.
    """
    cfg = hf_model.config
    if cfg.activation_function not in ("gelu_new", "gelu_pytorch_tanh") or not cfg.scale_attn_weights \
            or cfg.scale_attn_by_inverse_layer_idx or abs(cfg.layer_norm_epsilon - 1e-5) > 1e-12:
        raise ValueError(tr("the course GPT has the GPT-2 layout: tanh GELU, 1/sqrt(Dh) attention scale, "
                            "LayerNorm eps 1e-5; this configuration differs"))
    model = gpt_class(cfg.vocab_size, cfg.n_positions, cfg.n_layer, cfg.n_head, cfg.n_embd)
    hf = hf_model.state_dict()
    state = {"token_embedding.weight": hf["transformer.wte.weight"],
             "position_embedding.weight": hf["transformer.wpe.weight"],
             "ln_f.weight": hf["transformer.ln_f.weight"], "ln_f.bias": hf["transformer.ln_f.bias"]}
    convs = {"qkv": "attn.c_attn", "attn_out": "attn.c_proj", "mlp_in": "mlp.c_fc", "mlp_out": "mlp.c_proj"}
    for i in range(cfg.n_layer):
        theirs, ours = f"transformer.h.{i}.", f"blocks.{i}."
        for norm in ("ln_1", "ln_2"):
            for p in ("weight", "bias"):
                state[f"{ours}{norm}.{p}"] = hf[f"{theirs}{norm}.{p}"]
        for name, conv in convs.items():
            state[f"{ours}{name}.weight"] = hf[f"{theirs}{conv}.weight"].T  # Conv1D (in, out) -> Linear (out, in)
            state[f"{ours}{name}.bias"] = hf[f"{theirs}{conv}.bias"]
    model.load_state_dict({k: v.detach().clone() for k, v in state.items()})
    return model.eval()

"""Chapter 09 helpers: a small language-model wrapper, training and measuring loops, weight loaders for
Hugging Face's LLaMA and Mixtral layers, published model sizes, a mixture-of-topics task, and plots.
Nothing here implements an exercise: the models are built from the blocks YOU pass in."""
from __future__ import annotations

import contextlib
import itertools
import json
import math
import time
import unicodedata

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm

from course import tr
from course.toolkit.decoder_masking import show_mask  # noqa: F401 - the mask plot of chapter 06, reused

# ---------------------------------------------------------------- a language model around any blocks


class TinyLM(nn.Module):
    """A decoder-only language model assembled from parts: embedding -> (positions) -> blocks -> norm -> head.

    Args:
        embedding: maps ids (B, T) to vectors (B, T, D).
        blocks: the layers, each called as block(x) or, when mask_fn is given, block(x, mask_fn(T, device)).
        norm: the final normalisation (B, T, D) -> (B, T, D).
        d_model, vocab_size: D and V of the output layer head = nn.Linear(D, V, bias=False).
        positions: an optional module that adds positions to the embedded tokens (the 2017 way);
            LLaMA blocks rotate queries and keys instead and need none.
        mask_fn: optional, called as mask_fn(T, device) -> a (T, T) bool mask passed to every block.
    forward(idx (B, T)) -> logits (B, T, V).
    """

    def __init__(self, embedding: nn.Module, blocks: list[nn.Module], norm: nn.Module, d_model: int,
                 vocab_size: int, positions: nn.Module | None = None, mask_fn=None):
        super().__init__()
        self.embedding, self.positions, self.mask_fn = embedding, positions, mask_fn
        self.blocks = nn.ModuleList(blocks)
        self.norm = norm
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embedding(idx)  # (B, T, D)
        if self.positions is not None:
            x = self.positions(x)
        if self.mask_fn is None:
            for block in self.blocks:
                x = block(x)
        else:
            mask = self.mask_fn(idx.shape[1], idx.device)  # (T, T)
            for block in self.blocks:
                x = block(x, mask)
        return self.head(self.norm(x))  # (B, T, V)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def train_addition(model: nn.Module, task, steps: int, batch_size: int, lr: float, device: torch.device,
                   desc: str = tr("training"), eval_every: int = 50, warmup: int = 50, final_lr: float = 0.1,
                   clip: float = 1.0) -> dict:
    """Train a causal language model on an AdditionTask (AdamW; cross-entropy on the answer digits only);
    measure held-out exact match every `eval_every` steps.

    The learning rate rises linearly for `warmup` steps, then falls along a half cosine to
    `final_lr * lr` at the last step, and every step's gradient is clipped to norm `clip`: at a constant
    rate of 1e-2 a model that has learnt the task can lose it in one step (exact match 99% -> 60%), and
    where the run stops on such a step depends on float rounding, so on the CPU.

    Returns a dict: losses (per step), eval_steps and exact_match (% at those steps), seconds (training
    time without the evaluations), tokens_per_s (input tokens processed per second of training).
    """
    def rate(i):  # i counts the scheduler's steps from 0
        if i < warmup:
            return (i + 1) / warmup
        progress = min(1.0, (i - warmup) / max(1, steps - warmup))
        return final_lr + (1 - final_lr) * 0.5 * (1 + math.cos(math.pi * progress))

    model.to(device).train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, rate)
    losses, eval_steps, exact = [], [], []
    seconds, tokens = 0.0, 0
    for step in (bar := tqdm(range(1, steps + 1), desc=desc)):
        start = time.perf_counter()
        inputs, targets = (t.to(device) for t in task.batch(batch_size))
        logits = model(inputs)  # (B, L-1, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
        optimiser.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimiser.step()
        scheduler.step()
        seconds += time.perf_counter() - start
        tokens += inputs.numel()
        losses.append(loss.item())
        if step % eval_every == 0 or step == steps:
            model.eval()
            eval_steps.append(step)
            exact.append(100 * task.exact_match(lambda inputs: model(inputs.to(device))).float().mean().item())
            model.train()
            bar.set_postfix(loss=f"{loss.item():.3f}", exact=f"{exact[-1]:.0f}%")
    model.eval()
    return {"losses": losses, "eval_steps": eval_steps, "exact_match": exact, "seconds": seconds,
            "tokens_per_s": tokens / max(seconds, 1e-9)}


def load_ablation(path: str = "ablation.json") -> dict:
    """The course authors' ablation runs (benchmarks/llama_ablation.py), kept beside the notebook. A function
    of the toolkit, so that the cell reading them is plain Python a grading run may leave out
    (grader.classroom.grading.skipping: a cell that calls `open` always runs, and so do the cells it reads)."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def first_step_reaching(run: dict, target: float = 90.0) -> int | None:
    """The first evaluated step at which held-out exact match reached `target` % (None if never)."""
    return next((s for s, e in zip(run["eval_steps"], run["exact_match"]) if e >= target), None)


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95% for z = 1.96) for a success rate seen as successes of trials.
    Unlike p +- z sqrt(p(1-p)/n) it stays inside [0, 1] and is not empty at 0 of n or n of n."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(tr("need 0 <= successes <= trials and trials >= 1, got {successes} of {trials}",
                            successes=successes, trials=trials))
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def rank_test(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of an exact rank test (Wilcoxon-Mann-Whitney) that `a` and `b` come from one
    distribution: the rank sum of `a` against every way of choosing len(a) of the pooled values, tied values
    sharing their mean rank (steps on a grid of 50 tie often). Exact: no normal approximation for few seeds."""
    if not a or not b:
        raise ValueError(tr("need at least one value on each side, got {n} and {m}", n=len(a), m=len(b)))
    pooled = sorted(a + b)
    rank = {v: pooled.index(v) + (pooled.count(v) + 1) / 2 for v in pooled}  # ties share the mean of their ranks
    ranks = [rank[v] for v in a + b]
    centre = len(a) * (len(pooled) + 1) / 2
    seen = abs(sum(ranks[:len(a)]) - centre)
    sums = [sum(chosen) for chosen in itertools.combinations(ranks, len(a))]
    return sum(abs(t - centre) >= seen - 1e-9 for t in sums) / len(sums)


def display_width(text: str) -> int:
    """Columns `text` takes in a terminal: a wide (W) or full-width (F) character such as 头 takes two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: str, width: int, align: str = "<") -> str:
    """`text` padded with spaces to `width` display columns (align '<' left, '>' right): f"{s:<22}" counts
    characters, so a Chinese label would push its row's later columns to the right."""
    fill = " " * max(0, width - display_width(text))
    return text + fill if align == "<" else fill + text


@contextlib.contextmanager
def captured_keys_and_values(model: nn.Module):
    """Record the output of every submodule named W_k or W_v while the block runs: exactly the
    tensors a KV cache would have to keep. Yields the list the outputs are appended to."""
    outputs: list[torch.Tensor] = []
    hooks = [module.register_forward_hook(lambda _m, _inp, out: outputs.append(out.detach()))
             for name, module in model.named_modules() if name.split(".")[-1] in ("W_k", "W_v")]
    try:
        yield outputs
    finally:
        for hook in hooks:
            hook.remove()


# ---------------------------------------------------------------- published configurations

# name -> (layers, query heads, kv heads, head dim, source). Every number is from the model's paper or the
# config.json published with its weights on the Hugging Face hub.
PUBLISHED_CONFIGS = {
    "LLaMA-2-7B (MHA)": (32, 32, 32, 128, "Touvron et al. 2023, Llama 2; meta-llama/Llama-2-7b-hf config.json"),
    "Llama-2-70B (GQA)": (80, 64, 8, 128,
                          "Touvron et al. 2023, Llama 2, sec. 2.2; meta-llama/Llama-2-70b-hf config.json"),
    "Llama-3-8B (GQA)": (32, 32, 8, 128, "Meta 2024, Llama 3 model card; meta-llama/Meta-Llama-3-8B config.json"),
    "Mistral-7B (GQA)": (32, 32, 8, 128, "Jiang et al. 2023, Mistral 7B, table 1"),
    "Falcon-7B (MQA)": (32, 71, 1, 64, "tiiuae/falcon-7b config.json (multi_query=True)"),
}


def plot_cache_sizes(curves: dict[str, list[float]], seq_lens: list[int], ax=None, marker_at: int | None = None):
    """One line per model: KV-cache size in GiB against the number of cached tokens (log-log)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    for name, sizes in curves.items():
        ax.plot(seq_lens, sizes, lw=1.8, marker="o", ms=3, label=name)
    if marker_at is not None:
        ax.axvline(marker_at, color="0.5", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel(tr("tokens in the cache (one sequence)"))
    ax.set_ylabel(tr("KV cache, fp16 (GiB)"))
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return ax


# ---------------------------------------------------------------- Hugging Face weight loaders

def _load_by_name(module: nn.Module, state: dict[str, torch.Tensor]) -> nn.Module:
    """Copy `state` into `module` by parameter name; every parameter must be covered with the right shape."""
    params = dict(module.named_parameters())
    missing = sorted(set(params) - set(state))
    if missing:
        raise ValueError(tr("no weights for {missing}", missing=missing))
    wrong = {k: (tuple(params[k].shape), tuple(v.shape)) for k, v in state.items()
             if k in params and params[k].shape != v.shape}
    if wrong:
        raise ValueError(tr("shapes differ (ours, theirs): {wrong}", wrong=wrong))
    with torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value)
    return module


LLAMA_NAMES = {  # Hugging Face LlamaDecoderLayer -> the course's LlamaBlock
    "self_attn.q_proj.weight": "attn.W_q.weight", "self_attn.k_proj.weight": "attn.W_k.weight",
    "self_attn.v_proj.weight": "attn.W_v.weight", "self_attn.o_proj.weight": "attn.W_o.weight",
    "mlp.gate_proj.weight": "ffn.w_gate.weight", "mlp.up_proj.weight": "ffn.w_up.weight",
    "mlp.down_proj.weight": "ffn.w_down.weight",
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
}


def load_hf_llama_layer(block: nn.Module, hf_layer, prefix: str = "") -> nn.Module:
    """Copy the weights of a Hugging Face `LlamaDecoderLayer` (the module, or a state dict whose keys
    start with `prefix`, e.g. "model.layers.0.") into a course LlamaBlock, by name."""
    state = hf_layer.state_dict() if isinstance(hf_layer, nn.Module) else hf_layer
    return _load_by_name(block, {ours: state[prefix + theirs] for theirs, ours in LLAMA_NAMES.items()})


def load_hf_mixtral_moe(moe: nn.Module, hf_block, prefix: str = "") -> nn.Module:
    """Copy the weights of a Hugging Face Mixtral sparse-MoE block (`MixtralSparseMoeBlock`, or a state dict
    with keys under `prefix`) into a course MoEFeedForward. Mixtral keeps its experts as 3-D tensors:
    experts.gate_up_proj (E, 2I, D), the gate rows then the up rows, and experts.down_proj (E, D, I)."""
    state = hf_block.state_dict() if isinstance(hf_block, nn.Module) else hf_block
    gate_up, down = state[prefix + "experts.gate_up_proj"], state[prefix + "experts.down_proj"]
    hidden = gate_up.shape[1] // 2
    ours = {"router.weight": state[prefix + "gate.weight"]}
    for e in range(gate_up.shape[0]):
        ours[f"experts.{e}.w_gate.weight"] = gate_up[e, :hidden]
        ours[f"experts.{e}.w_up.weight"] = gate_up[e, hidden:]
        ours[f"experts.{e}.w_down.weight"] = down[e]
    return _load_by_name(moe, ours)


# ---------------------------------------------------------------- the mixture-of-topics task


class TopicsTask:
    """Regression on tokens that come from `num_topics` topics, each with its own rule.

    A token is a vector x (D,) = its topic's centre + noise; the target is topic c's own random
    two-layer map f_c(x) = A_c tanh(W_c x). A dense feed-forward block must fit all the rules with one
    set of weights; a mixture of experts can give each topic its own expert.
    """

    def __init__(self, d_model: int = 16, num_topics: int = 8, hidden: int = 32, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.d_model, self.num_topics, self.generator = d_model, num_topics, g
        self.centres = 2.0 * torch.randn(num_topics, d_model, generator=g)  # (C, D)
        self.W = torch.randn(num_topics, hidden, d_model, generator=g) / math.sqrt(d_model)  # (C, h, D)
        self.A = torch.randn(num_topics, d_model, hidden, generator=g) / math.sqrt(hidden)  # (C, D, h)

    def batch(self, num_tokens: int):
        """x (1, N, D), targets (1, N, D) and topics (N,) for N fresh tokens."""
        topics = torch.randint(0, self.num_topics, (num_tokens,), generator=self.generator)
        x = self.centres[topics] + torch.randn(num_tokens, self.d_model, generator=self.generator)
        hidden = torch.tanh(torch.einsum("nhd,nd->nh", self.W[topics], x))
        y = torch.einsum("ndh,nh->nd", self.A[topics], hidden)
        return x[None], y[None], topics


def expert_usage(router_logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """(E,) the share of token-to-expert assignments each expert receives (sums to 1)."""
    chosen = router_logits.topk(top_k, dim=-1).indices  # (N, k)
    counts = torch.bincount(chosen.flatten(), minlength=router_logits.shape[-1]).float()
    return counts / counts.sum()


def topic_routing(router_logits: torch.Tensor, topics: torch.Tensor, num_topics: int) -> torch.Tensor:
    """(num_topics, E): for each topic, the share of its tokens whose first choice is each expert."""
    first = router_logits.argmax(-1)
    table = torch.zeros(num_topics, router_logits.shape[-1])
    table.index_put_((topics, first), torch.ones(len(topics)), accumulate=True)
    return table / table.sum(1, keepdim=True).clamp_min(1)


# ---------------------------------------------------------------- plots


def plot_heatmap(values: torch.Tensor, title: str, xlabel: str, ylabel: str, ax=None, cmap="RdBu_r",
                 centred: bool = True):
    values = values.detach().cpu()
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, 3.8))
    limit = values.abs().max().item() if centred else None
    image = ax.imshow(values, cmap=cmap, vmin=-limit if centred else None, vmax=limit, interpolation="nearest")
    plt.colorbar(image, ax=ax, fraction=0.046)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return ax


def plot_training_runs(runs: dict[str, dict], smooth: int = 20):
    """Loss (smoothed) per step and held-out exact match, one line per model, side by side."""
    smooth = max(1, min([smooth, *(len(run["losses"]) for run in runs.values())]))  # a grading run's 5 steps
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for name, run in runs.items():
        losses = torch.tensor(run["losses"])
        kernel = torch.ones(smooth) / smooth
        smoothed = F.conv1d(losses[None, None], kernel[None, None]).flatten()
        axes[0].plot(range(smooth, len(losses) + 1), smoothed, lw=1.6, label=name)
        axes[1].plot(run["eval_steps"], run["exact_match"], marker="o", ms=3, lw=1.6, label=name)
    axes[0].set_yscale("log")
    axes[0].set_xlabel(tr("step"))
    axes[0].set_ylabel(tr("training loss (mean of {smooth} steps)", smooth=smooth))
    axes[1].set_xlabel(tr("step"))
    axes[1].set_ylabel(tr("held-out exact match (%)"))
    axes[1].set_ylim(-2, 102)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9)
    fig.tight_layout()
    return fig


def plot_moe_runs(losses: dict[str, list[float]], usage: dict[str, torch.Tensor], smooth: int = 20):
    """Left: test loss per step of each model. Right: share of the assignments each expert received."""
    smooth = max(1, min([smooth, *map(len, losses.values())]))  # a grading run's 5 steps
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for name, curve in losses.items():
        curve = torch.tensor(curve)
        kernel = torch.ones(smooth) / smooth
        axes[0].plot(range(smooth, len(curve) + 1), F.conv1d(curve[None, None], kernel[None, None]).flatten(),
                     lw=1.6, label=name)
    axes[0].set_yscale("log")
    axes[0].set_xlabel(tr("step"))
    axes[0].set_ylabel(tr("training loss (MSE, mean of {smooth} steps)", smooth=smooth))
    axes[0].legend(fontsize=9)
    axes[0].grid(alpha=0.3)
    width = 0.8 / len(usage)
    for i, (name, shares) in enumerate(usage.items()):
        E = len(shares)
        axes[1].bar(torch.arange(E) + (i - (len(usage) - 1) / 2) * width, shares.cpu(), width=width, label=name)
    axes[1].axhline(1 / E, color="0.4", ls=":", lw=1, label=tr("even share 1/E"))
    axes[1].set_xticks(range(E))
    axes[1].set_xlabel(tr("expert"))
    axes[1].set_ylabel(tr("share of token assignments"))
    axes[1].legend(fontsize=9)
    fig.tight_layout()
    return fig

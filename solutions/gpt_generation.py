"""Chapter 08: GPT, decoding (temperature, top-k, top-p, sampling, beam search), the KV cache and
a byte-level BPE tokenizer (reference implementation)."""
from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F

from solutions.add_and_norm import LayerNorm
from solutions.multi_head_attention import merge_heads, split_heads
from solutions.self_attention import scaled_dot_product_attention


class GPT(nn.Module):
    """A decoder-only Transformer with the GPT-2 layout, and an optional key/value cache.

    Args:
        vocab_size: V; block_size: the most positions the model can see (its context);
        n_layer: how many blocks; n_head: H, must divide d_model; d_model: D;
        dropout: on the embeddings, on the attention weights and on each sublayer's output, in
            training mode; in eval mode the logits are dropout-free. Apply every dropout through `drop`
            (the hidden tests swap it for a fixed mask).
    Attributes (weights are loaded by these names):
        token_embedding: nn.Embedding(V, D), which is also the output layer (tied weights);
        position_embedding: nn.Embedding(block_size, D), one learned vector per position;
        blocks: nn.ModuleList of n_layer nn.ModuleDict, each holding
            ln_1: LayerNorm(D); qkv: nn.Linear(D, 3D), queries, keys and values side by side in
            that order; attn_out: nn.Linear(D, D); ln_2: LayerNorm(D);
            mlp_in: nn.Linear(D, 4D); mlp_out: nn.Linear(4D, D);
        ln_f: LayerNorm(D), the final norm; drop: nn.Dropout(dropout).
        Initialise as Hugging Face's GPT-2 does, less its residual scaling: Linear and Embedding
        weights from N(0, 0.02^2), biases 0.
    forward(idx (B, T), cache=None, use_cache=False):
        The first block reads each token's embedding plus the embedding of its position, (B, T, D).
        Each block is Pre-LN: each of its two sublayers reads a normalised copy of x (ln_1 before
        attention, ln_2 before the MLP), and what the sublayer returns (through attn_out or mlp_out)
        is added back to x. The MLP widens to 4D with mlp_in, applies GELU in its tanh form and
        narrows back to D with mlp_out. The logits (B, T, V) are the final norm ln_f of the last
        block's output times the token embedding matrix (transposed): the output layer is tied.
        Attention has H heads of Dh = D / H: softmax(q k^T / sqrt(Dh)) with a causal mask,
        dropout on the weights, then the weights times v.
        The cache is a list with one (keys, values) pair per block, each (B, H, S, Dh): the keys
        and values of the S positions already seen (after qkv, split into heads). Given a cache,
        idx holds the NEXT T tokens: their positions are S, ..., S + T - 1 and token t attends to
        the S cached positions and to idx's tokens up to itself. cache=None means S = 0.
        Returns logits (B, T, V) when use_cache is False, and (logits, new_cache) when it is
        True; new_cache holds S + T positions. The cache passed in is left unchanged.
    Raises:
        ValueError if d_model % n_head != 0, idx is not (B, T), or S + T > block_size.
    Build attention from split_heads, merge_heads and scaled_dot_product_attention (or your own
    code); do not call F.scaled_dot_product_attention, nn.MultiheadAttention,
    F.multi_head_attention_forward, nn.TransformerDecoderLayer or nn.TransformerEncoderLayer.
    """

    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int, d_model: int,
                 dropout: float = 0.0):
        super().__init__()
        ### BEGIN SOLUTION
        if d_model % n_head != 0:
            raise ValueError(f"d_model={d_model} must be divisible by n_head={n_head}")
        self.block_size, self.n_head, self.d_model = block_size, n_head, d_model
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "ln_1": LayerNorm(d_model), "qkv": nn.Linear(d_model, 3 * d_model),
            "attn_out": nn.Linear(d_model, d_model), "ln_2": LayerNorm(d_model),
            "mlp_in": nn.Linear(d_model, 4 * d_model), "mlp_out": nn.Linear(4 * d_model, d_model),
        }) for _ in range(n_layer))
        self.ln_f = LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        for name, p in self.named_parameters():
            if p.dim() == 2:  # small weights: the embedding is also the output layer
                nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        ### END SOLUTION

    def forward(self, idx: torch.Tensor, cache: list | None = None, use_cache: bool = False):
        ### BEGIN SOLUTION
        if idx.dim() != 2:
            raise ValueError(f"idx should have shape (B, T), got {tuple(idx.shape)}")
        B, T = idx.shape
        past = 0 if cache is None else cache[0][0].shape[2]  # S, the positions already cached
        if past + T > self.block_size:
            raise ValueError(f"{past} cached + {T} new positions exceed block_size={self.block_size}")
        positions = torch.arange(past, past + T, device=idx.device)  # the new tokens come after the cache
        x = self.drop(self.token_embedding(idx) + self.position_embedding(positions))  # (B, T, D)
        # Query t sits at position past + t: it sees every key up to and including that position.
        mask = torch.ones(T, past + T, dtype=torch.bool, device=idx.device).tril(diagonal=past)  # (T, S+T)
        new_cache = []
        for i, block in enumerate(self.blocks):
            q, k, v = block.qkv(block.ln_1(x)).split(self.d_model, dim=-1)  # 3 x (B, T, D)
            q, k, v = (split_heads(t, self.n_head) for t in (q, k, v))  # (B, H, T, Dh)
            if cache is not None:
                k = torch.cat([cache[i][0], k], dim=2)  # (B, H, S+T, Dh)
                v = torch.cat([cache[i][1], v], dim=2)
            new_cache.append((k, v))
            context, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, Dh), (B, H, T, S+T)
            if self.training and self.drop.p > 0:
                context = self.drop(weights) @ v  # dropout on the attention weights, as GPT-2 does
            x = x + self.drop(block.attn_out(merge_heads(context)))  # (B, T, D)
            hidden = F.gelu(block.mlp_in(block.ln_2(x)), approximate="tanh")  # (B, T, 4D)
            x = x + self.drop(block.mlp_out(hidden))
        logits = self.ln_f(x) @ self.token_embedding.weight.T  # (B, T, V), tied output layer
        return (logits, new_cache) if use_cache else logits
        ### END SOLUTION


def next_token_targets(idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Split token sequences into model inputs and the targets they must predict.

    Args:
        idx: (B, T) token ids, T >= 2.
    Returns:
        (inputs, targets), both (B, T - 1): inputs are each row without its last token,
        targets each row without its first, so targets[:, t] is the token that follows inputs[:, t].
        Both keep idx's dtype (int32 stays int32); idx is not modified.
    Raises:
        ValueError if idx is not 2-dimensional or T < 2.
    """
    ### BEGIN SOLUTION
    if idx.dim() != 2 or idx.shape[1] < 2:
        raise ValueError(f"idx should have shape (B, T) with T >= 2, got {tuple(idx.shape)}")
    return idx[:, :-1], idx[:, 1:]  # (B, T-1), (B, T-1)
    ### END SOLUTION


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Rescale logits: a temperature below 1 sharpens the distribution, above 1 flattens it.

    Args:
        logits: (..., V), may hold -inf (tokens already ruled out).
        temperature: a positive number.
    Returns:
        logits / temperature, a new tensor of the same shape and dtype (float64 stays float64);
        logits is not modified.
    Raises:
        ValueError if temperature <= 0.
    """
    ### BEGIN SOLUTION
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    return logits / temperature
    ### END SOLUTION


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep only the k most likely tokens of every row.

    Args:
        logits: (..., V); every row (every index of the leading axes) is filtered on its own.
        k: how many tokens to keep, k >= 1; k >= V keeps every token.
    Returns:
        a new tensor of the same shape and dtype (float64 stays float64): every logit strictly
        below the row's k-th largest becomes -inf; ties with the k-th largest are all kept (so a
        row may keep more than k tokens). logits is not modified.
    Raises:
        ValueError if k < 1.
    """
    ### BEGIN SOLUTION
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1) the k-th largest of each row
    return logits.masked_fill(logits < kth, float("-inf"))
    ### END SOLUTION


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filtering: keep the most likely tokens until their probability mass reaches p.

    Args:
        logits: (..., V); every row is filtered on its own; probabilities are softmax(logits).
        p: in (0, 1].
    Returns:
        a new tensor of the same shape and dtype (float64 stays float64). Sort a row's tokens by
        probability, largest first: token i is kept when the mass of the tokens before it is < p,
        so the token that crosses p is kept and the top token always is; every other logit
        becomes -inf. logits is not modified.
    Raises:
        ValueError if p is not in (0, 1].
    """
    ### BEGIN SOLUTION
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (..., V) mass of the tokens ranked above
    keep = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before < p)  # back to vocab order
    return logits.masked_fill(~keep, float("-inf"))
    ### END SOLUTION


def sample_next_token(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Draw one next token per row.

    Args:
        logits: (B, V) the scores of the next token.
        temperature: >= 0; 0 means greedy: the argmax of each row (top_k, top_p and the
            generator are then not used).
        top_k, top_p: optional filters (None: not used).
        generator: the source of randomness (None: torch's global one).
    Returns:
        (B,) int64: row b drawn from softmax of its logits after, in this order,
        apply_temperature, top_k_filter, then top_p_filter (on the already filtered logits).
    Raises:
        ValueError if logits is not 2-dimensional or temperature < 0.
    Use your apply_temperature, top_k_filter and top_p_filter; draw every random number from
    `generator`.
    """
    ### BEGIN SOLUTION
    if logits.dim() != 2:
        raise ValueError(f"logits should have shape (B, V), got {tuple(logits.shape)}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return logits.argmax(dim=-1)  # (B,)
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:  # measured on what top-k left
        logits = top_p_filter(logits, top_p)
    probs = torch.softmax(logits, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]  # (B,)
    ### END SOLUTION


def generate(model: nn.Module, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, generator: torch.Generator | None = None,
             use_cache: bool = False) -> torch.Tensor:
    """Continue every row of idx by max_new_tokens tokens, one at a time.

    Args:
        model: has model.block_size and follows GPT's forward: model(context) -> logits (B, t, V);
            model(context, use_cache=True) -> (logits, cache);
            model(new_tokens, cache=cache, use_cache=True) -> (logits, longer cache).
        idx: (B, T0) int64 prompt; max_new_tokens: >= 0;
        temperature, top_k, top_p, generator: passed to sample_next_token for every new token.
        use_cache: reuse the keys and values of earlier positions.
    Returns:
        (B, T0 + max_new_tokens) int64: idx followed by the new tokens. At every step the model
        sees at most the last block_size tokens and the logits of its LAST position choose the
        next token. With use_cache, the first step runs the (cropped) prompt with
        use_cache=True; each later step feeds only the newest token with the cache, while the
        cache plus that token fit in block_size; when they would not, start a new cache from
        the last block_size tokens (learned positions cannot slide). So with the same generator,
        use_cache=True gives exactly the tokens of use_cache=False.
    Raises:
        ValueError if idx is not 2-dimensional or max_new_tokens < 0.
    Runs without gradients (torch.no_grad); leaves idx and the model's mode unchanged (a model in eval
    mode stays in eval mode, one in training mode stays in training mode: do not call model.eval() or
    model.train()). Use your sample_next_token.
    """
    ### BEGIN SOLUTION
    if idx.dim() != 2:
        raise ValueError(f"idx should have shape (B, T0), got {tuple(idx.shape)}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    block_size = model.block_size
    cache, cached = None, 0  # the cache and how many positions it holds
    with torch.no_grad():
        for _ in range(max_new_tokens):
            if use_cache and cache is not None and cached < block_size:
                logits, cache = model(idx[:, -1:], cache=cache, use_cache=True)  # only the newest token
                cached += 1
            elif use_cache:
                context = idx[:, -block_size:]  # a fresh cache from the last block_size tokens
                logits, cache = model(context, use_cache=True)
                cached = context.shape[1]
            else:
                logits = model(idx[:, -block_size:])  # (B, t, V), recomputing every position
            next_id = sample_next_token(logits[:, -1], temperature, top_k, top_p, generator)  # (B,)
            idx = torch.cat([idx, next_id[:, None]], dim=1)
    return idx
    ### END SOLUTION


def beam_search(model: nn.Module, idx: torch.Tensor, max_new_tokens: int, beam_width: int,
                eos_id: int | None = None) -> torch.Tensor:
    """Look for the continuation of idx with the highest total log-probability, keeping the
    beam_width best partial continuations at each step.

    Args:
        model: has model.block_size; model(context (W, t)) -> logits (W, t, V).
        idx: (1, T0) the prompt; max_new_tokens: >= 0; beam_width: W >= 1.
        eos_id: a token that ends a sequence (None: sequences end only after max_new_tokens).
    Returns:
        (1, T0 + L) int64 with L <= max_new_tokens: the prompt and the best continuation.
        A sequence's score is the SUM of log softmax(logits)[token] of its new tokens (no
        averaging over its length). At each step every live sequence is extended by every token
        (the model sees the last block_size tokens); a candidate that ends with eos_id is
        finished and set aside; the W best other candidates are the next live sequences. After
        max_new_tokens steps (or when nothing is live) return the best of the finished and the
        live sequences. Width 1 without eos_id is greedy decoding.
    Raises:
        ValueError if idx is not (1, T0), beam_width < 1 or max_new_tokens < 0.
    Runs without gradients (torch.no_grad).
    """
    ### BEGIN SOLUTION
    if idx.dim() != 2 or idx.shape[0] != 1:
        raise ValueError(f"idx should have shape (1, T0), got {tuple(idx.shape)}")
    if beam_width < 1 or max_new_tokens < 0:
        raise ValueError(f"need beam_width >= 1 and max_new_tokens >= 0, got {beam_width} and {max_new_tokens}")
    live, finished = [(0.0, idx)], []  # (total log-probability, (1, t) ids)
    with torch.no_grad():
        for _ in range(max_new_tokens):
            if not live:
                break
            seqs = torch.cat([seq for _, seq in live])  # (W, t): live sequences share one length
            log_probs = torch.log_softmax(model(seqs[:, -model.block_size:])[:, -1].double(), dim=-1)  # (W, V)
            scores = torch.tensor([score for score, _ in live], dtype=torch.float64, device=log_probs.device)
            totals = scores[:, None] + log_probs  # (W, V)
            V = totals.shape[1]
            if eos_id is not None:
                for (_, seq), score in zip(live, totals[:, eos_id].tolist()):
                    finished.append((score, torch.cat([seq, seq.new_tensor([[eos_id]])], dim=1)))
                totals[:, eos_id] = float("-inf")
            k = min(beam_width, int(torch.isfinite(totals).sum()))
            best = totals.flatten().topk(k)  # the W best candidates over every (beam, token) pair
            live = [(score, torch.cat([live[j // V][1], idx.new_tensor([[j % V]])], dim=1))
                    for score, j in zip(best.values.tolist(), best.indices.tolist())]
    return max(finished + live, key=lambda beam: beam[0])[1]
    ### END SOLUTION


def train_bpe(text: str, num_merges: int) -> list[tuple[int, int]]:
    """Learn byte-level BPE merges from text (the algorithm of minbpe's BasicTokenizer).

    Args:
        text: any str; it is tokenized as its UTF-8 bytes, ids 0-255, with no pre-splitting.
        num_merges: how many merges to learn, >= 0.
    Returns:
        merges: a list of (int, int) tuples; merges[i] is the pair that new id 256 + i stands for.
        Merge i counts every adjacent pair of the current sequence at every position ("aaa"
        holds the pair (97, 97) twice), takes the most frequent one (a tie goes to the pair
        whose first occurrence comes first in the current sequence), and replaces its
        non-overlapping occurrences, left to right, with 256 + i ("aaa" becomes [256, 97]).
        Stops early when the sequence has no pair left.
    Raises:
        ValueError if num_merges < 0.
    """
    ### BEGIN SOLUTION
    if num_merges < 0:
        raise ValueError(f"num_merges must be >= 0, got {num_merges}")
    ids = list(text.encode("utf-8"))
    merges = []
    for i in range(num_merges):
        counts = Counter(zip(ids, ids[1:]))  # every adjacent position, overlapping ones included
        if not counts:
            break
        pair = max(counts, key=counts.get)  # a Counter keeps first-seen order: the first pair wins a tie
        merged, j = [], 0
        while j < len(ids):
            if j + 1 < len(ids) and ids[j] == pair[0] and ids[j + 1] == pair[1]:
                merged.append(256 + i)
                j += 2  # both elements are used up: occurrences never overlap
            else:
                merged.append(ids[j])
                j += 1
        ids = merged
        merges.append(pair)
    return merges
    ### END SOLUTION


def bpe_encode(text: str, merges: list[tuple[int, int]]) -> list[int]:
    """Token ids of any text under learned merges.

    Args:
        text: any str (not only the text the merges were learned from).
        merges: from train_bpe; merges[i] is the pair that id 256 + i stands for.
    Returns:
        a list of int: start from the UTF-8 bytes of text, then repeatedly take the adjacent
        pair with the LOWEST merge index that occurs and replace its non-overlapping
        occurrences, left to right, with 256 + index; stop when no pair of merges occurs.
    """
    ### BEGIN SOLUTION
    rank = {tuple(pair): i for i, pair in enumerate(merges)}
    ids = list(text.encode("utf-8"))
    while len(ids) >= 2:
        present = [rank[pair] for pair in zip(ids, ids[1:]) if pair in rank]
        if not present:
            break
        i = min(present)  # the earliest merge first, as in training
        pair, merged, j = merges[i], [], 0
        while j < len(ids):
            if j + 1 < len(ids) and ids[j] == pair[0] and ids[j + 1] == pair[1]:
                merged.append(256 + i)
                j += 2
            else:
                merged.append(ids[j])
                j += 1
        ids = merged
    return ids
    ### END SOLUTION


def bpe_decode(ids: list[int], merges: list[tuple[int, int]]) -> str:
    """The text that token ids stand for.

    Args:
        ids: token ids, each in [0, 256 + len(merges)).
        merges: from train_bpe.
    Returns:
        a str: join the bytes of ALL the tokens first, then decode them as UTF-8 with
        errors="replace" (a token may hold part of a character; an incomplete character becomes
        U+FFFD). bpe_decode(bpe_encode(t, merges), merges) == t for every str t.
    Raises:
        ValueError if an id is outside [0, 256 + len(merges)).
    """
    ### BEGIN SOLUTION
    vocab = [bytes([b]) for b in range(256)]
    for a, b in merges:
        vocab.append(vocab[a] + vocab[b])  # id 256 + i: the bytes of both halves
    for i in ids:
        if not 0 <= i < len(vocab):
            raise ValueError(f"unknown token id {i}: ids lie in [0, {len(vocab)})")
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")
    ### END SOLUTION

"""Chapter 06: masks, cross-attention and the full encoder-decoder Transformer (reference implementation)."""

import torch
import torch.nn as nn

from solutions.add_and_norm import Encoder, LayerNorm, PositionwiseFeedForward
from solutions.multi_head_attention import MultiHeadAttention
from solutions.positional_encoding import PositionalEncoding, TokenEmbedding


def causal_mask(T: int, device: torch.device | None = None) -> torch.Tensor:
    """The look-ahead mask of a decoder: position t may attend to positions 0..t only.

    Args:
        T: the sequence length (T >= 1).
        device: where to create the mask (None: the default device).
    Returns:
        (T, T) bool, mask[t, s] is True when s <= t (on and below the diagonal), False above it.
    Raises:
        ValueError if T < 1.
    """
    ### BEGIN SOLUTION
    if T < 1:
        raise ValueError(f"T must be at least 1, got {T}")
    # Row t is a query, column s a key: the lower triangle holds the past and the present.
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)
    ### END SOLUTION


def padding_mask(token_ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Which keys are real tokens: a mask that hides padding from every query.

    Args:
        token_ids: (B, S) integer ids (int64 or int32) of the sequences the queries attend to (the
            keys); not modified.
        pad_id: the id used for padding.
    Returns:
        (B, 1, 1, S) bool, True where token_ids != pad_id. The two size-1 axes broadcast over
        the heads and over the queries, so the mask hides padded KEYS (columns of the scores)
        for every query; it never removes a query row.
    Raises:
        ValueError if token_ids is not 2-dimensional.
    """
    ### BEGIN SOLUTION
    if token_ids.dim() != 2:
        raise ValueError(f"token_ids should have shape (B, S), got {tuple(token_ids.shape)}")
    B, S = token_ids.shape
    return (token_ids != pad_id).view(B, 1, 1, S)  # (B, 1, 1, S): heads and queries broadcast
    ### END SOLUTION


class DecoderLayer(nn.Module):
    """One decoder block (Post-LN, as in the 2017 paper): masked self-attention, cross-attention
    to the encoder output, then the feed-forward network, each followed by residual + LayerNorm.

    Args:
        d_model: D; num_heads: H; d_ff: the feed-forward hidden size.
        dropout: used in both attentions, in the feed-forward block and on each sublayer's output.
    Attributes:
        self_attn, cross_attn: MultiHeadAttention(D, H, dropout);
        ffn: PositionwiseFeedForward(D, d_ff, dropout);
        norm1, norm2, norm3: LayerNorm(D), after self-attention, cross-attention and the FFN;
        dropout1, dropout2, dropout3: nn.Dropout modules, called on the three sublayers' outputs;
        cross_weights: the cross-attention weights (B, H, T, S) of the latest forward call,
            detached (None before the first call), kept so that they can be plotted.
    forward(x (B, T, D), memory (B, S, D), tgt_mask=None, memory_mask=None) -> (B, T, D):
        x = norm1(x + self_attn(x, x, x, tgt_mask))           queries, keys, values: the target
        x = norm2(x + cross_attn(x, memory, memory, memory_mask))  queries: target, keys/values: memory
        x = norm3(x + ffn(x))
        tgt_mask: bool, broadcastable to (B, H, T, T), True = may attend (e.g. a causal mask).
        memory_mask: bool, broadcastable to (B, H, T, S) (e.g. a source padding mask).
    Dropout: in eval mode it does nothing. In training mode the tests swap every nn.Dropout of the
    layer for a fixed mask to see where it acts, so call the modules (not F.dropout).
    Raises:
        ValueError if x and memory differ in batch size or in width.
    Do not call nn.Transformer, nn.TransformerEncoder, nn.TransformerEncoderLayer, nn.TransformerDecoder,
    nn.TransformerDecoderLayer, nn.MultiheadAttention, F.multi_head_attention_forward or
    F.scaled_dot_product_attention.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.cross_weights = None
        ### END SOLUTION

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        ### BEGIN SOLUTION
        if x.dim() != 3 or memory.dim() != 3 or x.shape[0] != memory.shape[0] or x.shape[2] != memory.shape[2]:
            raise ValueError(f"x (B, T, D) and memory (B, S, D) must agree in B and D, "
                             f"got {tuple(x.shape)} and {tuple(memory.shape)}")
        # 1. Masked self-attention: each target position sees itself and the positions before it.
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0]))
        # 2. Cross-attention: the target asks (queries), the source answers (keys and values).
        context, weights = self.cross_attn(x, memory, memory, memory_mask)  # (B, T, D), (B, H, T, S)
        self.cross_weights = weights.detach()
        x = self.norm2(x + self.dropout2(context))
        # 3. Position-wise feed-forward.
        x = self.norm3(x + self.dropout3(self.ffn(x)))
        return x  # (B, T, D)
        ### END SOLUTION


class Transformer(nn.Module):
    """The encoder-decoder Transformer of "Attention Is All You Need" (Post-LN), with one token
    embedding shared by the source, the target and the output layer.

    Args:
        vocab_size: V, one vocabulary for source and target.
        d_model: D (even); num_heads: H; num_layers: N, for the encoder and for the decoder;
        d_ff: the feed-forward hidden size; dropout: the dropout probability everywhere;
        max_len: the longest source or target sequence; pad_id: the padding token id.
    Attributes (build them in this order of steps):
        1. embedding: TokenEmbedding(V, D) (it scales by sqrt(D)); its table embedding.embedding.weight
            (V, D) is ALSO the output layer: logits = h @ embedding.embedding.weight.T (tied weights,
            no separate nn.Linear to the vocabulary).
        2. re-initialise that table N(0, 1/D), small like an output layer:
            nn.init.normal_(self.embedding.embedding.weight, std=d_model ** -0.5). nn.Embedding's
            default N(0, 1) start, times sqrt(D), swamps the positions and stalls training.
        3. positions: PositionalEncoding(D, max_len, dropout), used for source and target.
        4. encoder: Encoder(N, D, H, d_ff, dropout) (Post-LN, so its final norm is nn.Identity).
        5. decoder: nn.ModuleList of N DecoderLayer(D, H, d_ff, dropout).
        6. pad_id: the padding id.
        Every part gets the same dropout; in eval mode the model gives the dropout-free logits.
    Methods:
        encode(src (B, S)) -> memory (B, S, D): positions(embedding(src)) through the encoder, with
            the source padding mask.
        decode(tgt (B, T), memory (B, S, D), src (B, S)) -> logits (B, T, V): positions(embedding(tgt))
            through every DecoderLayer with tgt_mask = causal_mask(T) & padding_mask(tgt) and
            memory_mask = padding_mask(src), then the tied output layer.
        forward(src (B, S), tgt (B, T)) -> logits (B, T, V): decode(tgt, encode(src), src).
    Raises:
        ValueError if src or tgt is not 2-dimensional, they differ in batch size, or num_layers < 1.
    Do not call nn.Transformer, nn.TransformerEncoder, nn.TransformerEncoderLayer, nn.TransformerDecoder,
    nn.TransformerDecoderLayer, nn.MultiheadAttention, F.multi_head_attention_forward or
    F.scaled_dot_product_attention.
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, d_ff: int,
                 dropout: float = 0.0, max_len: int = 256, pad_id: int = 0):
        super().__init__()
        ### BEGIN SOLUTION
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        self.pad_id = pad_id
        self.embedding = TokenEmbedding(vocab_size, d_model)
        # The table is also the output layer: start it small, like any output layer's weights.
        nn.init.normal_(self.embedding.embedding.weight, std=d_model ** -0.5)
        self.positions = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        ### END SOLUTION

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        if src.dim() != 2:
            raise ValueError(f"src should have shape (B, S), got {tuple(src.shape)}")
        src_mask = padding_mask(src, self.pad_id)  # (B, 1, 1, S): no query looks at source padding
        return self.encoder(self.positions(self.embedding(src)), src_mask)  # (B, S, D)
        ### END SOLUTION

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        if tgt.dim() != 2 or src.dim() != 2 or tgt.shape[0] != src.shape[0]:
            raise ValueError(f"tgt (B, T) and src (B, S) must be 2-dimensional with the same B, "
                             f"got {tuple(tgt.shape)} and {tuple(src.shape)}")
        B, T = tgt.shape
        # No peeking at later target tokens, and no attention to target padding.
        tgt_mask = causal_mask(T, tgt.device) & padding_mask(tgt, self.pad_id)  # (B, 1, T, T)
        memory_mask = padding_mask(src, self.pad_id)  # (B, 1, 1, S)
        x = self.positions(self.embedding(tgt))  # (B, T, D)
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask, memory_mask)
        return x @ self.embedding.embedding.weight.T  # (B, T, V), tied with the input embedding
        ### END SOLUTION

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return self.decode(tgt, self.encode(src), src)  # (B, T, V): given, nothing to write here


def greedy_decode(model: nn.Module, src: torch.Tensor, max_len: int, start_id: int, end_id: int) -> torch.Tensor:
    """Generate target sequences one token at a time, always taking the most likely next token.

    Args:
        model: an nn.Module with the two methods of Transformer used here:
            model.encode(src) -> memory, called once, and
            model.decode(tgt (B, t), memory, src) -> logits (B, t, V), called once per new token;
            only the logits of the last position, logits[:, -1], choose the next token.
        src: (B, S) source token ids.
        max_len: the longest output, start token included (max_len >= 1).
        start_id: the token every output begins with.
        end_id: the token that ends a sequence.
    Returns:
        (B, L) int64 ids with L <= max_len, on src's device; column 0 is start_id. A row that has
        produced end_id is finished: every later entry of that row is end_id. Generation stops as
        soon as every row is finished, or when L reaches max_len.
    Raises:
        ValueError if src is not 2-dimensional or max_len < 1.
    Run the model under torch.no_grad: generation tracks no gradients. The caller puts the model in
    eval mode first; calling model.eval() here as well does no harm, but never switch it to training
    mode: the model decodes in eval mode and is left in eval mode.
    """
    ### BEGIN SOLUTION
    if src.dim() != 2:
        raise ValueError(f"src should have shape (B, S), got {tuple(src.shape)}")
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    B = src.shape[0]
    with torch.no_grad():
        memory = model.encode(src)  # the source is encoded once and reused at every step
        out = torch.full((B, 1), start_id, dtype=torch.long, device=src.device)  # (B, 1)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)  # (B,)
        while out.shape[1] < max_len and not done.all():
            logits = model.decode(out, memory, src)  # (B, t, V)
            next_id = logits[:, -1].argmax(dim=-1)  # (B,)
            next_id = next_id.masked_fill(done, end_id)  # finished rows keep emitting end_id
            out = torch.cat([out, next_id[:, None]], dim=1)  # (B, t + 1)
            done = done | (next_id == end_id)
    return out
    ### END SOLUTION


def label_smoothing_distribution(targets: torch.Tensor, num_classes: int, smoothing: float) -> torch.Tensor:
    """The smoothed target distribution: most of the mass on the right class, a little on the others.

    Args:
        targets: (N,) integer class ids in [0, C).
        num_classes: C (at least 2).
        smoothing: epsilon in [0, 1).
    Returns:
        (N, C) float32; row n is 1 - smoothing at column targets[n] and smoothing / (C - 1) in every
        other column, so each row sums to 1.
    Raises:
        ValueError if num_classes < 2, smoothing is outside [0, 1), or a target is outside [0, C).
    """
    ### BEGIN SOLUTION
    if num_classes < 2:
        raise ValueError(f"num_classes must be at least 2, got {num_classes}")
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    if targets.numel() and (targets.min() < 0 or targets.max() >= num_classes):
        raise ValueError(f"targets must lie in [0, {num_classes}), got values from "
                         f"{targets.min().item()} to {targets.max().item()}")
    N = targets.shape[0]
    # Spread epsilon over the C - 1 wrong classes only, then put 1 - epsilon on the right one.
    dist = torch.full((N, num_classes), smoothing / (num_classes - 1), device=targets.device)  # (N, C)
    dist.scatter_(1, targets.long()[:, None], 1.0 - smoothing)
    return dist
    ### END SOLUTION


def label_smoothed_loss(logits: torch.Tensor, targets: torch.Tensor, smoothing: float,
                        ignore_index: int = -100) -> torch.Tensor:
    """KL(smoothed target || model) averaged over the rows whose target is not ignore_index.

    Args:
        logits: (N, C) unnormalised scores.
        targets: (N,) class ids in [0, C), or ignore_index for rows that do not count (padding).
        smoothing: epsilon in [0, 1).
        ignore_index: the target value of rows to leave out.
    Returns:
        a scalar (shape ()) float32: the mean over the kept rows of
        sum_c q[c] * (log q[c] - log p[c]), with q = label_smoothing_distribution(...) of that row,
        p = softmax(logits) of that row, and 0 * log 0 taken as 0.
        With smoothing = 0 this is the ordinary cross-entropy.
    Raises:
        ValueError if logits is not (N, C), targets is not (N,), or smoothing is outside [0, 1).
    Use your label_smoothing_distribution; log_softmax is fine. Do not call F.cross_entropy or F.kl_div.
    """
    ### BEGIN SOLUTION
    if logits.dim() != 2 or targets.dim() != 1 or targets.shape[0] != logits.shape[0]:
        raise ValueError(f"logits should be (N, C) and targets (N,), got {tuple(logits.shape)} and "
                         f"{tuple(targets.shape)}")
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    N, C = logits.shape
    keep = targets != ignore_index  # (N,) padding rows do not count, not even in the mean
    q = label_smoothing_distribution(targets[keep], C, smoothing)  # (n, C)
    log_p = torch.log_softmax(logits[keep], dim=-1)  # (n, C)
    # xlogy(q, q) is q log q with 0 log 0 = 0 (the zeros of a one-hot target when smoothing = 0).
    kl = (torch.xlogy(q, q) - q * log_p).sum(dim=-1)  # (n,)
    return kl.mean()
    ### END SOLUTION


def noam_learning_rate(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """The learning-rate schedule of "Attention Is All You Need": linear warm-up, then 1/sqrt(step) decay.

    Args:
        step: the optimiser step, counted from 1.
        d_model: D; warmup_steps: how many steps the rate rises; factor: a constant multiplier.
    Returns:
        a float, factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5); the two
        branches meet at step == warmup_steps, where the rate peaks.
    Raises:
        ValueError if step < 1 (the formula would give 0 or divide by zero), d_model < 1 or warmup_steps < 1.
    """
    ### BEGIN SOLUTION
    if step < 1:
        raise ValueError(f"step counts from 1, got {step}")
    if d_model < 1 or warmup_steps < 1:
        raise ValueError(f"d_model and warmup_steps must be positive, got {d_model} and {warmup_steps}")
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)
    ### END SOLUTION

"""Chapter 09: what changed since 2017 — RMSNorm, RoPE, SwiGLU, grouped-query attention, the LLaMA
block, the KV cache, sliding windows and mixture of experts (reference implementation)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from solutions.decoder_masking import causal_mask
from solutions.multi_head_attention import merge_heads, split_heads
from solutions.self_attention import scaled_dot_product_attention


class RMSNorm(nn.Module):
    """Root-mean-square normalisation: rescale each vector to RMS 1, then scale per feature.

    Args:
        d_model: D, the size of the last axis.
        eps: added to the mean square INSIDE the square root.
    Attributes:
        weight: nn.Parameter (D,), initialised to ones. No bias.
    forward(x (..., D)) -> (..., D), x's dtype (float64 stays float64, as after module.double(), and
        bfloat16 stays bfloat16, as after module.to(torch.bfloat16); computing in float32 inside is
        fine if you cast back to x's dtype): x / sqrt(mean(x**2 over the last axis) + eps) * weight.
        No mean is subtracted (that is LayerNorm's job, not RMSNorm's).
    Raises:
        ValueError in forward if x's last size is not D.
    Do not call nn.RMSNorm or F.rms_norm; do not modify x in place.
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        ### BEGIN SOLUTION
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(f"x should end in size {self.weight.shape[0]}, got shape {tuple(x.shape)}")
        mean_square = (x * x).mean(dim=-1, keepdim=True)  # (..., 1)
        return x / torch.sqrt(mean_square + self.eps) * self.weight  # (..., D)
        ### END SOLUTION


def rope_frequencies(head_dim: int, max_len: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The cos and sin tables of rotary position embeddings (RoPE), in the "rotate half" layout.

    Dimension i of a head (i < Dh/2) is paired with dimension i + Dh/2; pair i turns by the angle
    p * base**(-2i/Dh) at position p (one frequency per PAIR, the fastest pair i = 0 first).
    Args:
        head_dim: Dh, even.
        max_len: how many positions, 0 .. max_len - 1 (max_len >= 1).
        base: the base of the frequencies (10000 in RoPE and LLaMA 1-2; Llama 3 uses 500000).
    Returns:
        (cos, sin), each (max_len, Dh) float32, with cos[p, i] = cos[p, i + Dh/2] = cos(p * base**(-2i/Dh))
        for i < Dh/2, and sin likewise: the two halves of each row are equal.
    Raises:
        ValueError if head_dim is odd or < 2, or max_len < 1.
    """
    ### BEGIN SOLUTION
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be even (dimensions are rotated in pairs), got {head_dim}")
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    pair = torch.arange(0, head_dim, 2, dtype=torch.float32)  # 2i for i = 0 .. Dh/2 - 1
    inv_freq = base ** (-pair / head_dim)  # (Dh/2,) one frequency per pair
    positions = torch.arange(max_len, dtype=torch.float32)  # (max_len,)
    angles = positions[:, None] * inv_freq[None, :]  # (max_len, Dh/2)
    angles = torch.cat([angles, angles], dim=-1)  # (max_len, Dh): dims i and i + Dh/2 share an angle
    return angles.cos(), angles.sin()
    ### END SOLUTION


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Rotate each (i, i + Dh/2) pair of every query or key vector by its position's angle.

    Args:
        x: (B, H, T, Dh) queries or keys; row t sits at position offset + t.
        cos, sin: (L, Dh) tables from rope_frequencies, L >= offset + T.
        offset: the position of row 0 (the number of tokens already in a KV cache), >= 0.
    Returns:
        (B, H, T, Dh), x's dtype (float64 stays float64): with x1 = x[..., :Dh/2],
        x2 = x[..., Dh/2:] and c, s the rows offset .. offset + T - 1 of cos and sin,
        out = x * c + cat(-x2, x1) * s, i.e. (x1 c - x2 s, x2 c + x1 s).
    Raises:
        ValueError if x is not 4-dimensional, cos or sin is not (L, Dh), offset < 0, or offset + T > L.
    Do not modify x in place.
    """
    ### BEGIN SOLUTION
    if x.dim() != 4:
        raise ValueError(f"x should have shape (B, H, T, Dh), got {tuple(x.shape)}")
    B, H, T, Dh = x.shape
    if cos.dim() != 2 or cos.shape[1] != Dh or sin.shape != cos.shape:
        raise ValueError(f"cos and sin should both be (L, {Dh}), got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if offset < 0 or offset + T > cos.shape[0]:
        raise ValueError(f"positions {offset}..{offset + T - 1} do not fit a table of {cos.shape[0]} positions")
    c, s = cos[offset:offset + T], sin[offset:offset + T]  # (T, Dh), broadcast over B and H
    x1, x2 = x[..., : Dh // 2], x[..., Dh // 2:]
    rotated_half = torch.cat([-x2, x1], dim=-1)  # (B, H, T, Dh): the partner of each dim, signed
    return x * c + rotated_half * s
    ### END SOLUTION


class SwiGLUFeedForward(nn.Module):
    """The gated feed-forward block of LLaMA: w_down(silu(w_gate(x)) * w_up(x)).

    Args:
        d_model: D; d_hidden: the hidden size (LLaMA uses about 8D/3, so that the three
            matrices hold as many weights as a 4D ReLU block's two).
    Attributes:
        w_gate, w_up: nn.Linear(D, d_hidden, bias=False); w_down: nn.Linear(d_hidden, D, bias=False).
    forward(x (..., D)) -> (..., D). SiLU goes on the GATE branch only; w_up's output is not activated.
    F.silu (or x * torch.sigmoid(x)) is fine.
    """

    def __init__(self, d_model: int, d_hidden: int):
        super().__init__()
        ### BEGIN SOLUTION
        self.w_gate = nn.Linear(d_model, d_hidden, bias=False)
        self.w_up = nn.Linear(d_model, d_hidden, bias=False)
        self.w_down = nn.Linear(d_hidden, d_model, bias=False)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        # The gate decides, per hidden unit, how much of the linear "up" value passes.
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))  # (..., D)
        ### END SOLUTION


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Give every query head its key/value head: repeat each kv head n_rep times, side by side.

    Args:
        x: (B, Hkv, T, Dh) keys or values.
        n_rep: how many query heads share one kv head (H / Hkv), >= 1.
    Returns:
        (B, Hkv * n_rep, T, Dh) with out[:, j] == x[:, j // n_rep]: kv head 0 n_rep times, then
        kv head 1, ... (heads 0, 0, 1, 1 for Hkv = 2, n_rep = 2; NOT 0, 1, 0, 1).
    Raises:
        ValueError if x is not 4-dimensional or n_rep < 1.
    Do not modify x, and do not call repeat_interleave (the hidden tests compare with it): expand and
    reshape, or index.
    """
    ### BEGIN SOLUTION
    if x.dim() != 4:
        raise ValueError(f"x should have shape (B, Hkv, T, Dh), got {tuple(x.shape)}")
    if n_rep < 1:
        raise ValueError(f"n_rep must be at least 1, got {n_rep}")
    B, Hkv, T, Dh = x.shape
    # A new axis right after the kv head, expanded (no copy) and folded into the head axis.
    return x[:, :, None].expand(B, Hkv, n_rep, T, Dh).reshape(B, Hkv * n_rep, T, Dh)
    ### END SOLUTION


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with RoPE where groups of query heads share one key/value head.

    Args:
        d_model: D; num_heads: H (divides D, Dh = D / H even); num_kv_heads: Hkv (divides H).
            Hkv == H is ordinary multi-head attention, Hkv == 1 multi-query attention.
        max_len: the longest sequence; rope_base: the base of the RoPE frequencies.
    Attributes:
        W_q: nn.Linear(D, H*Dh, bias=False); W_k, W_v: nn.Linear(D, Hkv*Dh, bias=False);
        W_o: nn.Linear(H*Dh, D, bias=False);
        cos, sin: rope_frequencies(Dh, max_len, rope_base), registered as buffers (persistent=False):
            buffers follow the module to another device (.to('cuda')), and persistent=False keeps
            them out of the state_dict (they follow from max_len and rope_base).
    forward(x (B, T, D)) -> (B, T, D): q, k, v from x; RoPE (positions 0 .. T-1) on q and k, never
        on v; query head j uses kv head j // (H / Hkv); causal softmax(q k^T / sqrt(Dh)) v per head;
        the heads merged and projected by W_o.
    Raises:
        ValueError in __init__ if D % H != 0, H % Hkv != 0 or Dh is odd; in forward if x is not (B, T, D)
        or T > max_len.
    Use rope_frequencies, apply_rope and repeat_kv, and the imported split_heads, merge_heads,
    scaled_dot_product_attention and causal_mask; do not call F.scaled_dot_product_attention,
    F.multi_head_attention_forward or nn.MultiheadAttention.
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, max_len: int,
                 rope_base: float = 10000.0):
        super().__init__()
        ### BEGIN SOLUTION
        if num_heads < 1 or d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} must be divisible by num_kv_heads={num_kv_heads}")
        head_dim = d_model // num_heads
        if head_dim % 2:
            raise ValueError(f"the head size d_model / num_heads = {head_dim} must be even for RoPE")
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.W_q = nn.Linear(d_model, num_heads * head_dim, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * head_dim, d_model, bias=False)
        cos, sin = rope_frequencies(head_dim, max_len, rope_base)
        self.register_buffer("cos", cos, persistent=False)  # (max_len, Dh)
        self.register_buffer("sin", sin, persistent=False)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x should have shape (B, T, {self.d_model}), got {tuple(x.shape)}")
        B, T, D = x.shape
        if T > self.cos.shape[0]:
            raise ValueError(f"sequence length {T} exceeds max_len={self.cos.shape[0]}")
        q = split_heads(self.W_q(x), self.num_heads)  # (B, H, T, Dh)
        k = split_heads(self.W_k(x), self.num_kv_heads)  # (B, Hkv, T, Dh)
        v = split_heads(self.W_v(x), self.num_kv_heads)  # (B, Hkv, T, Dh)
        # Positions enter as rotations of q and k: their dot product then depends on t - s only.
        q, k = apply_rope(q, self.cos, self.sin), apply_rope(k, self.cos, self.sin)
        n_rep = self.num_heads // self.num_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, T, Dh)
        context, _ = scaled_dot_product_attention(q, k, v, causal_mask(T, x.device))  # (B, H, T, Dh)
        return self.W_o(merge_heads(context))  # (B, T, D)
        ### END SOLUTION


class LlamaBlock(nn.Module):
    """One LLaMA decoder block: Pre-norm with RMSNorm, grouped-query attention with RoPE, SwiGLU.

    Args:
        d_model: D; num_heads: H; num_kv_heads: Hkv; d_hidden: the SwiGLU hidden size;
        max_len: the longest sequence; rope_base: RoPE's base; eps: the eps of both RMSNorms.
    Attributes:
        attn_norm: RMSNorm(D, eps); attn: GroupedQueryAttention(D, H, Hkv, max_len, rope_base);
        ffn_norm: RMSNorm(D, eps); ffn: SwiGLUFeedForward(D, d_hidden).
    forward(x (B, T, D)) -> (B, T, D):
        x = x + attn(attn_norm(x))
        x = x + ffn(ffn_norm(x))
        The residual stream x itself is never normalised inside the block.
    Use your RMSNorm, GroupedQueryAttention and SwiGLUFeedForward; do not call nn.RMSNorm, F.rms_norm,
    F.scaled_dot_product_attention, F.multi_head_attention_forward or nn.MultiheadAttention.
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, d_hidden: int, max_len: int,
                 rope_base: float = 10000.0, eps: float = 1e-6):
        super().__init__()
        ### BEGIN SOLUTION
        self.attn_norm = RMSNorm(d_model, eps)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads, max_len, rope_base)
        self.ffn_norm = RMSNorm(d_model, eps)
        self.ffn = SwiGLUFeedForward(d_model, d_hidden)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        x = x + self.attn(self.attn_norm(x))  # (B, T, D)
        return x + self.ffn(self.ffn_norm(x))  # (B, T, D)
        ### END SOLUTION


def kv_cache_bytes(num_layers: int, num_kv_heads: int, head_dim: int, seq_len: int, batch_size: int,
                   bytes_per_value: int) -> int:
    """The memory a KV cache needs: keys AND values, for every layer, kv head, position and sequence.

    Args:
        num_layers, num_kv_heads, head_dim (Dh), seq_len (tokens cached), batch_size (sequences):
            positive integers.
        bytes_per_value: a positive integer: 2 for fp16/bf16, 4 for fp32, 1 for int8.
    Returns:
        a Python int: 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_value.
    Raises:
        ValueError if any argument is < 1.
    """
    ### BEGIN SOLUTION
    args = dict(num_layers=num_layers, num_kv_heads=num_kv_heads, head_dim=head_dim, seq_len=seq_len,
                batch_size=batch_size, bytes_per_value=bytes_per_value)
    bad = {name: value for name, value in args.items() if value < 1}
    if bad:
        raise ValueError(f"every argument must be at least 1, got {bad}")
    # The factor 2: one key tensor and one value tensor per layer.
    return int(2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_value)
    ### END SOLUTION


def sliding_window_mask(T: int, window: int, device: torch.device | None = None) -> torch.Tensor:
    """Mistral's sliding-window causal mask: query t sees keys t - window + 1 .. t.

    Args:
        T: the sequence length (T >= 1); window: how many keys each query sees, itself included (>= 1).
        device: where to create the mask (None: the default device).
    Returns:
        (T, T) bool, mask[t, s] is True when 0 <= t - s < window. window >= T gives the causal mask;
        window == 1 lets each token see only itself.
    Raises:
        ValueError if T < 1 or window < 1.
    """
    ### BEGIN SOLUTION
    if T < 1 or window < 1:
        raise ValueError(f"T and window must be at least 1, got T={T}, window={window}")
    pos = torch.arange(T, device=device)
    distance = pos[:, None] - pos[None, :]  # (T, T): t - s, how far back key s lies
    return (distance >= 0) & (distance < window)
    ### END SOLUTION


class MoEFeedForward(nn.Module):
    """A sparse mixture of SwiGLU experts (Mixtral's layout): each token uses its top_k experts.

    Args:
        d_model: D; d_hidden: each expert's hidden size; num_experts: E; top_k: experts per token.
    Attributes:
        router: nn.Linear(D, E, bias=False); experts: nn.ModuleList of E SwiGLUFeedForward(D, d_hidden).
    forward(x (B, T, D)) -> (output (B, T, D), router_logits (B*T, E)); for each token n (row n of
        x.reshape(B*T, D)) ON ITS OWN:
        p = softmax(router_logits[n]) over the E experts; keep the top_k largest p_e and divide them by
        their sum (the kept weights sum to 1); output[n] = sum over the kept e of weight_e * experts[e](x_n).
        The weights stay differentiable, so the router learns.
    Raises:
        ValueError in __init__ if top_k is outside [1, num_experts].
    Use your SwiGLUFeedForward. Running only the chosen experts on their tokens is what makes it cheap,
    but running every expert on every token gives the same output and is fine here.
    """

    def __init__(self, d_model: int, d_hidden: int, num_experts: int, top_k: int):
        super().__init__()
        ### BEGIN SOLUTION
        if not 1 <= top_k <= num_experts:
            raise ValueError(f"top_k must be in [1, num_experts={num_experts}], got {top_k}")
        self.top_k = top_k
        self.router = nn.Linear(d_model, num_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLUFeedForward(d_model, d_hidden) for _ in range(num_experts))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ### BEGIN SOLUTION
        B, T, D = x.shape
        tokens = x.reshape(B * T, D)  # (N, D): routing is per token, batch and time alike
        router_logits = self.router(tokens)  # (N, E)
        probs = router_logits.softmax(dim=-1)  # (N, E)
        weights, chosen = probs.topk(self.top_k, dim=-1)  # (N, k), (N, k)
        weights = weights / weights.sum(dim=-1, keepdim=True)  # the kept weights sum to 1
        out = torch.zeros_like(tokens)  # (N, D)
        for e, expert in enumerate(self.experts):
            token_idx, slot = torch.where(chosen == e)  # the tokens that picked expert e, and in which slot
            if token_idx.numel():
                out = out.index_add(0, token_idx, weights[token_idx, slot, None] * expert(tokens[token_idx]))
        return out.reshape(B, T, D), router_logits
        ### END SOLUTION


def load_balancing_loss(router_logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """Switch Transformer's auxiliary loss (Hugging Face's Mixtral adds it), which pushes the router to spread tokens.

    Args:
        router_logits: (N, E), one row per token.
        top_k: how many experts each token uses, in [1, E].
    Returns:
        a scalar (shape ()) tensor: E * sum_e f_e * P_e, where
        f_e = (number of tokens whose top_k experts, by router probability, include e) / N, a count
            that carries no gradient; the f_e sum to top_k;
        P_e = the mean over the N tokens of softmax(router_logits)[:, e], which carries the gradient.
        A perfectly even router gives top_k; one that sends everything to one expert gives about E.
    Raises:
        ValueError if router_logits is not 2-dimensional or top_k is outside [1, E].
    """
    ### BEGIN SOLUTION
    if router_logits.dim() != 2:
        raise ValueError(f"router_logits should have shape (N, E), got {tuple(router_logits.shape)}")
    N, E = router_logits.shape
    if not 1 <= top_k <= E:
        raise ValueError(f"top_k must be in [1, {E}], got {top_k}")
    probs = router_logits.softmax(dim=-1)  # (N, E)
    chosen = probs.topk(top_k, dim=-1).indices  # (N, k)
    counts = F.one_hot(chosen, E).sum(dim=(0, 1))  # (E,) integer: no gradient through the choice
    fraction = counts.to(probs.dtype) / N  # (E,) sums to top_k
    mean_prob = probs.mean(dim=0)  # (E,) differentiable
    return E * (fraction * mean_prob).sum()
    ### END SOLUTION

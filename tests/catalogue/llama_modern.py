from tests.catalogue import Variant, do_nothing

# ------------------------------------------------------------------ pieces shared by several variants
_RMS_INIT = '''
class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
'''

_ROPE_CHECK = '''
def rope_frequencies(head_dim, max_len, base=10000.0):
    if head_dim < 2 or head_dim % 2 or max_len < 1:
        raise ValueError("head_dim must be even and max_len positive")
'''

_APPLY_CHECK = '''
def apply_rope(x, cos, sin, offset=0):
    if x.dim() != 4:
        raise ValueError("x should be (B, H, T, Dh)")
    B, H, T, Dh = x.shape
    if cos.shape[-1] != Dh or offset < 0 or offset + T > cos.shape[0]:
        raise ValueError("the table does not fit")
'''

_SWIGLU_INIT = '''
class SwiGLUFeedForward(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_hidden, bias=False)
        self.w_up = nn.Linear(d_model, d_hidden, bias=False)
        self.w_down = nn.Linear(d_hidden, d_model, bias=False)
'''

_GQA_INIT = '''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, max_len, rope_base=10000.0):
        super().__init__()
        if d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError("bad head counts")
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.head_dim = d_model // num_heads
        self.W_q = nn.Linear(d_model, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, d_model, bias=False)
        cos, sin = rope_frequencies(self.head_dim, max_len, rope_base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def _check(self, x):
        if x.dim() != 3 or x.shape[-1] != self.d_model or x.shape[1] > self.cos.shape[0]:
            raise ValueError("x should be (B, T, D) with T <= max_len")
'''


_GQA_FORWARD = '''
    def forward(self, x):
        self._check(x)
        B, T, D = x.shape
        q = split_heads(self.W_q(x), self.num_heads)
        k = split_heads(self.W_k(x), self.num_kv_heads)
        v = split_heads(self.W_v(x), self.num_kv_heads)
        q, k = apply_rope(q, self.cos, self.sin), apply_rope(k, self.cos, self.sin)
        n = self.num_heads // self.num_kv_heads
        k, v = repeat_kv(k, n), repeat_kv(v, n)
        out, _ = scaled_dot_product_attention(q, k, v, causal_mask(T, x.device))
        return self.W_o(merge_heads(out))
'''

_BLOCK_INIT = '''
class LlamaBlock(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, d_hidden, max_len, rope_base=10000.0, eps=1e-6):
        super().__init__()
        self.attn_norm = RMSNorm(d_model, eps)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads, max_len, rope_base)
        self.ffn_norm = RMSNorm(d_model, eps)
        self.ffn = SwiGLUFeedForward(d_model, d_hidden)
'''

_KV_CHECK = '''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value):
    if min(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value) < 1:
        raise ValueError("every argument must be at least 1")
'''

_WINDOW_CHECK = '''
def sliding_window_mask(T, window, device=None):
    if T < 1 or window < 1:
        raise ValueError("T and window must be at least 1")
    t = torch.arange(T, device=device)
    d = t[:, None] - t[None, :]
'''

_MOE_INIT = '''
class MoEFeedForward(nn.Module):
    def __init__(self, d_model, d_hidden, num_experts, top_k):
        super().__init__()
        if not 1 <= top_k <= num_experts:
            raise ValueError("top_k must be in [1, num_experts]")
        self.top_k = top_k
        self.router = nn.Linear(d_model, num_experts, bias=False)
        self.experts = nn.ModuleList([SwiGLUFeedForward(d_model, d_hidden) for _ in range(num_experts)])

    def _mix(self, tokens, weights, chosen):
        out = torch.zeros_like(tokens)
        for slot in range(chosen.shape[1]):
            for e, expert in enumerate(self.experts):
                rows = chosen[:, slot] == e
                if rows.any():
                    out[rows] += weights[rows, slot, None] * expert(tokens[rows])
        return out
'''

_LB_CHECK = '''
def load_balancing_loss(router_logits, top_k):
    if router_logits.dim() != 2 or not 1 <= top_k <= router_logits.shape[1]:
        raise ValueError("router_logits must be (N, E) and top_k in [1, E]")
    N, E = router_logits.shape
'''

WRONG = [
    # ---------------------------------------------------------------- RMSNorm
    Variant("RMSNorm", "sum of squares instead of the mean", _RMS_INIT + '''
    def forward(self, x):
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError("wrong size")
        return x / torch.sqrt((x ** 2).sum(-1, keepdim=True) + self.eps) * self.weight
'''),
    Variant("RMSNorm", "mean square over dim=1 (the time axis of (B, T, D)), not the last axis", _RMS_INIT + '''
    def forward(self, x):
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError("wrong size")
        return x / torch.sqrt((x ** 2).mean(1, keepdim=True) + self.eps) * self.weight
''', at_most=0.34),
    Variant("RMSNorm", "subtracts the mean (that is LayerNorm without a bias)", _RMS_INIT + '''
    def forward(self, x):
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError("wrong size")
        x = x - x.mean(-1, keepdim=True)
        return x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + self.eps) * self.weight
'''),
    Variant("RMSNorm", "eps outside the square root", _RMS_INIT + '''
    def forward(self, x):
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError("wrong size")
        return x / (torch.sqrt((x ** 2).mean(-1, keepdim=True)) + self.eps) * self.weight
'''),
    Variant("RMSNorm", "divides by the norm instead of the root mean square", _RMS_INIT + '''
    def forward(self, x):
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError("wrong size")
        return x / (x.norm(dim=-1, keepdim=True) + self.eps) * self.weight
'''),
    Variant("RMSNorm", "hard-codes eps=1e-6 instead of the argument", _RMS_INIT + '''
    def forward(self, x):
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError("wrong size")
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
'''),
    Variant("RMSNorm", "calls nn.RMSNorm", '''
class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.inner = nn.RMSNorm(d_model, eps=eps)
        self.weight = self.inner.weight

    def forward(self, x):
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError("wrong size")
        return self.inner(x)
'''),
    # ---------------------------------------------------------------- rope_frequencies
    Variant("rope_frequencies", "interleaved layout: each frequency twice in a row (CS336's pairs 2i, 2i+1)",
            _ROPE_CHECK + '''
    inv_freq = base ** (-torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.arange(max_len).float()[:, None] * inv_freq
    angles = angles.repeat_interleave(2, dim=-1)
    return angles.cos(), angles.sin()
'''),
    Variant("rope_frequencies", "exponent i/d per column instead of 2i/d per pair", _ROPE_CHECK + '''
    inv_freq = base ** (-torch.arange(head_dim // 2).float() / head_dim)
    angles = torch.arange(max_len).float()[:, None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()
'''),
    Variant("rope_frequencies", "cos and sin swapped", _ROPE_CHECK + '''
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(max_len).float(), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.sin(), angles.cos()
'''),
    Variant("rope_frequencies", "positions counted from 1", _ROPE_CHECK + '''
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(1, max_len + 1).float(), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()
'''),
    Variant("rope_frequencies", "the base argument ignored (always 10000)", _ROPE_CHECK + '''
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(max_len).float(), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()
'''),
    # ---------------------------------------------------------------- apply_rope
    Variant("apply_rope", "no offset: always the rows of positions 0..T-1", _APPLY_CHECK + '''
    c, s = cos[:T], sin[:T]
    x1, x2 = x[..., : Dh // 2], x[..., Dh // 2:]
    return x * c + torch.cat([-x2, x1], dim=-1) * s
''', at_most=0.6),
    Variant("apply_rope", "rotates interleaved pairs (2i, 2i+1) instead of (i, i + Dh/2)", _APPLY_CHECK + '''
    c, s = cos[offset:offset + T, : Dh // 2], sin[offset:offset + T, : Dh // 2]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.stack([even * c - odd * s, even * s + odd * c], dim=-1)
    return out.flatten(-2)
'''),
    Variant("apply_rope", "rotate-half with the sign on the wrong half (rotates the other way)", _APPLY_CHECK + '''
    c, s = cos[offset:offset + T], sin[offset:offset + T]
    x1, x2 = x[..., : Dh // 2], x[..., Dh // 2:]
    return x * c + torch.cat([x2, -x1], dim=-1) * s
'''),
    Variant("apply_rope", "modifies x in place", _APPLY_CHECK + '''
    c, s = cos[offset:offset + T], sin[offset:offset + T]
    rotated = torch.cat([-x[..., Dh // 2:], x[..., : Dh // 2]], dim=-1)
    x.mul_(c).add_(rotated * s)
    return x
'''),
    Variant("apply_rope", "no checks: a table that is too short is silently broadcast or cut", '''
def apply_rope(x, cos, sin, offset=0):
    T, Dh = x.shape[-2], x.shape[-1]
    c, s = cos[offset:offset + T], sin[offset:offset + T]
    x1, x2 = x[..., : Dh // 2], x[..., Dh // 2:]
    return x * c + torch.cat([-x2, x1], dim=-1) * s
'''),
    # ---------------------------------------------------------------- SwiGLUFeedForward
    Variant("SwiGLUFeedForward", "SiLU on the up branch instead of the gate", _SWIGLU_INIT + '''
    def forward(self, x):
        return self.w_down(self.w_gate(x) * F.silu(self.w_up(x)))
'''),
    Variant("SwiGLUFeedForward", "SiLU after the product", _SWIGLU_INIT + '''
    def forward(self, x):
        return self.w_down(F.silu(self.w_gate(x) * self.w_up(x)))
'''),
    Variant("SwiGLUFeedForward", "GELU instead of SiLU", _SWIGLU_INIT + '''
    def forward(self, x):
        return self.w_down(F.gelu(self.w_gate(x)) * self.w_up(x))
'''),
    Variant("SwiGLUFeedForward", "Linear layers with biases", '''
class SwiGLUFeedForward(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_hidden)
        self.w_up = nn.Linear(d_model, d_hidden)
        self.w_down = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))
'''),
    # ---------------------------------------------------------------- repeat_kv
    Variant("repeat_kv", "`.repeat` tiles the heads (0, 1, 0, 1) instead of keeping each head's copies together",
            '''
def repeat_kv(x, n_rep):
    if x.dim() != 4 or n_rep < 1:
        raise ValueError("x should be (B, Hkv, T, Dh) and n_rep >= 1")
    return x.repeat(1, n_rep, 1, 1)
''', at_most=0.34),
    Variant("repeat_kv", "expands a new axis BEFORE the kv heads (the same tiling as .repeat)", '''
def repeat_kv(x, n_rep):
    if x.dim() != 4 or n_rep < 1:
        raise ValueError("x should be (B, Hkv, T, Dh) and n_rep >= 1")
    B, Hkv, T, Dh = x.shape
    return x[:, None].expand(B, n_rep, Hkv, T, Dh).reshape(B, n_rep * Hkv, T, Dh)
''', at_most=0.34),
    Variant("repeat_kv", "calls repeat_interleave", '''
def repeat_kv(x, n_rep):
    if x.dim() != 4 or n_rep < 1:
        raise ValueError("x should be (B, Hkv, T, Dh) and n_rep >= 1")
    return x.repeat_interleave(n_rep, dim=1)
'''),
    # ---------------------------------------------------------------- GroupedQueryAttention
    Variant("GroupedQueryAttention", "kv heads tiled with .repeat (query head j uses kv head j % Hkv)", _GQA_INIT
            + _GQA_FORWARD.replace("repeat_kv(k, n), repeat_kv(v, n)", "k.repeat(1, n, 1, 1), v.repeat(1, n, 1, 1)")),
    Variant("GroupedQueryAttention", "RoPE applied to v as well", _GQA_INIT + '''
    def forward(self, x):
        self._check(x)
        B, T, D = x.shape
        q = split_heads(self.W_q(x), self.num_heads)
        k = split_heads(self.W_k(x), self.num_kv_heads)
        v = split_heads(self.W_v(x), self.num_kv_heads)
        q, k, v = (apply_rope(t, self.cos, self.sin) for t in (q, k, v))
        n = self.num_heads // self.num_kv_heads
        out, _ = scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n), causal_mask(T))
        return self.W_o(merge_heads(out))
'''),
    Variant("GroupedQueryAttention", "not causal", _GQA_INIT + '''
    def forward(self, x):
        self._check(x)
        q = split_heads(self.W_q(x), self.num_heads)
        k = split_heads(self.W_k(x), self.num_kv_heads)
        v = split_heads(self.W_v(x), self.num_kv_heads)
        q, k = apply_rope(q, self.cos, self.sin), apply_rope(k, self.cos, self.sin)
        n = self.num_heads // self.num_kv_heads
        out, _ = scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n))
        return self.W_o(merge_heads(out))
'''),
    Variant("GroupedQueryAttention", "RoPE on q only", _GQA_INIT + '''
    def forward(self, x):
        self._check(x)
        B, T, D = x.shape
        q = apply_rope(split_heads(self.W_q(x), self.num_heads), self.cos, self.sin)
        k = split_heads(self.W_k(x), self.num_kv_heads)
        v = split_heads(self.W_v(x), self.num_kv_heads)
        n = self.num_heads // self.num_kv_heads
        out, _ = scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n), causal_mask(T))
        return self.W_o(merge_heads(out))
'''),
    Variant("GroupedQueryAttention", "heads split with a plain view (no transpose): tokens mixed", _GQA_INIT + '''
    def forward(self, x):
        self._check(x)
        B, T, D = x.shape
        Dh = self.head_dim
        q = self.W_q(x).view(B, self.num_heads, T, Dh)
        k = self.W_k(x).view(B, self.num_kv_heads, T, Dh)
        v = self.W_v(x).view(B, self.num_kv_heads, T, Dh)
        q, k = apply_rope(q, self.cos, self.sin), apply_rope(k, self.cos, self.sin)
        n = self.num_heads // self.num_kv_heads
        out, _ = scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n), causal_mask(T))
        return self.W_o(out.reshape(B, T, D))
'''),
    Variant("GroupedQueryAttention", "calls F.scaled_dot_product_attention with enable_gqa", _GQA_INIT + '''
    def forward(self, x):
        self._check(x)
        q = split_heads(self.W_q(x), self.num_heads)
        k = split_heads(self.W_k(x), self.num_kv_heads)
        v = split_heads(self.W_v(x), self.num_kv_heads)
        q, k = apply_rope(q, self.cos, self.sin), apply_rope(k, self.cos, self.sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.W_o(merge_heads(out))
'''),
    # ---------------------------------------------------------------- LlamaBlock
    Variant("LlamaBlock", "Post-norm: normalises after each residual sum (the 2017 order)", _BLOCK_INIT + '''
    def forward(self, x):
        x = self.attn_norm(x + self.attn(x))
        return self.ffn_norm(x + self.ffn(x))
'''),
    Variant("LlamaBlock", "no residual around the feed-forward block", _BLOCK_INIT + '''
    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return self.ffn(self.ffn_norm(x))
'''),
    Variant("LlamaBlock", "parallel block: attention and feed-forward both read the same input", _BLOCK_INIT + '''
    def forward(self, x):
        return x + self.attn(self.attn_norm(x)) + self.ffn(self.ffn_norm(x))
'''),
    Variant("LlamaBlock", "the residual stream itself normalised (x = norm(x), then x + sublayer(x))", _BLOCK_INIT + '''
    def forward(self, x):
        x = self.attn_norm(x)
        x = x + self.attn(x)
        x = self.ffn_norm(x)
        return x + self.ffn(x)
'''),
    Variant("LlamaBlock", "eps and rope_base not passed on", '''
class LlamaBlock(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, d_hidden, max_len, rope_base=10000.0, eps=1e-6):
        super().__init__()
        self.attn_norm = RMSNorm(d_model)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads, max_len)
        self.ffn_norm = RMSNorm(d_model)
        self.ffn = SwiGLUFeedForward(d_model, d_hidden)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))
'''),
    Variant("LlamaBlock", "eps passed to ffn_norm only (attn_norm keeps the default)",
            _BLOCK_INIT.replace("self.attn_norm = RMSNorm(d_model, eps)", "self.attn_norm = RMSNorm(d_model)")
            + '''
    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))
'''),
    # ---------------------------------------------------------------- kv_cache_bytes
    Variant("kv_cache_bytes", "forgets the factor 2 (keys only)", _KV_CHECK + '''
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_value
'''),
    Variant("kv_cache_bytes", "returns a float (divides by 1 to 'be safe')", _KV_CHECK + '''
    return 2.0 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_value
'''),
    Variant("kv_cache_bytes", "ignores the batch size", _KV_CHECK + '''
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * bytes_per_value
'''),
    # ---------------------------------------------------------------- sliding_window_mask
    Variant("sliding_window_mask", "off by one: t - s <= window (window + 1 keys)", _WINDOW_CHECK + '''
    return (d >= 0) & (d <= window)
'''),
    Variant("sliding_window_mask", "not causal: |t - s| < window (a local band)", _WINDOW_CHECK + '''
    return d.abs() < window
'''),
    Variant("sliding_window_mask", "the query does not see itself: 0 < t - s <= window", _WINDOW_CHECK + '''
    return (d > 0) & (d <= window)
'''),
    Variant("sliding_window_mask", "a float 0/1 mask", _WINDOW_CHECK + '''
    return ((d >= 0) & (d < window)).float()
'''),
    Variant("sliding_window_mask", "tril(window) & triu(0): the window reaches into the future", '''
def sliding_window_mask(T, window, device=None):
    if T < 1 or window < 1:
        raise ValueError("T and window must be at least 1")
    ones = torch.ones(T, T, dtype=torch.bool, device=device)
    return ones.tril(window - 1) & ones.triu(0)
'''),
    # ---------------------------------------------------------------- MoEFeedForward
    Variant("MoEFeedForward", "no renormalisation: the kept probabilities do not sum to 1", _MOE_INIT + '''
    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(-1, D)
        logits = self.router(tokens)
        weights, chosen = logits.softmax(-1).topk(self.top_k, dim=-1)
        return self._mix(tokens, weights, chosen).reshape(B, T, D), logits
'''),
    Variant("MoEFeedForward", "softmax applied again to the kept probabilities instead of dividing by their sum",
            _MOE_INIT + '''
    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(-1, D)
        logits = self.router(tokens)
        top, chosen = logits.softmax(-1).topk(self.top_k, dim=-1)
        return self._mix(tokens, top.softmax(-1), chosen).reshape(B, T, D), logits
'''),
    Variant("MoEFeedForward", "experts chosen once per batch (top-k of the mean probability), not per token",
            _MOE_INIT + '''
    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(-1, D)
        logits = self.router(tokens)
        probs = logits.softmax(-1)
        chosen = probs.mean(0).topk(self.top_k).indices.expand(tokens.shape[0], -1)
        weights = probs.gather(1, chosen)
        weights = weights / weights.sum(-1, keepdim=True)
        return self._mix(tokens, weights, chosen).reshape(B, T, D), logits
'''),
    Variant("MoEFeedForward", "top-k over the tokens (dim 0) instead of over the experts", _MOE_INIT + '''
    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(-1, D)
        logits = self.router(tokens)
        probs = logits.softmax(-1)
        keep = torch.zeros_like(probs, dtype=torch.bool)
        keep.scatter_(0, probs.topk(min(self.top_k, probs.shape[0]), dim=0).indices, True)
        weights = probs * keep
        weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-9)
        out = sum(weights[:, e, None] * expert(tokens) for e, expert in enumerate(self.experts))
        return out.reshape(B, T, D), logits
'''),
    Variant("MoEFeedForward", "routing weights from the raw logits (no softmax), renormalised", _MOE_INIT + '''
    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(-1, D)
        logits = self.router(tokens)
        top, chosen = logits.topk(self.top_k, dim=-1)
        return self._mix(tokens, top / top.sum(-1, keepdim=True), chosen).reshape(B, T, D), logits
'''),
    Variant("MoEFeedForward", "routing weights detached: the router never learns", _MOE_INIT + '''
    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(-1, D)
        logits = self.router(tokens)
        top, chosen = logits.softmax(-1).detach().topk(self.top_k, dim=-1)
        return self._mix(tokens, top / top.sum(-1, keepdim=True), chosen).reshape(B, T, D), logits
'''),
    Variant("MoEFeedForward", "returns the router probabilities instead of the logits", _MOE_INIT + '''
    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(-1, D)
        probs = self.router(tokens).softmax(-1)
        top, chosen = probs.topk(self.top_k, dim=-1)
        return self._mix(tokens, top / top.sum(-1, keepdim=True), chosen).reshape(B, T, D), probs
'''),
    # ---------------------------------------------------------------- load_balancing_loss
    Variant("load_balancing_loss", "f_e from the probabilities instead of the top-k counts", _LB_CHECK + '''
    probs = router_logits.softmax(-1)
    return E * (probs.mean(0) * probs.mean(0)).sum()
'''),
    Variant("load_balancing_loss", "missing the factor E", _LB_CHECK + '''
    probs = router_logits.softmax(-1)
    counts = F.one_hot(probs.topk(top_k, dim=-1).indices, E).sum((0, 1)).float()
    return (counts / N * probs.mean(0)).sum()
'''),
    Variant("load_balancing_loss", "f_e divided by top_k (fractions of assignments that sum to 1)", _LB_CHECK + '''
    probs = router_logits.softmax(-1)
    counts = F.one_hot(probs.topk(top_k, dim=-1).indices, E).sum((0, 1)).float()
    return E * (counts / (N * top_k) * probs.mean(0)).sum()
'''),
    Variant("load_balancing_loss", "counts only each token's first choice, whatever top_k", _LB_CHECK + '''
    probs = router_logits.softmax(-1)
    counts = F.one_hot(probs.argmax(-1), E).sum(0).float()
    return E * (counts / N * probs.mean(0)).sum()
'''),
    Variant("load_balancing_loss", "P_e from the mean logits instead of the mean probabilities", _LB_CHECK + '''
    chosen = router_logits.topk(top_k, dim=-1).indices
    counts = F.one_hot(chosen, E).sum((0, 1)).float()
    return E * (counts / N * router_logits.mean(0)).sum()
'''),
    Variant("load_balancing_loss", "the probabilities detached: no gradient reaches the router", _LB_CHECK + '''
    probs = router_logits.softmax(-1).detach()
    counts = F.one_hot(probs.topk(top_k, dim=-1).indices, E).sum((0, 1)).float()
    return E * (counts / N * probs.mean(0)).sum()
'''),
    Variant("load_balancing_loss", "raw counts instead of fractions (not divided by N)", _LB_CHECK + '''
    probs = router_logits.softmax(-1)
    counts = F.one_hot(probs.topk(top_k, dim=-1).indices, E).sum((0, 1)).float()
    return E * (counts * probs.mean(0)).sum()
'''),
    # ---------------------------------------------------------------- issue 25: holes that kept full marks
    Variant("RMSNorm", "computed in float32 and never cast back: bfloat16 in, float32 out", _RMS_INIT + '''
    def forward(self, x):
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError("wrong size")
        h = x.float() if x.dtype != torch.float64 else x
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
'''),
    Variant("GroupedQueryAttention", "RoPE tables kept as plain attributes (they stay behind on .to(device))",
            _GQA_INIT.replace('        self.register_buffer("cos", cos, persistent=False)\n'
                              '        self.register_buffer("sin", sin, persistent=False)\n',
                              '        self.cos, self.sin = cos, sin\n') + _GQA_FORWARD),
    Variant("GroupedQueryAttention", "RoPE tables registered as persistent buffers (they land in the state_dict)",
            _GQA_INIT.replace(", persistent=False)", ")") + _GQA_FORWARD),
    Variant("sliding_window_mask", "ignores its device argument", '''
def sliding_window_mask(T, window, device=None):
    if T < 1 or window < 1:
        raise ValueError("T and window must be at least 1")
    t = torch.arange(T)
    d = t[:, None] - t[None, :]
    return (d >= 0) & (d < window)
'''),
    Variant("sliding_window_mask", "makes its mask on the cpu whatever device it is given", '''
def sliding_window_mask(T, window, device=None):
    if T < 1 or window < 1:
        raise ValueError("T and window must be at least 1")
    t = torch.arange(T, device="cpu")
    d = t[:, None] - t[None, :]
    return (d >= 0) & (d < window)
'''),
    Variant("sliding_window_mask", "makes its positions on device but the causal band on the default device", '''
def sliding_window_mask(T, window, device=None):
    if T < 1 or window < 1:
        raise ValueError("T and window must be at least 1")
    band = torch.ones(T, T, dtype=torch.bool).tril()
    t = torch.arange(T, device=device)
    return band & (t[:, None] - t[None, :] < window)
'''),
    Variant("RMSNorm", "calls F.rms_norm", _RMS_INIT + '''
    def forward(self, x):
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError("wrong size")
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
'''),
    Variant("LlamaBlock", "nn.RMSNorm for the two norms",
            _BLOCK_INIT.replace("RMSNorm(d_model, eps)", "nn.RMSNorm(d_model, eps)")
            + '''
    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))
'''),
]

# issue 46: mistakes the public checks answered with their expected and actual values; now they name them
WRONG += [
    Variant("RMSNorm", "divides by the standard deviation (x.std) instead of the root mean square", _RMS_INIT + '''
    def forward(self, x):
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError("wrong size")
        return x / (x.std(-1, keepdim=True) + self.eps) * self.weight
'''),
    Variant("SwiGLUFeedForward", "sigmoid gate instead of SiLU (GLU, not SwiGLU)", _SWIGLU_INIT + '''
    def forward(self, x):
        return self.w_down(torch.sigmoid(self.w_gate(x)) * self.w_up(x))
'''),
    Variant("repeat_kv", "kv heads in reversed order (the index counted down from the last head)", '''
def repeat_kv(x, n_rep):
    if x.dim() != 4 or n_rep < 1:
        raise ValueError("x should be (B, Hkv, T, Dh) and n_rep >= 1")
    H = x.shape[1] * n_rep
    return x[:, torch.arange(H - 1, -1, -1, device=x.device) // n_rep]
'''),
    Variant("LlamaBlock", "one norm for both sublayers (attn_norm before the feed-forward block too)", _BLOCK_INIT + '''
    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.attn_norm(x))
'''),
    Variant("MoEFeedForward", "router softmax over the tokens (dim 0) instead of over the experts", _MOE_INIT + '''
    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(-1, D)
        logits = self.router(tokens)
        top, chosen = logits.softmax(0).topk(self.top_k, dim=-1)
        return self._mix(tokens, top / top.sum(-1, keepdim=True), chosen).reshape(B, T, D), logits
'''),
    Variant("load_balancing_loss", "P_e as the softmax of the mean logits (mean and softmax swapped)", _LB_CHECK + '''
    probs = router_logits.softmax(-1)
    counts = F.one_hot(probs.topk(top_k, dim=-1).indices, E).sum((0, 1)).float()
    return E * (counts / N * router_logits.mean(0).softmax(-1)).sum()
'''),
]

# side rules (ValueError, in place) earned these points before issue 29; now they earn nothing
WRONG += [*do_nothing("RMSNorm", "forward raises ValueError"), *do_nothing("rope_frequencies", "raises ValueError"),
          *do_nothing("apply_rope", "raises ValueError"), *do_nothing("repeat_kv", "raises ValueError"),
          *do_nothing("kv_cache_bytes", "raises ValueError"), *do_nothing("sliding_window_mask", "raises ValueError"),
          *do_nothing("MoEFeedForward", "__init__ raises ValueError"),
          *do_nothing("load_balancing_loss", "raises ValueError")]

CORRECT = [
    Variant("RMSNorm", "HF style: computed in float32 with rsqrt, cast back to x's dtype", _RMS_INIT + '''
    def forward(self, x):
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError("wrong size")
        dtype = x.dtype
        h = x.to(torch.float32) if dtype != torch.float64 else x
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)
'''),
    Variant("rope_frequencies", "in float64 with torch.outer, via 1 / base**(2i/d), cast at the end", _ROPE_CHECK + '''
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    angles = torch.outer(torch.arange(max_len, dtype=torch.float64), 1.0 / base ** exponents)
    angles = angles.repeat(1, 2)
    return angles.cos().float(), angles.sin().float()
'''),
    Variant("apply_rope", "complex numbers: x1 + i x2 times e^(i angle), the rotate-half pairing", _APPLY_CHECK + '''
    half = Dh // 2
    z = torch.complex(x[..., :half], x[..., half:])
    turn = torch.complex(cos[offset:offset + T, :half], sin[offset:offset + T, :half])
    out = z * turn
    return torch.cat([out.real, out.imag], dim=-1)
'''),
    Variant("apply_rope", "a 2x2 rotation per pair written out on the two halves", _APPLY_CHECK + '''
    half = Dh // 2
    c, s = cos[offset:offset + T, :half], sin[offset:offset + T, :half]
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)
'''),
    Variant("SwiGLUFeedForward", "x * sigmoid(x) written out", _SWIGLU_INIT + '''
    def forward(self, x):
        gate = self.w_gate(x)
        return self.w_down(gate * torch.sigmoid(gate) * self.w_up(x))
'''),
    Variant("repeat_kv", "index the kv heads with arange(H) // n_rep", '''
def repeat_kv(x, n_rep):
    if x.dim() != 4 or n_rep < 1:
        raise ValueError("x should be (B, Hkv, T, Dh) and n_rep >= 1")
    index = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x[:, index]
'''),
    Variant("GroupedQueryAttention", "einsum over groups without repeating k and v", _GQA_INIT + '''
    def forward(self, x):
        self._check(x)
        B, T, D = x.shape
        G, n, Dh = self.num_kv_heads, self.num_heads // self.num_kv_heads, self.head_dim
        q = apply_rope(split_heads(self.W_q(x), self.num_heads), self.cos, self.sin)
        k = apply_rope(split_heads(self.W_k(x), G), self.cos, self.sin)
        v = split_heads(self.W_v(x), G)
        q = q.view(B, G, n, T, Dh)  # query heads g*n .. g*n + n - 1 share kv head g
        scores = torch.einsum("bgntd,bgsd->bgnts", q, k) / math.sqrt(Dh)
        scores = scores.masked_fill(~causal_mask(T), float("-inf"))
        out = torch.einsum("bgnts,bgsd->bgntd", scores.softmax(-1), v)
        return self.W_o(out.reshape(B, self.num_heads, T, Dh).transpose(1, 2).reshape(B, T, D))
'''),
    Variant("LlamaBlock", "residual branches kept in named variables", _BLOCK_INIT + '''
    def forward(self, x):
        attended = self.attn(self.attn_norm(x))
        h = x + attended
        transformed = self.ffn(self.ffn_norm(h))
        return h + transformed
'''),
    Variant("kv_cache_bytes", "math.prod over the factors", _KV_CHECK + '''
    return math.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value])
'''),
    Variant("sliding_window_mask", "causal tril minus the part more than window back", '''
def sliding_window_mask(T, window, device=None):
    if T < 1 or window < 1:
        raise ValueError("T and window must be at least 1")
    ones = torch.ones(T, T, dtype=torch.bool, device=device)
    return ones.tril() & ~ones.tril(-window)
'''),
    Variant("MoEFeedForward", "dense: every expert on every token, weights scattered into (N, E)", _MOE_INIT + '''
    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(B * T, D)
        logits = self.router(tokens)
        top, chosen = logits.softmax(-1).topk(self.top_k, dim=-1)
        weights = torch.zeros_like(logits).scatter(1, chosen, top / top.sum(-1, keepdim=True))
        outputs = torch.stack([expert(tokens) for expert in self.experts], dim=1)  # (N, E, D)
        return torch.einsum("ne,ned->nd", weights, outputs).reshape(B, T, D), logits
'''),
    Variant("MoEFeedForward", "Mistral's reference form: top-k of the logits, softmax over the kept ones",
            _MOE_INIT + '''
    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(B * T, D)
        logits = self.router(tokens)
        top_logits, chosen = logits.topk(self.top_k, dim=-1)
        return self._mix(tokens, top_logits.softmax(-1), chosen).reshape(B, T, D), logits
'''),
    Variant("load_balancing_loss", "counts with bincount, probabilities summed then divided", _LB_CHECK + '''
    probs = torch.softmax(router_logits, dim=1)
    chosen = torch.topk(probs, top_k, dim=1).indices.flatten()
    f = torch.bincount(chosen, minlength=E).to(probs.dtype) / N
    P = probs.sum(0) / N
    return (f * P).sum() * E
'''),
]

# issue 29: an input changed in place must never write the expected value (the answer for zeros
# is the expected value of a check that computes it from the input after the call)
WRONG += [
    Variant("apply_rope", "zeroes the input in place and returns the answer for that", '''\
_ref_apply_rope = apply_rope

def apply_rope(x, cos, sin, offset=0):
    x.zero_()
    return _ref_apply_rope(x, cos, sin, offset)
'''),
]

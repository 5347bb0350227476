from tests.catalogue import Variant, do_nothing

# ---------------------------------------------------------------- wrong: each must lose points

_SPLIT_HEAD = '''\
def split_heads(x, num_heads):
    if x.dim() != 3 or num_heads < 1 or x.shape[-1] % num_heads != 0:
        raise ValueError("cannot split into heads")
    B, T, D = x.shape
    Dh = D // num_heads
'''

_MERGE_HEAD = '''\
def merge_heads(x):
    if x.dim() != 4:
        raise ValueError("expected (B, H, T, Dh)")
    B, H, T, Dh = x.shape
'''

_MHA_INIT = '''\
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.d_model, self.num_heads = d_model, num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        for t in (query, key, value):
            if t.dim() != 3 or t.shape[-1] != self.d_model:
                raise ValueError("inputs must be (B, *, d_model)")
        B, T, D = query.shape
        S = key.shape[1]
        H = self.num_heads
        Dh = D // H
'''


def _mha(body: str) -> str:
    return _MHA_INIT + body


# The usual body, written inline so a single line can be changed per mistake.
_QKV = '''\
        q = split_heads(self.W_q(query), H)
        k = split_heads(self.W_k(key), H)
        v = split_heads(self.W_v(value), H)
'''
_SCORES = '''\
        scores = q @ k.transpose(-2, -1) / math.sqrt(Dh)
'''
_MASK = '''\
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
'''
_SOFTMAX = '''\
        w = torch.softmax(scores, dim=-1)
'''
_TAIL = '''\
        w = self.dropout(w)
        return self.W_o(merge_heads(w @ v)), w
'''


def _count(body: str) -> str:
    return ("def mha_parameter_count(d_model, bias=True):\n"
            "    if d_model < 1:\n"
            "        raise ValueError('d_model must be positive')\n" + body)


WRONG = [
    Variant("split_heads", "view straight to (B, H, T, Dh) without transpose (mixes tokens)", _SPLIT_HEAD + '''\
    return x.reshape(B, num_heads, T, Dh)
'''),
    Variant("split_heads", "strided heads: head h gets features h, h+H, h+2H, ...", _SPLIT_HEAD + '''\
    return x.view(B, T, Dh, num_heads).permute(0, 3, 1, 2)
'''),
    Variant("split_heads", "forgets the transpose: returns (B, T, H, Dh)", _SPLIT_HEAD + '''\
    return x.view(B, T, num_heads, Dh)
'''),
    Variant("split_heads", "no ValueError for D % H != 0", '''\
def split_heads(x, num_heads):
    B, T, D = x.shape
    Dh = D // num_heads
    return x.reshape(B, T, num_heads, Dh).transpose(1, 2)
'''),
    Variant("merge_heads", "reshape without transposing back (mixes tokens and heads)", _MERGE_HEAD + '''\
    return x.reshape(B, T, H * Dh)
'''),
    Variant("merge_heads", "view after transpose (fails on non-contiguous memory)", _MERGE_HEAD + '''\
    return x.transpose(1, 2).view(B, T, H * Dh)
'''),
    Variant("merge_heads", "permutes in the wrong order: features interleaved across heads", _MERGE_HEAD + '''\
    return x.permute(0, 2, 3, 1).reshape(B, T, H * Dh)
'''),
    Variant("merge_heads", "no ValueError for a 3-d input", '''\
def merge_heads(x):
    B, H, T, Dh = x.shape if x.dim() == 4 else (x.shape[0], 1, *x.shape[1:])
    return x.reshape(B, H, T, Dh).transpose(1, 2).reshape(B, T, H * Dh)
'''),
    Variant("MultiHeadAttention", "scales by sqrt(D) instead of sqrt(Dh)", _mha(_QKV + '''\
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)
''' + _MASK + _SOFTMAX + _TAIL)),
    Variant("MultiHeadAttention", "forgets W_o", _mha(_QKV + _SCORES + _MASK + _SOFTMAX + '''\
        w = self.dropout(w)
        return merge_heads(w @ v), w
''')),
    Variant("MultiHeadAttention", "softmax over the queries (dim=-2)", _mha(_QKV + _SCORES + _MASK + '''\
        w = torch.softmax(scores, dim=-2)
''' + _TAIL)),
    Variant("MultiHeadAttention", "mask polarity reversed (True = blocked)", _mha(_QKV + _SCORES + '''\
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
''' + _SOFTMAX + _TAIL), at_most=0.4),  # kept 2.74 of 4 before issue 39
    Variant("MultiHeadAttention", "returns the weights averaged over the heads",
            _mha(_QKV + _SCORES + _MASK + _SOFTMAX + '''\
        w = self.dropout(w)
        return self.W_o(merge_heads(w @ v)), w.mean(dim=1)
''')),
    Variant("MultiHeadAttention", "one shared projection (W_q) for queries, keys and values", _mha('''\
        q = split_heads(self.W_q(query), H)
        k = split_heads(self.W_q(key), H)
        v = split_heads(self.W_q(value), H)
''' + _SCORES + _MASK + _SOFTMAX + _TAIL)),
    Variant("MultiHeadAttention", "the key is used as the value", _mha('''\
        q = split_heads(self.W_q(query), H)
        k = split_heads(self.W_k(key), H)
        v = split_heads(self.W_v(key), H)
''' + _SCORES + _MASK + _SOFTMAX + _TAIL), at_most=0.34),  # kept 2.74 of 4 before issue 39
    Variant("MultiHeadAttention", "splits q, k, v with view to (B, H, T, Dh), no transpose", _mha('''\
        q = self.W_q(query).view(B, H, T, Dh)
        k = self.W_k(key).view(B, H, S, Dh)
        v = self.W_v(value).view(B, H, S, Dh)
''' + _SCORES + _MASK + _SOFTMAX + _TAIL)),
    Variant("MultiHeadAttention", "dropout on the output instead of the weights",
            _mha(_QKV + _SCORES + _MASK + _SOFTMAX + '''\
        return self.dropout(self.W_o(merge_heads(w @ v))), w
''')),
    Variant("MultiHeadAttention", "F.dropout without training=self.training (drops in eval too)",
            _mha(_QKV + _SCORES + _MASK + _SOFTMAX + '''\
        w = F.dropout(w, p=self.dropout.p)
        return self.W_o(merge_heads(w @ v)), w
''')),
    Variant("MultiHeadAttention", "returns the weights from before dropout",
            _mha(_QKV + _SCORES + _MASK + _SOFTMAX + '''\
        return self.W_o(merge_heads(self.dropout(w) @ v)), w
''')),
    Variant("MultiHeadAttention", "calls nn.MultiheadAttention (forbidden)", '''\
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        D = query.shape[-1]
        mha = nn.MultiheadAttention(D, self.num_heads, dropout=self.dropout.p, batch_first=True,
                                    bias=self.W_q.bias is not None)
        mha.train(self.training)
        mha.in_proj_weight = nn.Parameter(torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight]))
        if self.W_q.bias is not None:
            mha.in_proj_bias = nn.Parameter(torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias]))
        mha.out_proj = self.W_o
        B, T, S = query.shape[0], query.shape[1], key.shape[1]
        blocked = None if mask is None else ~mask.expand(B, self.num_heads, T, S).reshape(-1, T, S)
        return mha(query, key, value, attn_mask=blocked, average_attn_weights=False)
'''),
    Variant("MultiHeadAttention", "F.scaled_dot_product_attention for the output (forbidden)",
            _mha(_QKV + _SCORES + _MASK + _SOFTMAX + '''\
        w = self.dropout(w)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.W_o(merge_heads(out)), w
''')),
    Variant("mha_parameter_count", "forgets the biases", _count('''\
    return 4 * d_model * d_model
''')),
    Variant("mha_parameter_count", "GPT-2 layout: only the output projection has a bias", _count('''\
    return 4 * d_model * d_model + (d_model if bias else 0)
''')),
    Variant("mha_parameter_count", "counts three projections, forgets W_o", _count('''\
    return 3 * d_model * d_model + (3 * d_model if bias else 0)
''')),
    Variant("mha_parameter_count", "returns a float", _count('''\
    return 4 * d_model ** 2.0 + (4.0 * d_model if bias else 0.0)
''')),
    Variant("mha_parameter_count", "builds a module and counts its parameters (forbidden)", _count('''\
    return sum(p.numel() for p in MultiHeadAttention(d_model, 1, bias=bias).parameters())
''')),
]

# side rules (ValueError, in place) earned these points before issue 29; now they earn nothing
WRONG += [*do_nothing("split_heads", "raises ValueError"), *do_nothing("merge_heads", "raises ValueError"),
          *do_nothing("mha_parameter_count", "raises ValueError")]

# ---------------------------------------------------------------- correct, written differently

CORRECT = [
    Variant("split_heads", "unflatten, then transpose", '''\
def split_heads(x, num_heads):
    if x.ndim != 3:
        raise ValueError("x must be (B, T, D)")
    if num_heads <= 0 or x.size(-1) % num_heads:
        raise ValueError(f"{x.size(-1)} features cannot be split into {num_heads} heads")
    return x.unflatten(-1, (num_heads, x.size(-1) // num_heads)).transpose(1, 2)
'''),
    Variant("split_heads", "stack of chunks", '''\
def split_heads(x, num_heads):
    if x.dim() != 3 or num_heads < 1 or x.shape[2] % num_heads != 0:
        raise ValueError("bad shape or head count")
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)
'''),
    Variant("merge_heads", "cat of the heads", '''\
def merge_heads(x):
    if x.dim() != 4:
        raise ValueError("x must be (B, H, T, Dh)")
    return torch.cat(x.unbind(dim=1), dim=-1)
'''),
    Variant("merge_heads", "permute, contiguous, view", '''\
def merge_heads(x):
    if len(x.shape) != 4:
        raise ValueError("need 4 dimensions")
    B, H, T, Dh = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(B, T, -1)
'''),
    Variant("MultiHeadAttention", "a loop over heads slicing the weights, F.dropout", '''\
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("num_heads must divide d_model")
        self.h, self.p, self.d = num_heads, dropout, d_model
        for name in ("W_q", "W_k", "W_v", "W_o"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))

    def forward(self, query, key, value, mask=None):
        if any(t.ndim != 3 or t.size(-1) != self.d for t in (query, key, value)):
            raise ValueError("inputs must be (B, *, d_model)")
        dh = self.d // self.h
        q, k, v = self.W_q(query), self.W_k(key), self.W_v(value)
        outs, ws = [], []
        for i in range(self.h):
            cols = slice(i * dh, (i + 1) * dh)
            s = torch.einsum("btd,bsd->bts", q[..., cols], k[..., cols]) * dh ** -0.5
            if mask is not None:
                m = mask if mask.dim() < 4 else mask[:, 0 if mask.size(1) == 1 else i]
                s = s.masked_fill(m.logical_not(), -math.inf)
            w = torch.exp(s - s.amax(-1, keepdim=True))
            w = w / w.sum(-1, keepdim=True)
            w = F.dropout(w, self.p, self.training)
            ws.append(w)
            outs.append(w @ v[..., cols])
        return self.W_o(torch.cat(outs, dim=-1)), torch.stack(ws, dim=1)
'''),
    Variant("MultiHeadAttention", "the chapter-02 attention on a head axis, its own reshapes", '''\
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError("bad head count")
        self.d_model, self.num_heads = d_model, num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias) for _ in range(4))
        self.dropout = nn.Dropout(p=dropout)

    def _heads(self, t):
        B, L, _ = t.shape
        return t.view(B, L, self.num_heads, -1).permute(0, 2, 1, 3)

    def forward(self, query, key, value, mask=None):
        for t in (query, key, value):
            if t.shape[-1] != self.d_model or t.dim() != 3:
                raise ValueError("wrong input shape")
        out, w = scaled_dot_product_attention(self._heads(self.W_q(query)), self._heads(self.W_k(key)),
                                              self._heads(self.W_v(value)), mask)
        w = self.dropout(w)
        out = (w @ self._heads(self.W_v(value))).permute(0, 2, 1, 3).flatten(2)
        return self.W_o(out), w
'''),
    Variant("mha_parameter_count", "weights and biases counted per layer", '''\
def mha_parameter_count(d_model, bias=True):
    if not d_model >= 1:
        raise ValueError(f"d_model must be at least 1, got {d_model}")
    per_layer = d_model * d_model + (d_model if bias else 0)
    return sum(per_layer for _ in ("q", "k", "v", "o"))
'''),
]

# issue 29: an input changed in place must never write the expected value (the answer for zeros
# is the expected value of a check that computes it from the input after the call)
WRONG += [
    Variant("split_heads", "zeroes the input in place and returns the answer for that", '''\
_ref_split_heads = split_heads

def split_heads(x, num_heads):
    x.zero_()
    return _ref_split_heads(x, num_heads)
'''),
]

from tests.catalogue import Variant, do_nothing

# ---------------------------------------------------------------- wrong: each must lose points

_SDPA_HEAD = '''\
def scaled_dot_product_attention(q, k, v, mask=None):
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError("shapes do not match")
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError("mask must be bool")
'''


def _sdpa(body: str) -> str:
    return _SDPA_HEAD + body


def _self_attention(init: str, forward: str) -> str:
    return (
        "class SelfAttention(nn.Module):\n"
        "    def __init__(self, d_model, d_k, d_v, bias=False):\n"
        "        super().__init__()\n"
        "        self.d_model = d_model\n" + init +
        "    def forward(self, x, mask=None):\n"
        "        if x.dim() != 3 or x.shape[-1] != self.d_model:\n"
        "            raise ValueError('bad x')\n" + forward
    )


_INIT = (
    "        self.W_q = nn.Linear(d_model, d_k, bias=bias)\n"
    "        self.W_k = nn.Linear(d_model, d_k, bias=bias)\n"
    "        self.W_v = nn.Linear(d_model, d_v, bias=bias)\n"
)

WRONG = [
    Variant("softmax", "no max shift (overflows to nan at 1e4)", '''\
def softmax(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)
'''),
    Variant("softmax", "sums over the last axis whatever dim is", '''\
def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
'''),
    Variant("softmax", "max over the whole tensor instead of along dim", '''\
def softmax(x, dim=-1):
    e = torch.exp(x - x.max())
    return e / e.sum(dim=dim, keepdim=True)
'''),
    Variant("softmax", "subtracts the max in place, changing the caller's tensor", '''\
def softmax(x, dim=-1):
    x -= x.amax(dim=dim, keepdim=True)
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)
'''),
    Variant("softmax", "calls F.softmax (forbidden)", '''\
import torch.nn.functional as F

def softmax(x, dim=-1):
    return F.softmax(x, dim=dim)
'''),
    Variant("softmax", "exp of torch.log_softmax (forbidden)", '''\
def softmax(x, dim=-1):
    return torch.log_softmax(x, dim=dim).exp()
'''),
    Variant("scaled_dot_product_attention", "scales by sqrt(d_v)", _sdpa('''\
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
''')),
    Variant("scaled_dot_product_attention", "no scale", _sdpa('''\
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
''')),
    Variant("scaled_dot_product_attention", "scales by d_k instead of sqrt(d_k)", _sdpa('''\
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
''')),
    Variant("scaled_dot_product_attention", "mask polarity reversed (True = blocked)", _sdpa('''\
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
''')),
    Variant("scaled_dot_product_attention", "mask applied after the softmax (not renormalised)", _sdpa('''\
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = softmax(scores, dim=-1)
    if mask is not None:
        w = w.masked_fill(~mask, 0.0)
    return w @ v, w
''')),
    Variant("scaled_dot_product_attention", "masked scores set to 0 instead of -inf", _sdpa('''\
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    w = softmax(scores, dim=-1)
    return w @ v, w
''')),
    Variant("scaled_dot_product_attention", "softmax over the queries (dim=-2)", _sdpa('''\
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-2)
    return w @ v, w
''')),
    Variant("scaled_dot_product_attention", "k.mT written as k.T (wrong for batched input)", _sdpa('''\
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
''')),
    Variant("scaled_dot_product_attention", "accepts a (B, 1, 1, S) mask with 3-d inputs (the output gains an axis)",
            _sdpa('''\
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
''')),
    Variant("scaled_dot_product_attention", "no argument checks", '''\
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask.bool(), float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
'''),
    Variant("scaled_dot_product_attention", "calls F.scaled_dot_product_attention (forbidden)",
            "import torch.nn.functional as F\n\n" + _sdpa('''\
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), w
''')),
    Variant("SelfAttention", "uses W_q for the keys", _self_attention(_INIT, '''\
        q, k, v = self.W_q(x), self.W_q(x), self.W_v(x)
        return scaled_dot_product_attention(q, k, v, mask)
''')),
    Variant("SelfAttention", "returns the weights transposed", _self_attention(_INIT, '''\
        out, w = scaled_dot_product_attention(self.W_q(x), self.W_k(x), self.W_v(x), mask)
        return out, w.transpose(-2, -1)
''')),
    Variant("SelfAttention", "ignores the mask", _self_attention(_INIT, '''\
        return scaled_dot_product_attention(self.W_q(x), self.W_k(x), self.W_v(x))
'''), at_most=0.34),  # kept 2.36 of 3 before issue 39: the value checks now run with masks
    Variant("SelfAttention", "always creates biases", _self_attention('''\
        self.W_q = nn.Linear(d_model, d_k)
        self.W_k = nn.Linear(d_model, d_k)
        self.W_v = nn.Linear(d_model, d_v)
''', '''\
        return scaled_dot_product_attention(self.W_q(x), self.W_k(x), self.W_v(x), mask)
''')),
    Variant("SelfAttention", "W_v maps to d_k instead of d_v", _self_attention('''\
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_k, bias=bias)
''', '''\
        return scaled_dot_product_attention(self.W_q(x), self.W_k(x), self.W_v(x), mask)
''')),
    Variant("SelfAttention", "keys and queries swapped (weights over queries)", _self_attention(_INIT, '''\
        return scaled_dot_product_attention(self.W_k(x), self.W_q(x), self.W_v(x), mask)
''')),
    Variant("SelfAttention", "detaches the projections (no gradients reach the weights)", _self_attention(_INIT, '''\
        q, k, v = self.W_q(x).detach(), self.W_k(x).detach(), self.W_v(x).detach()
        return scaled_dot_product_attention(q, k, v, mask)
''')),
]

# side rules (ValueError, in place) earned these points before issue 29; now they earn nothing
WRONG += [*do_nothing("softmax", "returns None"), *do_nothing("scaled_dot_product_attention", "raises ValueError"),
          *do_nothing("SelfAttention", "forward raises ValueError")]
# the constructor right, forward not written: its checks earn the constructor's share, never forward's side
# rule (issue 39: the ValueError for a bad x paid 0.375 of 3 beside the constructor's checks)
WRONG += [Variant("SelfAttention", "right constructor, forward always raises ValueError",
                  _self_attention(_INIT, "        raise ValueError('not written yet')\n"), at_most=0.2)]

# ---------------------------------------------------------------- correct, written differently

CORRECT = [
    Variant("softmax", "exp(x - logsumexp) with the log-sum-exp written by hand", '''\
def softmax(x, dim=-1):
    m = x.max(dim=dim, keepdim=True).values
    lse = m + torch.log(torch.exp(x - m).sum(dim=dim, keepdim=True))
    return torch.exp(x - lse)
'''),
    Variant("softmax", "moves dim to the end and back", '''\
def softmax(x, dim=-1):
    y = x.movedim(dim, -1)
    y = y - y.max(-1, keepdim=True)[0]
    e = y.exp()
    p = e / e.sum(-1, keepdim=True)
    return p.movedim(-1, dim)
'''),
    Variant("scaled_dot_product_attention", "torch.where with finfo.min", '''\
def scaled_dot_product_attention(q, k, v, mask=None):
    if q.size(-1) != k.size(-1):
        raise ValueError("q and k must share Dk")
    if k.size(-2) != v.size(-2):
        raise ValueError("k and v must share S")
    if mask is not None and mask.dtype is not torch.bool:
        raise ValueError("the mask must be boolean")
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.size(-1) ** -0.5
    if mask is not None:
        try:
            fits = torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(f"a mask of shape {tuple(mask.shape)} does not fit scores {tuple(scores.shape)}")
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    weights = softmax(scores)
    return torch.matmul(weights, v), weights
'''),
    Variant("scaled_dot_product_attention", "einsum, scaling q first", '''\
def scaled_dot_product_attention(q, k, v, mask=None):
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"incompatible shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if mask is not None and (mask.dtype != torch.bool or mask.dim() > q.dim()):
        raise ValueError("mask must be bool, with no more axes than q")
    q = q / math.sqrt(q.shape[-1])
    scores = torch.einsum("...td,...sd->...ts", q, k)
    if mask is not None:
        scores = scores + torch.zeros_like(scores).masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
    return torch.einsum("...ts,...sd->...td", weights, v), weights
'''),
    Variant("SelfAttention", "einsum with the layers' weight tensors", '''\
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v, bias=False):
        super().__init__()
        self.W_q, self.W_k = nn.Linear(d_model, d_k, bias), nn.Linear(d_model, d_k, bias)
        self.W_v = nn.Linear(d_model, d_v, bias)

    def forward(self, x, mask=None):
        if x.ndim != 3 or x.size(-1) != self.W_q.in_features:
            raise ValueError(f"expected (B, T, {self.W_q.in_features}), got {tuple(x.shape)}")
        proj = []
        for layer in (self.W_q, self.W_k, self.W_v):
            y = torch.einsum("btd,ed->bte", x, layer.weight)
            proj.append(y if layer.bias is None else y + layer.bias)
        return scaled_dot_product_attention(*proj, mask=mask)
'''),
]

# issue 29: an input changed in place must never write the expected value (the answer for zeros
# is the expected value of a check that computes it from the input after the call)
WRONG += [
    Variant("softmax", "zeroes the input in place and returns the answer for that", '''\
_ref_softmax = softmax

def softmax(x, dim=-1):
    x.zero_()
    return _ref_softmax(x, dim)
'''),
]

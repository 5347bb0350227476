"""Hidden tests for chapter 09: RMSNorm, RoPE, SwiGLU, grouped-query attention, the LLaMA block, the
KV-cache size, the sliding-window mask, the mixture-of-experts layer and its load-balancing loss.

Oracles are PyTorch routines (nn.RMSNorm, F.silu, F.scaled_dot_product_attention with an explicit
repeat_interleave of the kv heads) and formulas written here as Hugging Face's LLaMA and Mixtral code
computes them (rotate-half RoPE; softmax, top-k, renormalise; Switch's auxiliary loss). Inputs are
chosen so the classic mistakes show: tiny inputs for RMSNorm's eps, fixed values for the RoPE layout,
an offset != 0, H / Hkv = 3 so `.repeat` and `repeat_interleave` differ, T < max_len, batch > 1.
Correct versions of the pieces an exercise builds on stand in for the learner's, so a mistake
costs points once, in the exercise where it was made.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.boundary.spec import (
    CORE,
    MULTI_HEAD_ATTENTION,
    RMS_NORM,
    Exercise,
    assert_raises_value_error,
    assert_tensor,
    changed_in_place,  # in-place changes are judged by the in-place rule only
    randn,
    random_weights,
    seeded,
)

# ---------------------------------------------------------------- oracles and correct pieces, written here

def rope_oracle(head_dim, max_len, base=10000.0):
    """(cos, sin) in the rotate-half layout, computed in float64."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope_oracle(x, cos, sin, offset=0):
    """Hugging Face's apply_rotary_pos_emb for positions offset .. offset + T - 1."""
    T = x.shape[-2]
    if offset < 0 or offset + T > cos.shape[0] or x.dim() != 4 or cos.shape[-1] != x.shape[-1]:
        raise ValueError("the positions do not fit the table")
    c, s = cos[offset:offset + T], sin[offset:offset + T]
    return x * c + rotate_half(x) * s


def repeat_kv_oracle(x, n_rep):
    if x.dim() != 4 or n_rep < 1:
        raise ValueError("x should be (B, Hkv, T, Dh) and n_rep >= 1")
    return torch.repeat_interleave(x, n_rep, dim=1)


class RMSNormStandIn(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class SwiGLUStandIn(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_hidden, bias=False)
        self.w_up = nn.Linear(d_model, d_hidden, bias=False)
        self.w_down = nn.Linear(d_hidden, d_model, bias=False)

    def forward(self, x):
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


def gqa_oracle(state, x, num_heads, num_kv_heads, base=10000.0, prefix=""):
    """Attention with torch's own routine: rotate q and k, repeat_interleave the kv heads, causal SDPA."""
    B, T, D = x.shape
    Dh = D // num_heads
    q = (x @ state[f"{prefix}W_q.weight"].T).view(B, T, num_heads, Dh).transpose(1, 2)
    k = (x @ state[f"{prefix}W_k.weight"].T).view(B, T, num_kv_heads, Dh).transpose(1, 2)
    v = (x @ state[f"{prefix}W_v.weight"].T).view(B, T, num_kv_heads, Dh).transpose(1, 2)
    cos, sin = rope_oracle(Dh, T, base)
    q, k = apply_rope_oracle(q, cos, sin), apply_rope_oracle(k, cos, sin)
    n_rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    context = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, Dh)
    return context.transpose(1, 2).reshape(B, T, D) @ state[f"{prefix}W_o.weight"].T


def rms_oracle(x, weight, eps):
    norm = nn.RMSNorm(x.shape[-1], eps=eps)
    with torch.no_grad():
        norm.weight.copy_(weight)
    return norm(x)


def swiglu_oracle(x, state, prefix=""):
    gate = x @ state[f"{prefix}w_gate.weight"].T
    up = x @ state[f"{prefix}w_up.weight"].T
    return (F.silu(gate) * up) @ state[f"{prefix}w_down.weight"].T


def llama_block_oracle(state, x, num_heads, num_kv_heads, base=10000.0, eps=1e-6):
    h = x + gqa_oracle(state, rms_oracle(x, state["attn_norm.weight"], eps), num_heads, num_kv_heads, base,
                       prefix="attn.")
    return h + swiglu_oracle(rms_oracle(h, state["ffn_norm.weight"], eps), state, prefix="ffn.")


class GQAStandIn(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, max_len, rope_base=10000.0):
        super().__init__()
        self.H, self.Hkv, self.base = num_heads, num_kv_heads, rope_base
        Dh = d_model // num_heads
        self.W_q = nn.Linear(d_model, num_heads * Dh, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * Dh, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * Dh, bias=False)
        self.W_o = nn.Linear(num_heads * Dh, d_model, bias=False)

    def forward(self, x):
        state = {f"{n}.weight": getattr(self, n).weight for n in ("W_q", "W_k", "W_v", "W_o")}
        return gqa_oracle(state, x, self.H, self.Hkv, self.base)


ROPE_STAND_INS = {"rope_frequencies": rope_oracle, "apply_rope": apply_rope_oracle, "repeat_kv": repeat_kv_oracle}


def attention_names(prefix=""):
    return {f"{prefix}W_{p}.weight" for p in "qkvo"}


def swiglu_names(prefix=""):
    return {f"{prefix}w_{p}.weight" for p in ("gate", "up", "down")}


def block_names():
    return attention_names("attn.") | swiglu_names("ffn.") | {"attn_norm.weight", "ffn_norm.weight"}


def moe_names(num_experts):
    names = {"router.weight"}
    for e in range(num_experts):
        names |= swiglu_names(f"experts.{e}.")
    return names


def exact_parameters(module, want: dict) -> None:
    """The module's parameters are exactly `want` (name -> shape)."""
    params = {k: tuple(v.shape) for k, v in module.named_parameters()}
    extra, missing = sorted(set(params) - set(want)), sorted(set(want) - set(params))
    if extra or missing:
        raise AssertionError(f"parameters missing: {missing[:4]}; unexpected: {extra[:4]} "
                             "(no biases anywhere in this chapter)")
    wrong = {k: params[k] for k in want if params[k] != want[k]}
    if wrong:
        raise AssertionError(f"wrong shapes {wrong}; expected {({k: want[k] for k in wrong})}")


def on_meta(get) -> bool:
    """Whether the tensor `get()` gives lives on the meta device: device handling is checked without a GPU.
    A meta tensor holds no data, so one that the learner's code gives cannot be copied out of the
    sandbox (NotImplementedError "... meta tensor ..."); in the kernel it comes back as it is."""
    try:
        value = get()
    except NotImplementedError as err:
        if "meta tensor" in str(err):
            return True
        raise
    return type(value) is torch.Tensor and value.device.type == "meta"


# ---------------------------------------------------------------- RMSNorm
RMSNorm = Exercise("RMSNorm", points=2, forbidden=RMS_NORM)


def loaded_norm(cls, D, eps, seed):
    m = cls(D, eps)
    weight = 1.0 + 0.3 * torch.randn(D, generator=seeded(seed))
    m.load_state_dict({"weight": weight}, strict=False)
    return m, weight


@RMSNorm.check("one parameter `weight` (D,) initialised to ones, no bias",
               states=("weight: nn.Parameter (D,), initialised to ones. No bias.",), part="__init__")
def _(cls):
    m = cls(6)
    exact_parameters(m, {"weight": (6,)})
    assert_tensor(m.weight.detach(), torch.ones(6), atol=0, rtol=0, what="the initial weight")


@RMSNorm.check("matches nn.RMSNorm with the same weight on (B, T, D) inputs (eps=1e-6)", weight=CORE,
               states=("x / sqrt(mean(x**2 over the last axis) + eps) * weight",))
def _(cls):
    m, weight = loaded_norm(cls, 8, 1e-6, 901)
    x = randn(2, 3, 8, seed=902)
    assert_tensor(m(x), rms_oracle(x, weight, 1e-6).detach(), atol=1e-6, what="RMSNorm(x)")


@RMSNorm.check("tiny inputs (|x| ~ 1e-3, mean square ~ eps): eps goes inside the square root", weight=CORE,
               states=("added to the mean square INSIDE the square root",))
def _(cls):
    m, weight = loaded_norm(cls, 8, 1e-6, 903)
    x = 1e-3 * randn(2, 3, 8, seed=904)
    assert_tensor(m(x), rms_oracle(x, weight, 1e-6).detach(), atol=1e-5, what="RMSNorm(1e-3 * x)")


@RMSNorm.check("the eps argument is used (eps=0.05 on inputs of size ~0.2)", weight=CORE,
               states=("eps: added to the mean square",))
def _(cls):
    m, weight = loaded_norm(cls, 8, 0.05, 905)
    x = 0.2 * randn(2, 4, 8, seed=906)
    assert_tensor(m(x), rms_oracle(x, weight, 0.05).detach(), atol=1e-6, what="RMSNorm(x) with eps=0.05")


@RMSNorm.check("inputs with a non-zero mean: the mean is not subtracted", weight=CORE,
               states=("No mean is subtracted",))
def _(cls):
    m, weight = loaded_norm(cls, 5, 1e-6, 907)
    x = 2.0 + randn(2, 4, 5, seed=908)
    assert_tensor(m(x), rms_oracle(x, weight, 1e-6).detach(), atol=1e-6, what="RMSNorm(2 + x)")


@RMSNorm.check("any leading shape ((N, D), (B, H, T, D)); float64 in gives float64 out; x unchanged",
               states=("forward(x (..., D)) -> (..., D)", "float64 stays float64", "do not modify x in place"))
def _(cls):
    m, weight = loaded_norm(cls, 4, 1e-6, 909)
    x = randn(2, 3, 5, 4, seed=910)
    before = x.clone()
    assert_tensor(m(x), rms_oracle(x, weight, 1e-6).detach(), atol=1e-6, what="RMSNorm on (2, 3, 5, 4)")
    if changed_in_place(x, before):
        raise AssertionError("RMSNorm changed its input in place")
    x64 = randn(7, 4, seed=911).double()
    expected = (x64 / torch.sqrt((x64 ** 2).mean(-1, keepdim=True) + 1e-6) * weight.double()).detach()
    assert_tensor(m.double()(x64), expected, atol=1e-12, what="RMSNorm in float64")


@RMSNorm.check("bfloat16 in gives bfloat16 out (after module.to(torch.bfloat16)), with the values of the formula",
               states=("x's dtype", "bfloat16 stays bfloat16", "cast back to x's dtype"))
def _(cls):
    m, weight = loaded_norm(cls, 8, 1e-6, 916)
    x = randn(2, 3, 8, seed=917).to(torch.bfloat16)
    expected = rms_oracle(x.float(), weight.to(torch.bfloat16).float(), 1e-6).detach().to(torch.bfloat16)
    assert_tensor(m.to(torch.bfloat16)(x), expected, atol=0.05, rtol=0.02, what="RMSNorm in bfloat16")


@RMSNorm.check("the gradient reaches x and weight as nn.RMSNorm's does")
def _(cls):
    m, weight = loaded_norm(cls, 6, 1e-6, 912)
    x = randn(2, 3, 6, seed=913).requires_grad_()
    (m(x) * randn(2, 3, 6, seed=914)).sum().backward()
    x_ref = x.detach().clone().requires_grad_()
    oracle = nn.RMSNorm(6, eps=1e-6)
    with torch.no_grad():
        oracle.weight.copy_(weight)
    (oracle(x_ref) * randn(2, 3, 6, seed=914)).sum().backward()
    if x.grad is None or m.weight.grad is None:
        raise AssertionError("no gradient reached x or weight")
    assert_tensor(x.grad, x_ref.grad, atol=1e-5, what="d out / d x")
    assert_tensor(m.weight.grad, oracle.weight.grad, atol=1e-5, what="d out / d weight")


@RMSNorm.side_check("an input whose last size is not D raises ValueError",
                    states=("ValueError in forward if x's last size is not D",))
def _(cls):
    assert_raises_value_error(cls(8), randn(2, 5, seed=915))


# ---------------------------------------------------------------- rope_frequencies
rope_frequencies = Exercise("rope_frequencies", points=2)


def assert_tables(result, expected, what):
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(f"{what} should return a tuple (cos, sin), got {type(result).__name__}")
    assert_tensor(result[0], expected[0], atol=1e-5, what=f"{what}[0] (cos)")
    assert_tensor(result[1], expected[1], atol=1e-5, what=f"{what}[1] (sin)")


@rope_frequencies.check("fixed values, head_dim=4, max_len=3, base=100: pair 0 turns 1 rad per position, "
                        "pair 1 0.1 rad",
                        states=("Dimension i of a head (i < Dh/2) is paired with dimension i + Dh/2",
                                "pair i turns by the angle p * base**(-2i/Dh) at position p"))
def _(fn):
    freqs = (1.0, 0.1, 1.0, 0.1)  # dims 0 and 2 form pair 0, dims 1 and 3 pair 1
    cos = torch.tensor([[math.cos(p * f) for f in freqs] for p in range(3)])
    sin = torch.tensor([[math.sin(p * f) for f in freqs] for p in range(3)])
    assert_tables(fn(4, 3, base=100.0), (cos, sin), "rope_frequencies(4, 3, base=100)")


@rope_frequencies.check("head_dim=16, max_len=50, default base 10000: one frequency per pair, halves equal",
                        states=("each (max_len, Dh) float32", "the two halves of each row are equal"))
def _(fn):
    assert_tables(fn(16, 50), rope_oracle(16, 50), "rope_frequencies(16, 50)")


@rope_frequencies.check("the base argument is used (Llama 3's base 500000; head_dim=8, max_len=20)",
                        states=("base: the base of the frequencies",))
def _(fn):
    assert_tables(fn(8, 20, base=500000.0), rope_oracle(8, 20, 500000.0), "rope_frequencies(8, 20, base=5e5)")


@rope_frequencies.side_check("odd or too small head_dim and max_len < 1 raise ValueError",
                             states=("ValueError if head_dim is odd or < 2, or max_len < 1",))
def _(fn):
    assert_raises_value_error(fn, 7, 10)
    assert_raises_value_error(fn, 0, 10)
    assert_raises_value_error(fn, 8, 0)


# ---------------------------------------------------------------- apply_rope
apply_rope = Exercise("apply_rope", points=3)


@apply_rope.check("fixed values: x (1, 1, 2, 4), angles written out: out = (x1 c - x2 s, x2 c + x1 s)", weight=CORE,
                  states=("out = x * c + cat(-x2, x1) * s, i.e. (x1 c - x2 s, x2 c + x1 s)",))
def _(fn):
    x = torch.tensor([[[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]]])
    angles = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.5, 0.25, 0.5, 0.25]])  # position 0, position 1
    cos, sin = angles.cos(), angles.sin()
    c, s = math.cos, math.sin
    expected = torch.tensor([[[[1.0, 2.0, 3.0, 4.0],
                               [5 * c(0.5) - 7 * s(0.5), 6 * c(0.25) - 8 * s(0.25),
                                7 * c(0.5) + 5 * s(0.5), 8 * c(0.25) + 6 * s(0.25)]]]])
    assert_tensor(fn(x, cos, sin), expected, atol=1e-6, what="apply_rope(x, cos, sin)")


@apply_rope.check("matches Hugging Face's rotate-half formula: B=2, H=3, T=5, Dh=8, a table of 16 positions",
                  weight=CORE,
                  states=("with x1 = x[..., :Dh/2], x2 = x[..., Dh/2:]",))
def _(fn):
    x = randn(2, 3, 5, 8, seed=920)
    cos, sin = rope_oracle(8, 16)
    assert_tensor(fn(x, cos, sin), apply_rope_oracle(x, cos, sin), atol=1e-6, what="apply_rope(x, cos, sin)")


@apply_rope.check("offset=6: rows sit at positions 6, 7, 8 (as the last rows of a longer sequence)", weight=CORE,
                  states=("row t sits at position offset + t", "the rows offset .. offset + T - 1 of cos and sin"))
def _(fn):
    cos, sin = rope_oracle(8, 12, base=100.0)
    x = randn(2, 2, 3, 8, seed=921)
    out = fn(x, cos, sin, offset=6)
    assert_tensor(out, apply_rope_oracle(x, cos, sin, 6), atol=1e-6, what="apply_rope(x, cos, sin, offset=6)")
    longer = torch.cat([randn(2, 2, 6, 8, seed=922), x], dim=2)
    assert_tensor(out, apply_rope_oracle(longer, cos, sin)[:, :, 6:], atol=1e-6,
                  what="apply_rope(x, offset=6) vs the last 3 rows of a 9-long sequence")


@apply_rope.check("rotations keep each vector's length; q.k depends only on the offset between positions, also "
                  "for keys rotated later with an offset (as a KV cache does)", weight=CORE)
def _(fn):
    cos, sin = rope_oracle(8, 20)
    q, k = randn(8, seed=923), randn(8, seed=924)
    qs = fn(q.expand(1, 1, 20, 8).contiguous(), cos, sin)[0, 0]  # q at every position 0..19
    ks = fn(k.expand(1, 1, 20, 8).contiguous(), cos, sin)[0, 0]
    assert_tensor(qs.norm(dim=-1), q.norm().expand(20), atol=1e-5, what="|rotated q| at each position")
    scores = qs @ ks.T  # (20, 20)
    for shift in (0, 3, -5):
        diagonal = scores.diagonal(shift)
        assert_tensor(diagonal, diagonal[:1].expand(diagonal.shape[0]).detach(), atol=1e-4,
                      what=f"q_m . k_n along the diagonal n - m = {shift}")
    later = fn(k.expand(1, 1, 5, 8).contiguous(), cos, sin, offset=15)[0, 0]  # k at positions 15..19
    assert_tensor(qs @ later.T, scores[:, 15:].detach(), atol=1e-4,
                  what="q_m . k_n with k_15..k_19 rotated by apply_rope(..., offset=15)")


@apply_rope.check("x is not modified in place; float64 tables and x give float64",
                  states=("Do not modify x in place", "float64 stays float64"))
def _(fn):
    x = randn(1, 2, 4, 6, seed=925)
    before = x.clone()
    cos, sin = rope_oracle(6, 4)
    fn(x, cos, sin)
    if changed_in_place(x, before):
        raise AssertionError("apply_rope changed x in place")
    x64, cos64, sin64 = x.double(), cos.double(), sin.double()
    assert_tensor(fn(x64, cos64, sin64), apply_rope_oracle(x64, cos64, sin64), atol=1e-12, what="apply_rope in float64")


@apply_rope.side_check("positions past the table, a negative offset, a table of the wrong width, or 3-D x raise "
                       "ValueError",
                       states=("ValueError if x is not 4-dimensional, cos or sin is not (L, Dh), offset < 0, or offset "
                               "+ T > L",))
def _(fn):
    cos, sin = rope_oracle(8, 5)
    assert_raises_value_error(fn, randn(1, 1, 4, 8, seed=926), cos, sin, offset=2)
    assert_raises_value_error(fn, randn(1, 1, 6, 8, seed=927), cos, sin)
    assert_raises_value_error(fn, randn(1, 1, 2, 8, seed=928), cos, sin, offset=-1)
    assert_raises_value_error(fn, randn(1, 1, 4, 6, seed=929), cos, sin)
    assert_raises_value_error(fn, randn(1, 4, 8, seed=930), cos, sin)


# ---------------------------------------------------------------- SwiGLUFeedForward
SwiGLUFeedForward = Exercise("SwiGLUFeedForward", points=2)


def loaded_swiglu(cls, D, hidden, seed):
    m = cls(D, hidden)
    return m, random_weights(m, swiglu_names(), seed)


@SwiGLUFeedForward.check("parameters w_gate (h, D), w_up (h, D), w_down (D, h), no biases",
                         states=("w_gate, w_up: nn.Linear(D, d_hidden, bias=False); w_down: nn.Linear(d_hidden, D, "
                                 "bias=False)",))
def _(cls):
    exact_parameters(cls(8, 12), {"w_gate.weight": (12, 8), "w_up.weight": (12, 8), "w_down.weight": (8, 12)})


@SwiGLUFeedForward.check("matches w_down(F.silu(w_gate x) * w_up x) with the same weights, (B, T, D)",
                         states=("w_down(silu(w_gate(x)) * w_up(x))",))
def _(cls):
    m, state = loaded_swiglu(cls, 8, 12, 940)
    x = randn(2, 5, 8, seed=941)
    assert_tensor(m(x), swiglu_oracle(x, state), atol=1e-6, what="SwiGLUFeedForward(x)")


@SwiGLUFeedForward.check("SiLU on the gate branch only: the output is linear in w_up (negating w_up negates it)",
                         states=("SiLU goes on the GATE branch only; w_up's output is not activated",))
def _(cls):
    m, state = loaded_swiglu(cls, 6, 10, 942)
    x = randn(4, 6, seed=943)
    with torch.no_grad():
        m.w_up.weight.neg_()
    state["w_up.weight"] = -state["w_up.weight"]
    assert_tensor(m(x), swiglu_oracle(x, state), atol=1e-6, what="SwiGLUFeedForward(x) with -w_up")


@SwiGLUFeedForward.check("works on (N, D) and (B, H, T, D) inputs", states=("forward(x (..., D)) -> (..., D)",))
def _(cls):
    m, state = loaded_swiglu(cls, 4, 6, 944)
    for x in (randn(7, 4, seed=945), randn(2, 2, 3, 4, seed=946)):
        assert_tensor(m(x), swiglu_oracle(x, state), atol=1e-6, what=f"SwiGLUFeedForward on {tuple(x.shape)}")


# ---------------------------------------------------------------- repeat_kv
repeat_kv = Exercise("repeat_kv", points=1,
                     forbidden=("torch.repeat_interleave", "torch.Tensor.repeat_interleave"))


@repeat_kv.check("fixed values: kv heads [10, 20] with n_rep=3 give heads [10, 10, 10, 20, 20, 20], not [10, 20, 10, "
                 "...]", weight=CORE,
                 states=("kv head 0 n_rep times, then kv head 1", "NOT 0, 1, 0, 1"))
def _(fn):
    x = torch.tensor([10.0, 20.0]).reshape(1, 2, 1, 1)
    expected = torch.tensor([10.0, 10.0, 10.0, 20.0, 20.0, 20.0]).reshape(1, 6, 1, 1)
    assert_tensor(fn(x, 3), expected, atol=0, rtol=0, what="repeat_kv(x, 3)")


@repeat_kv.check("matches torch.repeat_interleave(x, n_rep, dim=1): B=2, Hkv=3, T=4, Dh=5, n_rep=2", weight=CORE,
                 states=("out[:, j] == x[:, j // n_rep]",))
def _(fn):
    x = randn(2, 3, 4, 5, seed=950)
    assert_tensor(fn(x, 2), torch.repeat_interleave(x, 2, dim=1), atol=0, rtol=0, what="repeat_kv(x, 2)")


@repeat_kv.check("n_rep=1 gives x's values; x is not modified; the gradient adds up over the copies",
                 states=("n_rep: how many query heads share one kv head (H / Hkv), >= 1", "Do not modify x"))
def _(fn):
    x = randn(1, 2, 3, 4, seed=951)
    assert_tensor(fn(x, 1), x.clone(), atol=0, rtol=0, what="repeat_kv(x, 1)")
    leaf = x.clone().requires_grad_()
    before = x.clone()
    fn(leaf, 4).sum().backward()
    if leaf.grad is None:
        raise AssertionError("no gradient reached x")
    assert_tensor(leaf.grad, torch.full_like(x, 4.0), atol=0, rtol=0, what="d sum(repeat_kv(x, 4)) / d x")
    if changed_in_place(x, before):
        raise AssertionError("repeat_kv changed x in place")


@repeat_kv.side_check("n_rep < 1 or x that is not 4-dimensional raises ValueError",
                      states=("ValueError if x is not 4-dimensional or n_rep < 1",))
def _(fn):
    assert_raises_value_error(fn, randn(1, 2, 3, 4, seed=952), 0)
    assert_raises_value_error(fn, randn(2, 3, 4, seed=953), 2)


# ---------------------------------------------------------------- GroupedQueryAttention
GroupedQueryAttention = Exercise("GroupedQueryAttention", points=4, forbidden=MULTI_HEAD_ATTENTION,
                                 stand_ins=ROPE_STAND_INS)


def loaded_gqa(cls, D, H, Hkv, max_len, seed, base=10000.0):
    m = cls(D, H, Hkv, max_len, base) if base != 10000.0 else cls(D, H, Hkv, max_len)
    return m.eval(), random_weights(m, attention_names(), seed)


@GroupedQueryAttention.check("parameters W_q (H*Dh, D), W_k and W_v (Hkv*Dh, D), W_o (D, H*Dh), no biases",
                             states=("W_q: nn.Linear(D, H*Dh, bias=False); W_k, W_v: nn.Linear(D, Hkv*Dh, bias=False)",
                                     "W_o: nn.Linear(H*Dh, D, bias=False)"), part="__init__")
def _(cls):
    exact_parameters(cls(24, 6, 2, 16), {"W_q.weight": (24, 24), "W_k.weight": (8, 24), "W_v.weight": (8, 24),
                                         "W_o.weight": (24, 24)})


@GroupedQueryAttention.check("H=4, Hkv=2 matches RoPE + repeat_interleave + causal F.scaled_dot_product_attention "
                             "(B=2, T=6 < max_len=16)",
                             states=("RoPE (positions 0 .. T-1) on q and k",
                                     "causal softmax(q k^T / sqrt(Dh)) v per head",
                                     "the heads merged and projected by W_o"))
def _(cls):
    m, state = loaded_gqa(cls, 16, 4, 2, 16, 960)
    x = randn(2, 6, 16, seed=961)
    assert_tensor(m(x), gqa_oracle(state, x, 4, 2).detach(), atol=1e-5, what="GroupedQueryAttention(x)")


@GroupedQueryAttention.check("H=6, Hkv=2: query heads 0-2 share kv head 0 and heads 3-5 kv head 1 "
                             "(not 0, 1, 0, 1, ...)",
                             states=("query head j uses kv head j // (H / Hkv)",))
def _(cls):
    m, state = loaded_gqa(cls, 24, 6, 2, 8, 962)
    x = randn(2, 5, 24, seed=963)
    assert_tensor(m(x), gqa_oracle(state, x, 6, 2).detach(), atol=1e-5, what="GroupedQueryAttention(x), H=6, Hkv=2")


@GroupedQueryAttention.check("Hkv == H (multi-head) and Hkv == 1 (multi-query) match the oracle",
                             states=("Hkv == H is ordinary multi-head attention, Hkv == 1 multi-query attention",))
def _(cls):
    for Hkv, seed in ((4, 964), (1, 965)):
        m, state = loaded_gqa(cls, 16, 4, Hkv, 10, seed)
        x = randn(3, 7, 16, seed=seed + 100)
        assert_tensor(m(x), gqa_oracle(state, x, 4, Hkv).detach(), atol=1e-5,
                      what=f"GroupedQueryAttention(x) with num_kv_heads={Hkv}")


@GroupedQueryAttention.check("RoPE on q and k only: with every query and key at zero, the output is the mean of W_o "
                             "W_v x over the past",
                             states=("on q and k, never on v",))
def _(cls):
    m, state = loaded_gqa(cls, 16, 4, 2, 8, 966)
    with torch.no_grad():
        m.W_q.weight.zero_()  # all scores 0: uniform weights over positions 0..t
    x = randn(2, 6, 16, seed=967)
    values = x @ state["W_v.weight"].T  # (B, T, Hkv*Dh), never rotated
    values = values.view(2, 6, 2, 1, 4).expand(2, 6, 2, 2, 4).reshape(2, 6, 16)  # kv head j // 2
    running_mean = values.cumsum(1) / torch.arange(1, 7)[None, :, None]
    assert_tensor(m(x), (running_mean @ state["W_o.weight"].T).detach(), atol=1e-5,
                  what="output with W_q = 0")


@GroupedQueryAttention.check("causal: changing later tokens leaves earlier outputs unchanged",
                             states=("Causal self-attention",))
def _(cls):
    m, _ = loaded_gqa(cls, 16, 4, 2, 12, 968)
    x = randn(2, 8, 16, seed=969)
    changed = x.clone()
    changed[:, 5:] = randn(2, 3, 16, seed=970)
    assert_tensor(m(changed)[:, :5], m(x)[:, :5].detach(), atol=1e-5, what="outputs 0..4 after changing 5..7")


@GroupedQueryAttention.check("rope_base is used (base=50), and T == max_len works",
                             states=("rope_frequencies(Dh, max_len, rope_base)",))
def _(cls):
    m, state = loaded_gqa(cls, 16, 4, 2, 9, 971, base=50.0)
    x = randn(2, 9, 16, seed=972)
    assert_tensor(m(x), gqa_oracle(state, x, 4, 2, base=50.0).detach(), atol=1e-5,
                  what="GroupedQueryAttention(..., rope_base=50)(x)")


@GroupedQueryAttention.check("cos and sin are buffers: they follow the module to another device (.to('meta') here)",
                             states=("registered as buffers",))
def _(cls):
    m = cls(16, 4, 2, 8)
    buffers = {name for name, _ in m.named_buffers()}
    missing = [name for name in ("cos", "sin") if name not in buffers]
    if missing:
        raise AssertionError(f"{missing} are not buffers of the module (its buffers: {sorted(buffers)}): a plain "
                             "tensor "
                             "attribute stays behind when the model moves (.to('cuda')); use self.register_buffer")
    m.to(torch.device("meta"))
    if not (on_meta(lambda: m.cos) and on_meta(lambda: m.sin)):
        raise AssertionError("after module.to('meta'), cos and sin are still on the cpu: register them as buffers")


@GroupedQueryAttention.check("cos and sin stay out of the state_dict "
                             "(persistent=False: they are recomputed, not saved)",
                             states=("registered as buffers (persistent=False)",))
def _(cls):
    saved = [name for name in cls(16, 4, 2, 8).state_dict() if name in ("cos", "sin")]
    if saved:
        raise AssertionError(f"{saved} are in the state_dict: register them with persistent=False, so that a "
                             "checkpoint holds only the weights (the tables follow from max_len and rope_base)")


@GroupedQueryAttention.side_check("bad sizes raise ValueError: D % H, H % Hkv, T > max_len, x not (B, T, D)",
                                  states=("ValueError in __init__ if D % H != 0, H % Hkv != 0 or Dh is odd",
                                          "in forward if x is not (B, T, D) or T > max_len"))
def _(cls):
    assert_raises_value_error(cls, 18, 4, 2, 8)
    assert_raises_value_error(cls, 24, 6, 4, 8)
    m = cls(16, 4, 2, 5)
    assert_raises_value_error(m, randn(1, 6, 16, seed=973))
    assert_raises_value_error(m, randn(1, 4, 12, seed=974))


# ---------------------------------------------------------------- LlamaBlock
LlamaBlock = Exercise("LlamaBlock", points=3, forbidden=MULTI_HEAD_ATTENTION + RMS_NORM, stand_ins={
    "RMSNorm": RMSNormStandIn, "GroupedQueryAttention": GQAStandIn, "SwiGLUFeedForward": SwiGLUStandIn,
    **ROPE_STAND_INS})


def loaded_block(cls, seed, H=4, Hkv=2, **kwargs):
    m = cls(16, H, Hkv, 24, 16, **kwargs)
    return m.eval(), random_weights(m, block_names(), seed)


@LlamaBlock.check("submodules attn_norm, attn (W_q, W_k, W_v, W_o), ffn_norm, ffn (w_gate, w_up, w_down)",
                  states=("attn_norm: RMSNorm(D, eps); attn: GroupedQueryAttention(D, H, Hkv, max_len, rope_base)",
                          "ffn_norm: RMSNorm(D, eps); ffn: SwiGLUFeedForward(D, d_hidden)"))
def _(cls):
    want = {"attn_norm.weight": (16,), "ffn_norm.weight": (16,), "attn.W_q.weight": (16, 16),
            "attn.W_k.weight": (8, 16), "attn.W_v.weight": (8, 16), "attn.W_o.weight": (16, 16),
            "ffn.w_gate.weight": (24, 16), "ffn.w_up.weight": (24, 16), "ffn.w_down.weight": (16, 24)}
    exact_parameters(cls(16, 4, 2, 24, 16), want)


@LlamaBlock.check("matches x + attn(attn_norm(x)), then + ffn(ffn_norm(x)) with torch oracles (B=2, T=5)",
                  states=("x = x + attn(attn_norm(x))", "x = x + ffn(ffn_norm(x))",
                          "never normalised inside the block"))
def _(cls):
    m, state = loaded_block(cls, 980)
    x = randn(2, 5, 16, seed=981)
    assert_tensor(m(x), llama_block_oracle(state, x, 4, 2).detach(), atol=1e-5, what="LlamaBlock(x)")


@LlamaBlock.check("num_kv_heads is passed on (Hkv=1, multi-query)",
                  states=("GroupedQueryAttention(D, H, Hkv, max_len, rope_base)",))
def _(cls):
    m, state = loaded_block(cls, 982, H=4, Hkv=1)
    x = randn(2, 6, 16, seed=983)
    assert_tensor(m(x), llama_block_oracle(state, x, 4, 1).detach(), atol=1e-5, what="LlamaBlock(x), Hkv=1")


@LlamaBlock.check("eps reaches both RMSNorms (eps=0.3 on inputs of size ~0.5)",
                  states=("eps: the eps of both RMSNorms",))
def _(cls):
    m, state = loaded_block(cls, 984, eps=0.3)
    x = 0.5 * randn(2, 4, 16, seed=985)
    assert_tensor(m(x), llama_block_oracle(state, x, 4, 2, eps=0.3).detach(), atol=1e-5,
                  what="LlamaBlock(..., eps=0.3)(x)")


@LlamaBlock.check("rope_base reaches the attention (rope_base=30)", states=("rope_base: RoPE's base",))
def _(cls):
    m, state = loaded_block(cls, 986, rope_base=30.0)
    x = randn(1, 7, 16, seed=987)
    assert_tensor(m(x), llama_block_oracle(state, x, 4, 2, base=30.0).detach(), atol=1e-5,
                  what="LlamaBlock(..., rope_base=30)(x)")


@LlamaBlock.check("causal: changing later tokens leaves earlier outputs unchanged")
def _(cls):
    m, _ = loaded_block(cls, 988)
    x = randn(2, 7, 16, seed=989)
    changed = x.clone()
    changed[:, 4:] = randn(2, 3, 16, seed=990)
    assert_tensor(m(changed)[:, :4], m(x)[:, :4].detach(), atol=1e-5, what="outputs 0..3 after changing 4..6")


# ---------------------------------------------------------------- kv_cache_bytes
kv_cache_bytes = Exercise("kv_cache_bytes", points=1)


def assert_int(actual, expected, what):
    if type(actual) is not int:
        raise AssertionError(f"{what} should be a Python int, got {type(actual).__name__} {actual!r}")
    if actual != expected:
        raise AssertionError(f"{what} = {actual:,}, expected {expected:,}")


@kv_cache_bytes.check("LLaMA-2-7B (32 layers, 32 kv heads of 128) at 4096 tokens in fp16: exactly 2 GiB",
                      states=("a Python int",
                              "2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_value"))
def _(fn):
    assert_int(fn(32, 32, 128, 4096, 1, 2), 2 * 2 ** 30, "kv_cache_bytes(32, 32, 128, 4096, 1, 2)")


@kv_cache_bytes.check("Llama-3-8B (8 kv heads): 512 MiB; batch 3 at 8192 tokens is 6 times that")
def _(fn):
    assert_int(fn(32, 8, 128, 4096, 1, 2), 512 * 2 ** 20, "kv_cache_bytes(32, 8, 128, 4096, 1, 2)")
    assert_int(fn(32, 8, 128, 8192, 3, 2), 6 * 512 * 2 ** 20, "kv_cache_bytes(32, 8, 128, 8192, 3, 2)")


@kv_cache_bytes.check("small values: keys AND values (the factor 2), every argument counts",
                      states=("keys AND values",))
def _(fn):
    assert_int(fn(1, 1, 1, 1, 1, 1), 2, "kv_cache_bytes(1, 1, 1, 1, 1, 1)")
    assert_int(fn(3, 2, 5, 7, 2, 4), 2 * 3 * 2 * 5 * 7 * 2 * 4, "kv_cache_bytes(3, 2, 5, 7, 2, 4)")


@kv_cache_bytes.side_check("an argument < 1 raises ValueError", states=("ValueError if any argument is < 1",))
def _(fn):
    assert_raises_value_error(fn, 0, 8, 128, 4096, 1, 2)
    assert_raises_value_error(fn, 32, 8, 128, 4096, 1, 0)
    assert_raises_value_error(fn, 32, 8, 128, -5, 1, 2)


# ---------------------------------------------------------------- sliding_window_mask
sliding_window_mask = Exercise("sliding_window_mask", points=1)


def window_oracle(T, window):
    return torch.tensor([[0 <= t - s < window for s in range(T)] for t in range(T)], dtype=torch.bool)


@sliding_window_mask.check("fixed values T=5, window=2: each query sees itself and the key before it",
                           states=("query t sees keys t - window + 1 .. t", "(T, T) bool"))
def _(fn):
    expected = torch.tensor([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]],
                            dtype=torch.bool)
    assert_tensor(fn(5, 2), expected, atol=0, rtol=0, what="sliding_window_mask(5, 2)")


@sliding_window_mask.check("T=10, window=3: 0 <= t - s < window, so every row holds min(t + 1, 3) keys",
                           states=("mask[t, s] is True when 0 <= t - s < window",))
def _(fn):
    assert_tensor(fn(10, 3), window_oracle(10, 3), atol=0, rtol=0, what="sliding_window_mask(10, 3)")


@sliding_window_mask.check("window=1 is the diagonal; window >= T is the causal mask",
                           states=("window >= T gives the causal mask", "window == 1 lets each token see only itself"))
def _(fn):
    assert_tensor(fn(4, 1), torch.eye(4, dtype=torch.bool), atol=0, rtol=0, what="sliding_window_mask(4, 1)")
    for window in (6, 9):
        assert_tensor(fn(6, window), torch.ones(6, 6).tril().bool(), atol=0, rtol=0,
                      what=f"sliding_window_mask(6, {window})")


@sliding_window_mask.check("the device argument is honoured", states=("device: where to create the mask",))
def _(fn):
    m = fn(3, 2, device=torch.device("cpu"))
    if type(m) is not torch.Tensor or m.device.type != "cpu":
        raise AssertionError("sliding_window_mask(3, 2, device=cpu) should be a tensor on the cpu")
    assert_tensor(m, window_oracle(3, 2), atol=0, rtol=0, what="sliding_window_mask(3, 2, device=cpu)")


@sliding_window_mask.check("device='meta' gives a mask on the meta device (the device argument is used)",
                           states=("device: where to create the mask",))
def _(fn):
    if not on_meta(lambda: fn(4, 2, device=torch.device("meta"))):
        raise AssertionError("sliding_window_mask(4, 2, device='meta') did not create the mask on the meta device: "
                             "pass device to the tensors you create (torch.arange(T, device=device))")


@sliding_window_mask.side_check("window < 1 or T < 1 raises ValueError", states=("ValueError if T < 1 or window < 1",))
def _(fn):
    assert_raises_value_error(fn, 5, 0)
    assert_raises_value_error(fn, 0, 2)


# ---------------------------------------------------------------- MoEFeedForward
MoEFeedForward = Exercise("MoEFeedForward", points=4, stand_ins={"SwiGLUFeedForward": SwiGLUStandIn})


def moe_oracle(state, x, num_experts, top_k):
    """Mixtral's routing, dense: softmax over all experts, keep the top_k, renormalise, mix."""
    B, T, D = x.shape
    tokens = x.reshape(B * T, D)
    logits = tokens @ state["router.weight"].T  # (N, E)
    probs = logits.softmax(-1)
    top, chosen = probs.topk(top_k, dim=-1)
    weights = torch.zeros_like(probs).scatter(1, chosen, top / top.sum(-1, keepdim=True))  # (N, E)
    outputs = torch.stack([swiglu_oracle(tokens, state, f"experts.{e}.") for e in range(num_experts)], 1)
    return (weights[..., None] * outputs).sum(1).reshape(B, T, D), logits


def loaded_moe(cls, E, k, seed, D=8, hidden=12):
    m = cls(D, hidden, E, k)
    state = random_weights(m, moe_names(E), seed)
    with torch.no_grad():  # a sharper router, so the top-k choice is never a near tie
        m.router.weight.mul_(3.0)
    state["router.weight"] = 3.0 * state["router.weight"]
    return m, state


def moe_pair(result, what):
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(f"{what} should return (output, router_logits), got {type(result).__name__}")
    return result


@MoEFeedForward.check("parameters: router (E, D) without bias, experts.e.w_gate / w_up / w_down for each expert",
                      states=("router: nn.Linear(D, E, bias=False); experts: nn.ModuleList of E SwiGLUFeedForward(D, "
                              "d_hidden)",))
def _(cls):
    m = cls(8, 12, 4, 2)
    want = {"router.weight": (4, 8)}
    for e in range(4):
        want |= {f"experts.{e}.w_gate.weight": (12, 8), f"experts.{e}.w_up.weight": (12, 8),
                 f"experts.{e}.w_down.weight": (8, 12)}
    exact_parameters(m, want)


@MoEFeedForward.check("E=4, top_k=2, B=2, T=5: output and router_logits (B*T, E) match Mixtral's routing",
                      states=("(output (B, T, D), router_logits (B*T, E))",
                              "keep the top_k largest p_e and divide them by their sum"))
def _(cls):
    m, state = loaded_moe(cls, 4, 2, 1000)
    x = randn(2, 5, 8, seed=1001)
    out, logits = moe_pair(m(x), "MoEFeedForward(x)")
    expected_out, expected_logits = moe_oracle(state, x, 4, 2)
    assert_tensor(logits, expected_logits.detach(), atol=1e-5, what="router_logits")
    assert_tensor(out, expected_out.detach(), atol=1e-5, what="output")


@MoEFeedForward.check("top_k=1: each token's output is exactly its favourite expert's output (the weight renormalises "
                      "to 1)",
                      states=("the kept weights sum to 1",))
def _(cls):
    m, state = loaded_moe(cls, 5, 1, 1002)
    x = randn(3, 4, 8, seed=1003)
    out, _ = moe_pair(m(x), "MoEFeedForward(x)")
    assert_tensor(out, moe_oracle(state, x, 5, 1)[0].detach(), atol=1e-5, what="output with top_k=1")


@MoEFeedForward.check("E=6, top_k=3 (choices differ from token to token) and top_k=E (every expert, softmax weights)",
                      states=("output[n] = sum over the kept e of weight_e * experts[e](x_n)",))
def _(cls):
    for k, seed in ((3, 1004), (6, 1005)):
        m, state = loaded_moe(cls, 6, k, seed)
        x = randn(2, 6, 8, seed=seed + 100)
        out, _ = moe_pair(m(x), "MoEFeedForward(x)")
        assert_tensor(out, moe_oracle(state, x, 6, k)[0].detach(), atol=1e-5, what=f"output with top_k={k}")


@MoEFeedForward.check("routing is per token: a sequence gives the same output alone as inside a batch",
                      states=("for each token n (row n of x.reshape(B*T, D)) ON ITS OWN",))
def _(cls):
    m, _ = loaded_moe(cls, 4, 2, 1006)
    x = randn(4, 3, 8, seed=1007)
    batch, _ = moe_pair(m(x), "MoEFeedForward(x)")
    alone, _ = moe_pair(m(x[2:3]), "MoEFeedForward(x[2:3])")
    assert_tensor(alone, batch[2:3].detach(), atol=1e-5, what="output of sequence 2 alone vs in the batch")


@MoEFeedForward.check("the gradient reaches the router through the kept weights, as in the oracle",
                      states=("The weights stay differentiable, so the router learns",))
def _(cls):
    m, state = loaded_moe(cls, 4, 2, 1008)
    x = randn(2, 4, 8, seed=1009)
    g = randn(2, 4, 8, seed=1010)
    out, _ = moe_pair(m(x), "MoEFeedForward(x)")
    (out * g).sum().backward()
    router = state["router.weight"].clone().requires_grad_()
    (moe_oracle({**state, "router.weight": router}, x, 4, 2)[0] * g).sum().backward()
    if m.router.weight.grad is None:
        raise AssertionError("no gradient reached router.weight: the routing weights must stay differentiable")
    assert_tensor(m.router.weight.grad, router.grad, atol=1e-5, what="d output / d router.weight")


@MoEFeedForward.side_check("top_k < 1 or top_k > num_experts raises ValueError",
                           states=("ValueError in __init__ if top_k is outside [1, num_experts]",))
def _(cls):
    assert_raises_value_error(cls, 8, 12, 4, 0)
    assert_raises_value_error(cls, 8, 12, 4, 5)


# ---------------------------------------------------------------- load_balancing_loss
load_balancing_loss = Exercise("load_balancing_loss", points=2)


def balancing_oracle(logits, top_k):
    """Hugging Face's load_balancing_loss_func for one layer, in float64."""
    probs = logits.double().softmax(-1)
    N, E = probs.shape
    chosen = probs.topk(top_k, dim=-1).indices
    counts = torch.zeros(E, dtype=torch.float64)
    for row in chosen.tolist():
        for e in row:
            counts[e] += 1
    return (E * (counts / N * probs.mean(0)).sum()).float()


def assert_scalar(actual, expected, what, atol=1e-5):
    if type(actual) is torch.Tensor and actual.shape != ():
        raise AssertionError(f"{what} should be a scalar tensor (shape ()), got shape {tuple(actual.shape)}")
    assert_tensor(actual, expected, atol=atol, what=what)


@load_balancing_loss.check("fixed value: 4 tokens, 3 experts, top_k=1 (experts 0, 0, 1, 2 chosen)",
                           states=("a scalar (shape ()) tensor: E * sum_e f_e * P_e",))
def _(fn):
    logits = torch.tensor([[2.0, 0.0, 0.0], [1.0, 0.5, 0.0], [0.0, 3.0, 1.0], [0.0, 0.0, 1.0]])
    probs = logits.double().softmax(-1)
    fraction = torch.tensor([2 / 4, 1 / 4, 1 / 4], dtype=torch.float64)
    expected = (3 * (fraction * probs.mean(0)).sum()).float()
    assert_scalar(fn(logits, 1), expected, "load_balancing_loss(logits, top_k=1)")


@load_balancing_loss.check("top_k=2, N=50, E=6: f_e counts the tokens whose top 2 include e (the f_e sum to 2)",
                           states=("f_e = (number of tokens whose top_k experts, by router probability, include e) / N",
                                   "the f_e sum to top_k"))
def _(fn):
    logits = 2 * randn(50, 6, seed=1020)
    assert_scalar(fn(logits, 2), balancing_oracle(logits, 2), "load_balancing_loss(logits, top_k=2)")


@load_balancing_loss.check("top_k=1 and top_k=3 on other logits (N=33, E=5)")
def _(fn):
    logits = 3 * randn(33, 5, seed=1021)
    for k in (1, 3):
        assert_scalar(fn(logits, k), balancing_oracle(logits, k), f"load_balancing_loss(logits, top_k={k})")


@load_balancing_loss.check("a router that sends every token to expert 0 scores about E (here E=4: 3.9995)",
                           states=("P_e = the mean over the N tokens of softmax(router_logits)[:, e]",))
def _(fn):
    logits = torch.zeros(10, 4)
    logits[:, 0] = 10.0
    assert_scalar(fn(logits, 1), balancing_oracle(logits, 1), "load_balancing_loss of a collapsed router")


@load_balancing_loss.check("the gradient flows through the mean probabilities P_e only (the counts carry none)",
                           states=("a count that carries no gradient", "which carries the gradient"))
def _(fn):
    logits = randn(12, 4, seed=1022).requires_grad_()
    out = fn(logits, 2)
    if type(out) is not torch.Tensor or not out.requires_grad:
        raise AssertionError("the loss carries no gradient: P_e (mean softmax probabilities) must stay differentiable")
    out.backward()
    leaf = logits.detach().clone().requires_grad_()
    probs = leaf.softmax(-1)
    counts = F.one_hot(probs.topk(2, dim=-1).indices, 4).sum((0, 1)).float()
    (4 * (counts / 12 * probs.mean(0)).sum()).backward()
    assert_tensor(logits.grad, leaf.grad, atol=1e-6, what="d loss / d router_logits")


@load_balancing_loss.side_check("router_logits not (N, E), or top_k outside [1, E], raises ValueError",
                                states=("ValueError if router_logits is not 2-dimensional or top_k is outside [1, E]",))
def _(fn):
    logits = randn(5, 3, seed=1023)
    assert_raises_value_error(fn, logits, 0)
    assert_raises_value_error(fn, logits, 4)
    assert_raises_value_error(fn, randn(15, seed=1024), 1)

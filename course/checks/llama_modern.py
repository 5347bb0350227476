"""Public checks for chapter 09 (RMSNorm, RoPE, SwiGLU, grouped-query attention, the LLaMA block, the KV
cache, sliding windows, mixture of experts). The stored numbers at the end of this file are what the
reference solution gives on the fixed inputs below, and what the usual mistakes give on the same inputs,
which is how a failing check names the mistake; `python -m tests.snapshots --write` computes them again
in the course repository. Weights are set by a fixed formula.
"""
from __future__ import annotations

import math

import torch

from course.checks import (
    avoid_library_call,
    close,
    diagnose,
    expect_tensor,
    expect_value_error,
    fail,
    mistake,
    passed,
    public_check,
    tr,
)
from course.checks.decoder_masking import _set_params as set_params

T = torch.tensor

# ---------------------------------------------------------------- fixed inputs
# Row 0 has a non-zero mean; row 1 is tiny (mean square 1e-6, as large as eps).
NORM_X = T([[1.0, 2.0, 3.0, 4.0], [1e-3, -1e-3, 1e-3, -1e-3]])
ROPE_X = T([[[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]]])  # (1, 1, 2, 4): positions 0 and 1
ROPE_ANGLES = T([[0.0, 0.0, 0.0, 0.0], [0.5, 0.25, 0.5, 0.25], [1.0, 0.5, 1.0, 0.5]])  # rotate-half layout
RMS_WEIGHT = T([1.0, 0.5, -1.0, 2.0])
SEQ = torch.cos(0.7 * torch.arange(3 * 16, dtype=torch.float32) + 0.3).view(1, 3, 16)  # (1, T=3, D=16)
MOE_X = torch.sin(0.9 * torch.arange(2 * 3 * 8, dtype=torch.float32) + 0.2).view(2, 3, 8)  # (B=2, T=3, D=8)
LB_LOGITS = T([[2.0, 0.0, 0.0], [1.0, 0.5, 0.0], [0.0, 3.0, 1.0], [0.0, 0.0, 1.0], [0.5, 0.0, 2.0]])


def _moe_params(moe) -> None:
    set_params(moe)
    with torch.no_grad():  # a sharper router, so no choice is a near tie
        moe.router.weight.mul_(4.0)


def _names(module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in module.named_parameters()}


def _expect_parameters(module, want: dict[str, tuple[int, ...]], what: str) -> None:
    have = _names(module)
    if set(have) != set(want):
        fail(tr("{what} should have exactly the parameters {want}; found {have}. "
                "Use the attribute names of the docstring, and no biases (bias=False)",
                what=what, want=sorted(want), have=sorted(have)))
    wrong = {k: have[k] for k in want if have[k] != want[k]}
    if wrong:
        fail(tr("{what}: wrong shapes {wrong}; expected {expected}",
                what=what, wrong=wrong, expected={k: want[k] for k in wrong}))


# ---------------------------------------------------------------- RMSNorm

def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm by its formula, over the last axis."""
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.detach()


@public_check
def check_RMSNorm(cls) -> None:
    avoid_library_call(cls, ("RMSNorm", "rms_norm"),
                       tr("write RMSNorm from x, its mean square and eps; the grader gives zero to a solution that "
                          "calls nn.RMSNorm or F.rms_norm"))
    norm = cls(4)
    _expect_parameters(norm, {"weight": (4,)}, "RMSNorm(4)")
    if not torch.equal(norm.weight.detach(), torch.ones(4)):
        fail(tr("the weight should start as ones (like LayerNorm's)"))
    with torch.no_grad():
        norm.weight.copy_(RMS_WEIGHT)
    diagnose(norm(NORM_X), RMS_OUT, {
        tr("you subtracted the mean: RMSNorm only divides by the root mean square, it does not centre x"):
            RMS_CENTRED,
        tr("eps must go INSIDE the square root: x / sqrt(mean(x**2) + eps). Outside it, tiny inputs are blown up"):
            RMS_EPS_OUTSIDE,
        tr("you used the SUM of squares; RMSNorm uses their MEAN (divide by D)"): RMS_SUM,
        tr("the weight is missing: multiply by self.weight"): RMS_NO_WEIGHT,
        tr("you divided by the standard deviation (x.std): RMSNorm divides by the root mean square, "
           "sqrt(mean(x**2) + eps), which does not subtract the mean first"): RMS_STD,
    }, tr("RMSNorm(4) with weight [1, 0.5, -1, 2] on two rows (row 1 is tiny)"))
    batched = torch.stack([NORM_X, 2.0 * NORM_X.flip(0)])  # (B, T, D) = (2, 2, 4)
    if not close(norm(batched), _rms(batched, RMS_WEIGHT, 1e-6), atol=1e-5):
        fail(tr("RMSNorm is right on (T, D) = (2, 4) but wrong on (B, T, D) = (2, 2, 4): take the mean square over "
                "the LAST axis (dim=-1, keepdim=True), whatever the number of leading axes"))
    wide = cls(4, 0.5)
    if not close(wide(NORM_X), _rms(NORM_X, torch.ones(4), 0.5), atol=1e-5):
        fail(tr("RMSNorm(4, eps=0.5) does not give x / sqrt(mean(x**2) + 0.5): use the eps argument (keep it in "
                "__init__), not a fixed 1e-6"))
    expect_value_error(norm, torch.ones(2, 5), what=tr("an input whose last size is not d_model"))
    half = norm.to(torch.bfloat16)(NORM_X.to(torch.bfloat16))
    if getattr(half, "dtype", None) != torch.bfloat16:
        fail(tr("a bfloat16 input (module.to(torch.bfloat16)) gave {dtype} out: "
                "return x's dtype (computing in float32 inside is fine; cast the result back with .to(x.dtype))",
                dtype=getattr(half, "dtype", type(half).__name__)))
    passed("RMSNorm")


# ---------------------------------------------------------------- rope_frequencies

@public_check
def check_rope_frequencies(fn) -> None:
    out = fn(4, 3, base=100.0)
    if not isinstance(out, tuple) or len(out) != 2:
        fail(tr("rope_frequencies should return a tuple (cos, sin), got {type}", type=type(out).__name__))
    cos, sin = out
    expect_tensor(cos, (3, 4), tr("cos from rope_frequencies(4, 3, base=100)"))
    expect_tensor(sin, (3, 4), "sin")
    diagnose(cos, ROPE_COS_100, {
        tr("this is the interleaved layout (each angle twice in a row: pairs 2i, 2i+1). The course uses rotate "
           "half: dimension i pairs with i + Dh/2, so repeat the Dh/2 angles as [angles, angles] (torch.cat)"):
            ROPE_COS_INTERLEAVED,
        tr("the exponent is per PAIR: frequency i is base**(-2i/Dh) for i = 0 .. Dh/2 - 1 (you used i/Dh)"):
            ROPE_COS_PER_COLUMN,
        tr("cos and sin are swapped: return (cos, sin)"): ROPE_SIN_100,
        tr("positions start at 0 (row 0 is the unrotated position): use arange(max_len)"): ROPE_COS_FROM_1,
    }, tr("cos of rope_frequencies(4, 3, base=100)"), atol=1e-5)
    diagnose(sin, ROPE_SIN_100, {}, tr("sin of rope_frequencies(4, 3, base=100)"), atol=1e-5)
    if not close(fn(8, 2)[0][1, 1], math.cos(10000 ** -0.25), atol=1e-5):
        fail(tr("with the default base 10000 and head_dim 8, cos[1, 1] should be cos(10000**(-2/8))"))
    expect_value_error(fn, 5, 3, what=tr("an odd head_dim"))
    passed("rope_frequencies")


# ---------------------------------------------------------------- apply_rope

@public_check
def check_apply_rope(fn) -> None:
    cos, sin = ROPE_ANGLES.cos(), ROPE_ANGLES.sin()
    x = ROPE_X.clone()
    out = fn(x, cos, sin)
    if not torch.equal(x, ROPE_X):
        fail(tr("apply_rope changed x in place; build a new tensor (x * c + rotated * s)"))
    expect_tensor(out, (1, 1, 2, 4), "apply_rope(x (1, 1, 2, 4), cos, sin)")
    diagnose(out, APPLY_OUT, {
        tr("you rotated the interleaved pairs (x[2i], x[2i+1]); the course pairs dimension i with i + Dh/2 "
           "(rotate half): out = x * c + cat(-x2, x1) * s"): APPLY_INTERLEAVED,
        tr("the sign is on the wrong half: rotate_half(x) is cat(-x2, x1), not cat(x2, -x1)"): APPLY_WRONG_SIGN,
    }, tr("apply_rope(x, cos, sin) for positions 0 and 1"), atol=1e-5)
    shifted = fn(ROPE_X.clone(), cos, sin, offset=1)
    diagnose(shifted, APPLY_OFFSET, {
        tr("offset is ignored: row t sits at position offset + t, so use the rows offset .. offset + T - 1 of "
           "cos and sin"): APPLY_OUT,
    }, "apply_rope(x, cos, sin, offset=1)", atol=1e-5)
    expect_value_error(fn, ROPE_X.clone(), cos, sin, offset=2, what=tr("positions 2 and 3 with a table of 3 positions"))
    passed("apply_rope")


# ---------------------------------------------------------------- SwiGLUFeedForward

@public_check
def check_SwiGLUFeedForward(cls) -> None:
    ffn = cls(16, 6)
    _expect_parameters(ffn, {"w_gate.weight": (6, 16), "w_up.weight": (6, 16), "w_down.weight": (16, 6)},
                       "SwiGLUFeedForward(16, 6)")
    set_params(ffn)
    out = ffn(SEQ)
    expect_tensor(out, (1, 3, 16), "SwiGLUFeedForward(16, 6)(x (1, 3, 16))")
    diagnose(out[0, :, :4], SWIGLU_OUT, {
        tr("SiLU belongs on the GATE branch: w_down(silu(w_gate(x)) * w_up(x))"): SWIGLU_UP,
        tr("apply SiLU to w_gate(x) before multiplying by w_up(x), not to the product"): SWIGLU_AFTER,
        tr("this is a GELU gate (GeGLU); SwiGLU's gate is SiLU, silu(z) = z * sigmoid(z): F.silu"): SWIGLU_GELU,
        tr("this is a sigmoid gate (GLU): SwiGLU's gate is SiLU, z * sigmoid(z), so multiply by w_gate(x) as well"):
            SWIGLU_SIGMOID,
    }, tr("the first 4 output features, with fixed weights"))
    passed("SwiGLUFeedForward")


# ---------------------------------------------------------------- repeat_kv

@public_check
def check_repeat_kv(fn) -> None:
    avoid_library_call(fn, ("repeat_interleave",),
                       tr("the grader gives zero to a repeat_kv that calls repeat_interleave: add an axis after the kv "
                          "heads, expand it, and reshape (or index with arange(H) // n_rep)"))
    x = T([10.0, 20.0]).view(1, 2, 1, 1)
    out = fn(x, 3)
    expect_tensor(out, (1, 6, 1, 1), "repeat_kv(x (1, 2, 1, 1), 3)")
    heads = out.flatten().tolist()
    if heads == [10.0, 20.0, 10.0, 20.0, 10.0, 20.0]:
        mistake(tr("the kv heads are tiled (10, 20, 10, 20, ...), which is what .repeat does. Query heads 0..n_rep-1 "
                   "share kv head 0, so the copies of each kv head sit NEXT TO EACH OTHER: 10, 10, 10, 20, 20, 20"))
    if heads == [20.0, 20.0, 20.0, 10.0, 10.0, 10.0]:
        mistake(tr("the kv heads are in reversed order (20, 20, 20, 10, 10, 10): output head j is kv head j // n_rep, "
                   "counted from head 0 up"))
    if heads != [10.0, 10.0, 10.0, 20.0, 20.0, 20.0]:
        fail(tr("repeat_kv([10, 20], 3) should give heads [10, 10, 10, 20, 20, 20]; got {heads}", heads=heads))
    expect_value_error(fn, x, 0, what="n_rep = 0")
    passed("repeat_kv")


# ---------------------------------------------------------------- GroupedQueryAttention

def _causal_probe(module, what: str) -> None:
    changed = SEQ.clone()
    changed[:, 2] = 5.0
    if not close(module(changed)[:, :2], module(SEQ)[:, :2], atol=1e-5):
        fail(tr("{what}: changing token 2 changed the outputs at positions 0 and 1. Attention must be causal: "
                "pass causal_mask(T) to scaled_dot_product_attention", what=what))


@public_check
def check_GroupedQueryAttention(cls) -> None:
    avoid_library_call(cls, ("MultiheadAttention", "multi_head_attention_forward", "scaled_dot_product_attention"),
                       tr("build the attention from your pieces; the grader gives zero to a solution that calls "
                          "nn.MultiheadAttention or F.scaled_dot_product_attention"))
    attn = cls(16, 4, 2, 8)
    _expect_parameters(attn, {"W_q.weight": (16, 16), "W_k.weight": (8, 16), "W_v.weight": (8, 16),
                              "W_o.weight": (16, 16)}, "GroupedQueryAttention(16, 4, 2, 8)")
    set_params(attn)
    with torch.no_grad():
        out = attn(SEQ)
        expect_tensor(out, (1, 3, 16), "GroupedQueryAttention(16, 4, 2, 8)(x (1, 3, 16))")
        _causal_probe(attn, "GroupedQueryAttention")
        diagnose(out[0, :, :4], GQA_OUT, {
            tr("the kv heads are tiled (query head j uses kv head j % Hkv): use repeat_kv, which puts the copies of "
               "each kv head next to each other, so query heads 0 and 1 share kv head 0"): GQA_TILED,
            tr("RoPE is applied to v too; rotate only q and k (positions only decide WHERE to look)"): GQA_ROPE_V,
            tr("no RoPE at all: rotate q and k with apply_rope(q, self.cos, self.sin)"): GQA_NO_ROPE,
            tr("only q is rotated: rotate k as well, or q.k no longer depends on the distance between them"):
                GQA_ROPE_Q_ONLY,
        }, tr("the first 4 output features, with fixed weights"))
    expect_value_error(cls, 16, 4, 3, 8, what=tr("num_heads=4 with num_kv_heads=3"))
    buffers = {name for name, _ in attn.named_buffers()}
    if not {"cos", "sin"} <= buffers:
        fail(tr("cos and sin are not buffers of the module: a plain tensor attribute stays on the cpu when the model "
                "moves (model.to('cuda')); use self.register_buffer('cos', cos, persistent=False)"))
    if {"cos", "sin"} & set(attn.state_dict()):
        fail(tr("cos and sin are in the state_dict: register them with persistent=False (they follow from max_len and "
                "rope_base, so a checkpoint need not hold them)"))
    passed("GroupedQueryAttention")


# ---------------------------------------------------------------- LlamaBlock

@public_check
def check_LlamaBlock(cls) -> None:
    avoid_library_call(cls, ("RMSNorm", "rms_norm", "scaled_dot_product_attention", "MultiheadAttention",
                             "multi_head_attention_forward"),
                       tr("build the block from your RMSNorm, GroupedQueryAttention and SwiGLUFeedForward; the grader "
                          "gives zero to a LlamaBlock that calls nn.RMSNorm, F.rms_norm or PyTorch's attention"))
    block = cls(16, 4, 2, 24, 8)
    want = {"attn_norm.weight": (16,), "ffn_norm.weight": (16,), "attn.W_q.weight": (16, 16),
            "attn.W_k.weight": (8, 16), "attn.W_v.weight": (8, 16), "attn.W_o.weight": (16, 16),
            "ffn.w_gate.weight": (24, 16), "ffn.w_up.weight": (24, 16), "ffn.w_down.weight": (16, 24)}
    _expect_parameters(block, want, "LlamaBlock(16, 4, 2, 24, 8)")
    set_params(block)
    with torch.no_grad():
        out = block(SEQ)
        expect_tensor(out, (1, 3, 16), "LlamaBlock(...)(x (1, 3, 16))")
        for name in ("attn_norm", "ffn_norm"):  # a wrong norm would be blamed on attention below
            norm = getattr(block, name)
            if not close(norm(SEQ), _rms(SEQ, norm.weight, 1e-6), atol=1e-5):
                fail(tr("block.{name}, your RMSNorm, does not give x / sqrt(mean(x**2) + eps) * weight over the last "
                        "axis of a (1, 3, 16) input: fix RMSNorm first (run its check again)", name=name))
        _causal_probe(block, "LlamaBlock")
        diagnose(out[0, :, :4], BLOCK_OUT, {
            tr("this is the 2017 (Post-LN) order, norm(x + sublayer(x)). LLaMA normalises BEFORE each sublayer and "
               "leaves the residual stream alone: x + attn(attn_norm(x)), then x + ffn(ffn_norm(x))"): BLOCK_POST,
            tr("attention and feed-forward both read the block's input; the feed-forward block reads x AFTER the "
               "attention residual: x = x + attn(attn_norm(x)); x = x + ffn(ffn_norm(x))"): BLOCK_PARALLEL,
            tr("a residual connection is missing around the feed-forward block: x + ffn(ffn_norm(x))"):
                BLOCK_NO_FFN_RES,
            tr("one norm serves both sublayers: the feed-forward block reads ffn_norm(x), its own RMSNorm with its "
               "own weight, not attn_norm(x)"): BLOCK_ONE_NORM,
        }, tr("the first 4 output features, with fixed weights"))
        for setting, value in (("eps", 10.0), ("rope_base", 30.0)):
            other = cls(16, 4, 2, 24, 8, **{setting: value})
            set_params(other)
            for name in ("attn_norm", "ffn_norm") if setting == "eps" else ():
                norm = getattr(other, name)
                if not close(norm(SEQ), _rms(SEQ, norm.weight, value), atol=1e-5):
                    fail(tr("LlamaBlock(..., eps={value}): block.{name} does not use eps={value}: pass eps on to "
                            "both norms, RMSNorm(D, eps)", value=value, name=name))
            if close(other(SEQ), out, atol=1e-6):
                fail(tr("LlamaBlock(..., {setting}={value}) gives the output of the default {setting}: pass {setting} "
                        "on (RMSNorm(D, eps) for both norms, GroupedQueryAttention(..., max_len, rope_base))",
                        setting=setting, value=value))
    passed("LlamaBlock")


# ---------------------------------------------------------------- kv_cache_bytes

@public_check
def check_kv_cache_bytes(fn) -> None:
    out = fn(32, 32, 128, 4096, 1, 2)
    if out == 2 ** 30:
        fail(tr("that is 1 GiB, the keys alone: a cache holds keys AND values, so multiply by 2"))
    if type(out) is not int:
        fail(tr("return a Python int (a count of bytes), got {type} {out!r}", type=type(out).__name__, out=out))
    if out != 2 * 2 ** 30:
        fail(tr("LLaMA-2-7B (32 layers, 32 kv heads of 128 dims) at 4096 fp16 tokens needs 2 GiB = {expected:,} "
                "bytes; got {out:,}", expected=2 * 2 ** 30, out=out))
    if fn(32, 8, 128, 4096, 3, 2) != 3 * 2 ** 29:
        fail(tr("the batch size multiplies the cache: every sequence keeps its own keys and values"))
    expect_value_error(fn, 32, 0, 128, 4096, 1, 2, what="num_kv_heads = 0")
    passed("kv_cache_bytes")


# ---------------------------------------------------------------- sliding_window_mask

@public_check
def check_sliding_window_mask(fn) -> None:
    m = fn(5, 2)
    expect_tensor(m, (5, 5), "sliding_window_mask(5, 2)")
    if m.dtype != torch.bool:
        fail(tr("the mask should be bool (True = may attend), got {dtype}", dtype=m.dtype))
    t = torch.arange(5)
    d = t[:, None] - t[None, :]
    if torch.equal(m, (d >= 0) & (d <= 2)):
        mistake(tr("off by one: each query sees `window` keys ITSELF INCLUDED, so t - s < window, not <= window"))
    if torch.equal(m, d.abs() < 2):
        mistake(tr("the window must be causal: query t sees keys t - window + 1 .. t, never a later key"))
    if torch.equal(m, (d > 0) & (d <= 2)):
        mistake(tr("a query must see itself: 0 <= t - s < window"))
    if torch.equal(m, (d <= 0) & (d > -2)):
        mistake(tr("your mask is transposed: query t (row t) sees keys t .. t + window - 1, the future. Rows are "
                   "queries and columns keys: True where 0 <= t - s < window, with t the row"))
    if not torch.equal(m, (d >= 0) & (d < 2)):
        fail(tr("sliding_window_mask(5, 2) should be True where 0 <= t - s < 2; got {mask}", mask=m.int().tolist()))
    if not torch.equal(fn(4, 10), torch.ones(4, 4, dtype=torch.bool).tril()):
        fail(tr("a window at least as long as the sequence gives the ordinary causal mask"))
    on_meta = fn(3, 2, device=torch.device("meta"))
    if getattr(on_meta, "device", None) != torch.device("meta"):
        fail(tr("sliding_window_mask(3, 2, device='meta') is not on the meta device: create the mask on `device` "
                "(torch.arange(T, device=device)), so it lands where the model runs"))
    expect_value_error(fn, 5, 0, what="window = 0")
    passed("sliding_window_mask")


# ---------------------------------------------------------------- MoEFeedForward

@public_check
def check_MoEFeedForward(cls) -> None:
    moe = cls(8, 6, 4, 2)
    want = {"router.weight": (4, 8)}
    for e in range(4):
        want |= {f"experts.{e}.w_gate.weight": (6, 8), f"experts.{e}.w_up.weight": (6, 8),
                 f"experts.{e}.w_down.weight": (8, 6)}
    _expect_parameters(moe, want, "MoEFeedForward(8, 6, 4, 2)")
    _moe_params(moe)
    with torch.no_grad():
        result = moe(MOE_X)
        if not isinstance(result, tuple) or len(result) != 2:
            fail(tr("forward should return (output, router_logits), got {type}", type=type(result).__name__))
        out, logits = result
        expect_tensor(logits, (6, 4), tr("router_logits for x (2, 3, 8) and 4 experts (one row per token: B*T rows)"))
        diagnose(logits, MOE_LOGITS, {
            tr("return the router's LOGITS (before the softmax), not its probabilities"): MOE_LOGITS.softmax(-1),
        }, "router_logits")
        expect_tensor(out, (2, 3, 8), tr("the output for x (2, 3, 8)"))
        diagnose(out[:, :, :3], MOE_OUT, {
            tr("the kept probabilities must be renormalised to sum to 1 (divide by their sum)"): MOE_NO_RENORM,
            tr("renormalise by dividing by the sum of the kept probabilities, not with a second softmax"):
                MOE_SOFTMAX_TWICE,
            tr("the experts are chosen per TOKEN (top-k over the experts of each row), not once for the whole batch"):
                MOE_PER_BATCH,
            tr("the routing weights come from the softmax over ALL experts (then top-k, then renormalise), not from "
               "the raw logits"): MOE_RAW_LOGITS,
            tr("the router's softmax ran over the TOKENS (dim 0): each token's probabilities are a softmax over the "
               "experts, softmax(dim=-1)"): MOE_SOFTMAX_TOKENS,
        }, tr("the first 3 output features, with fixed weights"))
    out, _ = moe(MOE_X)
    (out * torch.linspace(-1, 1, out.numel()).view(out.shape)).sum().backward()
    grad = moe.router.weight.grad
    if grad is None or not grad.abs().sum() > 0:
        fail(tr("no gradient reached router.weight through the output: the routing weights (softmax, top-k, divided by "
                "their sum) must stay differentiable, or the router never learns. No .detach(), no torch.no_grad, "
                "no .item() or .tolist() on them"))
    expect_value_error(cls, 8, 6, 4, 5, what=tr("top_k = 5 with 4 experts"))
    passed("MoEFeedForward")


# ---------------------------------------------------------------- load_balancing_loss

@public_check
def check_load_balancing_loss(fn) -> None:
    logits = LB_LOGITS.clone().requires_grad_()
    out = fn(logits, 1)
    expect_tensor(out, (), "load_balancing_loss(logits (5, 3), top_k=1)")
    if not out.requires_grad:
        fail(tr("the loss carries no gradient: P_e, the mean router probability, must stay differentiable"))
    diagnose(out, LB_TOP1, {
        tr("f_e must count TOKENS (the fraction whose top-k includes e), not average probabilities: "
           "f_e = count_e / N"): LB_PROBS_ONLY,
        tr("multiply by the number of experts E: the loss is E * sum_e f_e P_e"): LB_TOP1 / 3,
        tr("P_e is the mean of the softmax PROBABILITIES over the tokens, not of the logits"): LB_MEAN_LOGITS,
        tr("P_e is the mean over the tokens of their softmax probabilities, not the softmax of the mean logits "
           "(the mean and the softmax do not commute): probs.mean(0)"): LB_SOFTMAX_MEAN,
    }, tr("load_balancing_loss(logits, top_k=1) for 5 tokens and 3 experts"), atol=1e-5)
    diagnose(fn(LB_LOGITS, 2), LB_TOP2, {
        tr("f_e counts the tokens whose top_k choices include e, so the f_e sum to top_k; do not divide by top_k"):
            LB_TOP2 / 2,
        tr("count every one of a token's top_k choices, not only its first"): LB_TOP1,
    }, "load_balancing_loss(logits, top_k=2)", atol=1e-5)
    expect_value_error(fn, LB_LOGITS, 4, what=tr("top_k = 4 with 3 experts"))
    passed("load_balancing_loss")


# ---------------------------------------------------------------- the stored numbers
# --- stored numbers: RMSNorm ---
RMS_OUT = torch.tensor([[0.365148, 0.365148, -1.095445, 2.921187], [0.707107, -0.353553, -0.707107, -1.414214]])
# mistake: subtracts the mean (that is LayerNorm without a bias)
RMS_CENTRED = torch.tensor([[-1.34164, -0.223607, -0.447213, 2.683281], [0.707107, -0.353553, -0.707107, -1.414214]])
# mistake: eps outside the square root
RMS_EPS_OUTSIDE = torch.tensor([[0.365148, 0.365148, -1.095445, 2.921186], [0.999001, -0.4995, -0.999001, -1.998002]])
# mistake: sum of squares instead of the mean
RMS_SUM = torch.tensor([[0.182574, 0.182574, -0.547723, 1.460593], [0.447214, -0.223607, -0.447214, -0.894427]])
# mistake: the weight never applied
RMS_NO_WEIGHT = torch.tensor([[0.365148, 0.730297, 1.095445, 1.460593], [0.707107, -0.707107, 0.707107, -0.707107]])
# mistake: divides by the standard deviation (x.std) instead of the root mean square
RMS_STD = torch.tensor([[0.774596, 0.774596, -2.323788, 6.196769], [0.865276, -0.432638, -0.865276, -1.730552]])
# --- end of stored numbers ---
# --- stored numbers: rope_frequencies ---
ROPE_COS_100 = torch.tensor([[1.0, 1.0, 1.0, 1.0],
                             [0.540302, 0.995004, 0.540302, 0.995004],
                             [-0.416147, 0.980067, -0.416147, 0.980067]])
ROPE_SIN_100 = torch.tensor([[0.0, 0.0, 0.0, 0.0],
                             [0.841471, 0.099833, 0.841471, 0.099833],
                             [0.909297, 0.198669, 0.909297, 0.198669]])
# mistake: interleaved layout: each frequency twice in a row (CS336's pairs 2i, 2i+1)
ROPE_COS_INTERLEAVED = torch.tensor([[1.0, 1.0, 1.0, 1.0],
                                     [0.540302, 0.540302, 0.995004, 0.995004],
                                     [-0.416147, -0.416147, 0.980067, 0.980067]])
# mistake: exponent i/d per column instead of 2i/d per pair
ROPE_COS_PER_COLUMN = torch.tensor([[1.0, 1.0, 1.0, 1.0],
                                    [0.540302, 0.950415, 0.540302, 0.950415],
                                    [-0.416147, 0.806578, -0.416147, 0.806578]])
# mistake: positions counted from 1
ROPE_COS_FROM_1 = torch.tensor([[0.540302, 0.995004, 0.540302, 0.995004],
                                [-0.416147, 0.980067, -0.416147, 0.980067],
                                [-0.989992, 0.955337, -0.989992, 0.955337]])
# --- end of stored numbers ---
# --- stored numbers: apply_rope ---
APPLY_OUT = torch.tensor([[[[1.0, 2.0, 3.0, 4.0], [1.031934, 3.834243, 8.540205, 9.235723]]]])
APPLY_OFFSET = torch.tensor([[[[-0.560694, 0.948209, 3.112173, 4.370458], [-3.188785, 1.430091, 7.989471, 9.897214]]]])
# mistake: rotates interleaved pairs (2i, 2i+1) instead of (i, i + Dh/2)
APPLY_INTERLEAVED = torch.tensor([[[[1.0, 2.0, 3.0, 4.0], [1.511359, 7.662623, 4.803155, 9.483128]]]])
# mistake: rotate-half with the sign on the wrong half (rotates the other way)
APPLY_WRONG_SIGN = torch.tensor([[[[1.0, 2.0, 3.0, 4.0], [7.743892, 7.792706, 3.74595, 6.266876]]]])
# --- end of stored numbers ---
# --- stored numbers: SwiGLUFeedForward ---
SWIGLU_OUT = torch.tensor([[0.016695, 0.024793, -0.046672, 0.031638],
                           [0.023204, 0.042811, -0.074966, 0.047831],
                           [0.071596, 0.047505, -0.129035, 0.108511]])
# mistake: SiLU on the up branch instead of the gate
SWIGLU_UP = torch.tensor([[0.017177, 0.026089, -0.048721, 0.03282],
                          [0.023644, 0.042109, -0.074558, 0.04804],
                          [0.070553, 0.045224, -0.125233, 0.106196]])
# mistake: SiLU after the product
SWIGLU_AFTER = torch.tensor([[0.026523, 0.0267, -0.058806, 0.044403],
                             [0.021195, 0.038853, -0.068172, 0.043574],
                             [0.062543, 0.043796, -0.115497, 0.095852]])
# mistake: GELU instead of SiLU
SWIGLU_GELU = torch.tensor([[0.012213, 0.024197, -0.04147, 0.025944],
                            [0.024982, 0.045932, -0.080518, 0.051423],
                            [0.080695, 0.051069, -0.142443, 0.121159]])
# mistake: sigmoid gate instead of SiLU (GLU, not SwiGLU)
SWIGLU_SIGMOID = torch.tensor([[-0.147967, 0.066805, 0.067193, -0.148048],
                               [0.074945, 0.15221, -0.258982, 0.160927],
                               [0.213424, 0.020636, -0.238374, 0.267584]])
# --- end of stored numbers ---
# --- stored numbers: GroupedQueryAttention ---
GQA_OUT = torch.tensor([[-0.26203, -0.074218, 0.123277, 0.304688],
                        [-0.062539, -0.058307, -0.046469, -0.028568],
                        [0.039984, -0.038884, -0.112679, -0.171774]])
# mistake: kv heads tiled with .repeat (query head j uses kv head j % Hkv)
GQA_TILED = torch.tensor([[-0.067614, -0.049899, -0.025674, 0.0019],
                          [4.6e-05, -0.000696, -0.001347, -0.001823],
                          [0.008726, 0.004046, -0.001161, -0.006217]])
# mistake: RoPE applied to v as well
GQA_ROPE_V = torch.tensor([[-0.26203, -0.074218, 0.123277, 0.304688],
                           [-0.026589, 0.000983, 0.028427, 0.052161],
                           [0.053685, 0.053929, 0.047137, 0.034196]])
# mistake: RoPE on q only
GQA_ROPE_Q_ONLY = torch.tensor([[-0.26203, -0.074218, 0.123277, 0.304688],
                                [-0.066811, -0.063273, -0.05148, -0.032971],
                                [0.032771, -0.055863, -0.13721, -0.200656]])
# mistake: no RoPE: cos = 1 and sin = 0 everywhere
GQA_NO_ROPE = torch.tensor([[-0.26203, -0.074218, 0.123277, 0.304688],
                            [-0.052888, -0.049678, -0.039987, -0.02508],
                            [0.060749, -0.007061, -0.07395, -0.131192]])
# --- end of stored numbers ---
# --- stored numbers: LlamaBlock ---
BLOCK_OUT = torch.tensor([[1.227954, 0.714024, -0.055665, -0.791248],
                          [0.388716, 0.852745, 0.935979, 0.470141],
                          [-0.943368, -0.32966, 0.454107, 0.938677]])
# mistake: Post-norm: normalises after each residual sum (the 2017 order)
BLOCK_POST = torch.tensor([[1.800445, 1.0612, -0.157542, -1.024215],
                           [0.748426, 1.333375, 1.32726, 0.699968],
                           [-1.415854, -0.423896, 0.759439, 1.375331]])
# mistake: parallel block: attention and feed-forward both read the same input
BLOCK_PARALLEL = torch.tensor([[1.432118, 0.329645, 0.397644, -1.182248],
                               [0.406823, 0.849181, 0.923969, 0.494248],
                               [-0.975903, -0.275231, 0.393539, 0.987848]])
# mistake: no residual around the feed-forward block
BLOCK_NO_FFN_RES = torch.tensor([[0.005317, -0.005875, 0.004732, -0.002219],
                                 [-0.00675, -0.013339, 0.029566, -0.037234],
                                 [0.016141, -0.020181, 0.018378, -0.011254]])
# mistake: one norm for both sublayers (attn_norm before the feed-forward block too)
BLOCK_ONE_NORM = torch.tensor([[1.238983, 0.697637, -0.038665, -0.803942],
                               [0.398742, 0.856744, 0.919114, 0.494991],
                               [-0.934956, -0.333165, 0.451691, 0.946315]])
# --- end of stored numbers ---
# --- stored numbers: MoEFeedForward ---
MOE_OUT = torch.tensor([[[0.127909, -0.217328, 0.134863],
                         [0.086905, -0.07527, 0.004104],
                         [-0.02356, -0.019911, 0.047637]],
                        [[0.090771, 0.015068, -0.10899],
                         [0.010166, 0.118754, -0.153752],
                         [-0.043484, 0.028892, 0.008551]]])
MOE_LOGITS = torch.tensor([[1.312117, -1.847193, 2.32172, -2.719705],
                           [1.491916, -1.656233, 1.766329, -1.81803],
                           [0.503099, -0.167948, -0.172625, 0.507704],
                           [-0.879789, 1.451885, -1.976357, 2.435751],
                           [-1.573543, 1.934463, -2.232016, 2.455882],
                           [-1.034746, 0.901783, -0.739344, 0.552329]])
# mistake: no renormalisation: the kept probabilities do not sum to 1
MOE_NO_RENORM = torch.tensor([[[0.125886, -0.21389, 0.132729],
                               [0.084022, -0.072773, 0.003968],
                               [-0.015615, -0.013197, 0.031572]],
                              [[0.08768, 0.014555, -0.105278],
                               [0.009997, 0.116776, -0.151191],
                               [-0.036291, 0.024112, 0.007137]]])
# mistake: softmax applied again to the kept probabilities instead of dividing by their sum
MOE_SOFTMAX_TWICE = torch.tensor([[[0.076545, -0.195072, 0.159318],
                                   [0.082771, -0.073062, 0.005568],
                                   [-0.023637, -0.019845, 0.047634]],
                                  [[0.072451, 0.02285, -0.100079],
                                   [0.002841, 0.120769, -0.148864],
                                   [-0.040917, 0.02542, 0.010182]]])
# mistake: experts chosen once per batch (top-k of the mean probability), not per token
MOE_PER_BATCH = torch.tensor([[[0.241245, -0.264579, 0.078654],
                               [0.133916, -0.097545, -0.015976],
                               [0.008661, -0.041454, 0.041461]],
                              [[0.133034, -0.005636, -0.12622],
                               [0.053716, 0.104182, -0.179683],
                               [-0.010166, -0.006987, 0.018614]]])
# mistake: routing weights from the raw logits (no softmax), renormalised
MOE_RAW_LOGITS = torch.tensor([[[0.087757, -0.19993, 0.15398],
                                [0.083849, -0.073638, 0.005186],
                                [-0.023448, -0.020008, 0.047641]],
                               [[0.075243, 0.021664, -0.101437],
                                [0.002507, 0.120861, -0.148641],
                                [-0.045197, 0.031209, 0.007463]]])
# mistake: router softmax over the tokens (dim 0) instead of over the experts
MOE_SOFTMAX_TOKENS = torch.tensor([[[0.082731, -0.197752, 0.156373],
                                    [0.072632, -0.067646, 0.009159],
                                    [-0.044714, -0.001751, 0.046832]],
                                   [[0.07086, 0.023526, -0.099305],
                                    [-0.006015, 0.123206, -0.142955],
                                    [-0.050194, 0.037967, 0.004288]]])
# --- end of stored numbers ---
# --- stored numbers: load_balancing_loss ---
LB_TOP1 = torch.tensor(1.011713)
LB_TOP2 = torch.tensor(2.0054)
# mistake: f_e from the probabilities instead of the top-k counts
LB_PROBS_ONLY = torch.tensor(1.001718)
# mistake: P_e from the mean logits instead of the mean probabilities
LB_MEAN_LOGITS = torch.tensor(2.22)
# mistake: P_e as the softmax of the mean logits (mean and softmax swapped)
LB_SOFTMAX_MEAN = torch.tensor(1.006774)
# --- end of stored numbers ---

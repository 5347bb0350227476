"""Hidden tests for chapter 02: softmax, scaled dot-product attention, SelfAttention."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.boundary.spec import (
    CORE,
    MULTI_HEAD_FUNCTION,
    SCALED_DOT_PRODUCT,
    SOFTMAX,
    Exercise,
    assert_pair,
    assert_raises_value_error,
    assert_tensor,
    changed_in_place,  # in-place changes are judged by the in-place rule only
    randn,
)

softmax = Exercise("softmax", points=2, forbidden=SOFTMAX)
scaled_dot_product_attention = Exercise("scaled_dot_product_attention", points=3,
                                        forbidden=SCALED_DOT_PRODUCT + MULTI_HEAD_FUNCTION)
SelfAttention = Exercise("SelfAttention", points=3, forbidden=SCALED_DOT_PRODUCT + MULTI_HEAD_FUNCTION)


# ---------------------------------------------------------------- softmax

@softmax.check("matches torch.softmax along the last axis by default")
def _(fn):
    x = 3 * randn(3, 4, 5, seed=201)
    assert_tensor(fn(x), F.softmax(x, dim=-1))


@softmax.check("matches torch.softmax along dim=0, dim=1 and dim=-2")
def _(fn):
    x = 2 * randn(3, 4, 5, seed=202)
    for dim in (0, 1, -2):
        assert_tensor(fn(x, dim=dim), F.softmax(x, dim=dim), what=f"softmax(x, dim={dim})")


@softmax.check("inputs around 1e4 give finite, correct probabilities (subtract the max first)",
               states=("finite for inputs around 1e4",))
def _(fn):
    x = 1e4 + 5 * randn(4, 6, seed=203)
    x[1] = torch.tensor([1e4, -1e4, 0.0, 9999.0, -5000.0, 1e4])
    x[2] = -1e4 + 5 * randn(6, seed=207)  # a row far below the others
    out = fn(x)
    if type(out) is torch.Tensor and not torch.isfinite(out).all():
        raise AssertionError("inputs around 1e4 gave inf or nan: exp overflows unless you subtract the max")
    # rtol 1e-3: float32 has only ~3 decimals to spare next to 1e4 (x - logsumexp loses the rest).
    assert_tensor(out, F.softmax(x, dim=-1), atol=1e-5, rtol=1e-3)


@softmax.check("-inf entries get probability exactly 0, the others still sum to 1",
               states=("-inf (they get probability 0)",))
def _(fn):
    x = randn(3, 5, seed=204)
    x[0, 1] = x[1, 0] = x[1, 4] = x[2, 2] = float("-inf")
    out = fn(x)
    assert_tensor(out, F.softmax(x, dim=-1))
    if not (out[torch.isinf(x)] == 0).all():
        raise AssertionError("a -inf input should give probability exactly 0")


@softmax.check("float64 input stays float64 and matches to 1e-12", states=("same shape and dtype",))
def _(fn):
    x = 4 * randn(2, 7, seed=205).double()
    assert_tensor(fn(x, dim=1), F.softmax(x, dim=1), atol=1e-12, rtol=1e-10)


@softmax.side_check("does not modify its input in place", states=("do not modify `x` in place",))
def _(fn):
    x = 10 * randn(3, 6, seed=206)
    before = x.clone()
    fn(x)
    if changed_in_place(x, before):
        raise AssertionError("softmax changed its input x in place (e.g. `x -= x.max()`); work on a new tensor")


# ---------------------------------------------------------------- scaled dot-product attention

def attention_oracle(q, k, v, mask=None):
    """PyTorch's SDPA for the output, the textbook formula (with F.softmax) for the weights."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return out, F.softmax(scores, dim=-1)


# Each exercise is graded on its own: the learner's helpers are replaced by correct ones.
scaled_dot_product_attention.stand_ins["softmax"] = lambda x, dim=-1: F.softmax(x, dim=dim)
SelfAttention.stand_ins["scaled_dot_product_attention"] = attention_oracle


def check_attention(result, q, k, v, mask=None, atol=1e-5):
    out, weights = assert_pair(result)
    want_out, want_weights = attention_oracle(q, k, v, mask)
    assert_tensor(weights, want_weights, atol=atol, what="weights")
    assert_tensor(out, want_out, atol=atol, what="output")
    return out, weights


@scaled_dot_product_attention.check("unbatched q (T, Dk), k (S, Dk), v (S, Dv) with T != S, Dk != Dv")
def _(fn):
    q, k, v = randn(3, 4, seed=211), randn(5, 4, seed=212), randn(5, 2, seed=213)
    check_attention(fn(q, k, v), q, k, v)


@scaled_dot_product_attention.check("batched (B, H, T, Dk) input; weights (B, H, T, S) sum to 1 over the keys")
def _(fn):
    q, k, v = randn(2, 3, 4, 8, seed=214), randn(2, 3, 6, 8, seed=215), randn(2, 3, 6, 5, seed=216)
    _, weights = check_attention(fn(q, k, v), q, k, v)
    assert_tensor(weights.sum(-1), torch.ones(2, 3, 4), what="weights summed over the keys")


@scaled_dot_product_attention.check("fixed values pin the scale 1/sqrt(Dk) (not 1/Dk, 1/sqrt(Dv) or none)")
def _(fn):
    q = torch.tensor([[1.0, 2.0, 0.0, 1.0]])  # Dk = 4, so the scale is 1/2
    k = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])  # Dv = 2
    scores = [1.0 / 2, 3.0 / 2, 4.0 / 2]  # q . k_s / sqrt(4)
    z = sum(math.exp(s) for s in scores)
    w = torch.tensor([[math.exp(s) / z for s in scores]])
    out, weights = assert_pair(fn(q, k, v))
    assert_tensor(weights, w, what="weights")
    assert_tensor(out, w @ v, what="output")


@scaled_dot_product_attention.check("a (T, S) mask: masked keys get weight exactly 0, the rest renormalised",
                                    states=("weight exactly 0", "before the softmax"))
def _(fn):
    q, k, v = randn(2, 4, 3, seed=217), randn(2, 5, 3, seed=218), randn(2, 5, 2, seed=219)
    mask = torch.tensor([[1, 1, 0, 1, 0], [1, 0, 0, 0, 0], [0, 1, 1, 1, 1], [1, 1, 1, 0, 1]], dtype=torch.bool)
    _, weights = check_attention(fn(q, k, v, mask), q, k, v, mask)
    if not (weights[:, ~mask] == 0).all():
        raise AssertionError("masked keys (mask False) should get weight exactly 0")


@scaled_dot_product_attention.check("a (B, 1, 1, S) padding mask broadcasts over heads and queries")
def _(fn):
    q, k, v = randn(2, 2, 3, 4, seed=220), randn(2, 2, 5, 4, seed=221), randn(2, 2, 5, 3, seed=222)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 1, 5)
    check_attention(fn(q, k, v, mask), q, k, v, mask)


@scaled_dot_product_attention.check("a causal (T, T) mask gives the same result as is_causal=True")
def _(fn):
    q, k, v = randn(1, 6, 4, seed=223), randn(1, 6, 4, seed=224), randn(1, 6, 3, seed=225)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    out, weights = check_attention(fn(q, k, v, mask), q, k, v, mask)
    assert_tensor(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5)
    if not (weights[0].triu(1) == 0).all():
        raise AssertionError("a causal mask should give weight exactly 0 to every later position")


@scaled_dot_product_attention.check("gradients reach q, k and v and match PyTorch's")
def _(fn):
    seeds = (226, 227, 228)
    shapes = ((2, 3, 4), (2, 5, 4), (2, 5, 2))
    ours = [randn(*s, seed=n).requires_grad_() for s, n in zip(shapes, seeds)]
    theirs = [randn(*s, seed=n).requires_grad_() for s, n in zip(shapes, seeds)]
    out, _ = assert_pair(fn(*ours))
    if type(out) is not torch.Tensor or not out.requires_grad:
        raise AssertionError("the output is cut off from the autograd graph (no .detach(), .numpy() or new tensors)")
    upstream = randn(2, 3, 2, seed=229)
    (out * upstream).sum().backward()
    (F.scaled_dot_product_attention(*theirs) * upstream).sum().backward()
    for name, a, b in zip("qkv", ours, theirs):
        if a.grad is None:
            raise AssertionError(f"no gradient reached {name}")
        assert_tensor(a.grad, b.grad, atol=1e-5, what=f"the gradient of {name}")


@scaled_dot_product_attention.side_check("ValueError for mismatched Dk, mismatched S, or a mask that is not bool",
                                         states=("not a bool tensor",))
def _(fn):
    q, k, v = randn(3, 4, seed=230), randn(5, 4, seed=231), randn(5, 2, seed=232)
    assert_raises_value_error(fn, q, randn(5, 3, seed=233), v)
    assert_raises_value_error(fn, q, k, randn(4, 2, seed=234))
    assert_raises_value_error(fn, q, k, v, torch.ones(3, 5))


@scaled_dot_product_attention.check("ValueError for a mask that does not broadcast to the scores: a (B, 1, 1, S) "
                                    "mask with 3-d inputs would add an axis to the output",
                                    states=("does not broadcast to the scores",))
def _(fn):
    q, k, v = randn(2, 3, 4, seed=235), randn(2, 5, 4, seed=236), randn(2, 5, 2, seed=237)
    padding = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert_raises_value_error(fn, q, k, v, padding.view(2, 1, 1, 5))
    check_attention(fn(q, k, v, padding.view(2, 1, 5)), q, k, v, padding.view(2, 1, 5))


# ---------------------------------------------------------------- SelfAttention

def build(cls, d_model, d_k, d_v, bias, seed):
    """A learner module with every parameter set from seeded tensors; returns it and the tensors."""
    module = cls(d_model, d_k, d_v, bias=bias)
    params = {"W_q": (randn(d_k, d_model, seed=seed), randn(d_k, seed=seed + 1) if bias else None),
              "W_k": (randn(d_k, d_model, seed=seed + 2), randn(d_k, seed=seed + 3) if bias else None),
              "W_v": (randn(d_v, d_model, seed=seed + 4), randn(d_v, seed=seed + 5) if bias else None)}
    with torch.no_grad():
        for name, (weight, b) in params.items():
            layer = getattr(module, name)
            layer.weight.copy_(weight)
            if bias:
                layer.bias.copy_(b)
    return module, params


def self_attention_oracle(x, params, mask=None):
    q, k, v = (F.linear(x, w, b) for w, b in (params["W_q"], params["W_k"], params["W_v"]))
    return attention_oracle(q, k, v, mask)


def check_self_attention(module, params, x, mask=None):
    result = module(x) if mask is None else module(x, mask)
    out, weights = assert_pair(result)
    want_out, want_weights = self_attention_oracle(x, params, mask)
    assert_tensor(weights, want_weights, atol=1e-5, what="weights")
    assert_tensor(out, want_out, atol=1e-5, what="output")
    return out, weights


def linear_shape(module, name, out_features, in_features, bias):
    layer = getattr(module, name, None)
    if not isinstance(layer, nn.Linear):
        raise AssertionError(f"{name} should be an nn.Linear, got {type(layer).__name__}")
    if (layer.out_features, layer.in_features) != (out_features, in_features):
        raise AssertionError(f"{name} maps {layer.in_features} -> {layer.out_features}, "
                             f"expected {in_features} -> {out_features}")
    if bias and layer.bias is None:
        raise AssertionError(f"{name} should have a bias (bias=True)")
    if not bias and layer.bias is not None:
        raise AssertionError(f"{name} should have no bias (bias=False)")


@SelfAttention.check("W_q, W_k (D -> d_k) and W_v (D -> d_v) are nn.Linear without bias by default",
                     states=("W_q, W_k, W_v: nn.Linear", "W_q, W_k: D -> d_k", "W_v: D -> d_v"), part="__init__")
def _(cls):
    module = cls(6, 4, 3)
    if not isinstance(module, nn.Module):
        raise AssertionError("SelfAttention should subclass nn.Module")
    for name, out_features in (("W_q", 4), ("W_k", 4), ("W_v", 3)):
        linear_shape(module, name, out_features, 6, bias=False)


@SelfAttention.check("bias=True gives each of W_q, W_k, W_v a bias", part="__init__")
def _(cls):
    module = cls(5, 2, 7, bias=True)
    for name, out_features in (("W_q", 2), ("W_k", 2), ("W_v", 7)):
        linear_shape(module, name, out_features, 5, bias=True)


# The mask is the argument the layer is used with (a decoder's causal mask, a batch's padding): the
# value checks run with one as well as without, so an answer that ignores it keeps about a quarter.
@SelfAttention.check("with set weights (d_k != d_v): output (B, T, d_v) and weights (B, T, T) are right, "
                     "without a mask and with a causal one", weight=CORE)
def _(cls):
    module, params = build(cls, 6, 4, 3, bias=False, seed=240)
    x = randn(2, 5, 6, seed=250)
    check_self_attention(module, params, x)
    check_self_attention(module, params, x, torch.ones(5, 5, dtype=torch.bool).tril())


@SelfAttention.check("with set weights and biases (bias=True), without a mask and with a padding one", weight=CORE)
def _(cls):
    module, params = build(cls, 5, 3, 2, bias=True, seed=241)
    x = randn(3, 4, 5, seed=251)
    check_self_attention(module, params, x)
    padding = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.bool).view(3, 1, 4)
    check_self_attention(module, params, x, padding)


@SelfAttention.check("a causal (T, T) mask and a (B, 1, T) padding mask reach the attention", weight=CORE)
def _(cls):
    module, params = build(cls, 4, 3, 5, bias=False, seed=242)
    x = randn(2, 5, 4, seed=252)
    _, weights = check_self_attention(module, params, x, torch.ones(5, 5, dtype=torch.bool).tril())
    if not (weights.triu(1) == 0).all():
        raise AssertionError("with a causal mask every later position should get weight exactly 0")
    padding = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 5)
    check_self_attention(module, params, x, padding)


@SelfAttention.check("permuting the tokens (and the padding mask with them) permutes the output and the weights; "
                     "padded keys keep weight 0")
def _(cls):
    module, _ = build(cls, 6, 4, 4, bias=True, seed=243)
    x = randn(2, 5, 6, seed=253)
    padding = torch.tensor([[1, 1, 0, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 5)
    perm = torch.tensor([3, 0, 4, 2, 1])
    out, weights = assert_pair(module(x, padding))
    out_p, weights_p = assert_pair(module(x[:, perm], padding[..., perm]))
    assert_tensor(out_p, out[:, perm].detach(), atol=1e-5, what="output for the permuted input")
    assert_tensor(weights_p, weights[:, perm][:, :, perm].detach(), atol=1e-5,
                  what="weights for the permuted input")
    if not (weights_p.detach().masked_select(~padding[..., perm]) == 0).all():
        raise AssertionError("keys where the padding mask is False should get weight exactly 0")


@SelfAttention.check("gradients reach W_q, W_k and W_v")
def _(cls):
    module, params = build(cls, 4, 3, 2, bias=False, seed=244)
    x = randn(2, 3, 4, seed=254)
    out, _ = assert_pair(module(x))
    upstream = randn(2, 3, 2, seed=255)
    (out * upstream).sum().backward()
    ref = {name: w.clone().requires_grad_() for name, (w, _) in params.items()}
    q, k, v = (x @ ref[name].T for name in ("W_q", "W_k", "W_v"))
    (F.scaled_dot_product_attention(q, k, v) * upstream).sum().backward()
    for name in ("W_q", "W_k", "W_v"):
        grad = getattr(module, name).weight.grad
        if grad is None:
            raise AssertionError(f"no gradient reached {name}.weight")
        assert_tensor(grad, ref[name].grad, atol=1e-5, what=f"the gradient of {name}.weight")


@SelfAttention.side_check("x whose last size is not d_model raises ValueError", states=("not (B, T, d_model)",))
def _(cls):
    module = cls(6, 4, 3)
    assert_raises_value_error(module, randn(2, 5, 7, seed=256))

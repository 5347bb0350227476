"""Public checks for chapter 02. The expected numbers were computed once from the fixed inputs below."""
from __future__ import annotations

import torch
import torch.nn as nn

from course.checks import (
    avoid_library_call,
    close,
    diagnose,
    expect_pair,
    expect_tensor,
    expect_value_error,
    fail,
    mistake,
    passed,
    public_check,
    tr,
)

# ---------------------------------------------------------------- softmax

A = torch.tensor([[1.0, 2.0, 3.0], [2.0, 0.0, -1.0]])
# --- stored numbers: softmax ---
# softmax along dim=-1
A_ROWS = [[0.090031, 0.244728, 0.665241], [0.843795, 0.114195, 0.04201]]
# softmax along dim=0
A_COLS = [[0.268941, 0.880797, 0.982014], [0.731059, 0.119203, 0.017986]]
# exp / sum of everything
A_WHOLE = [[0.069789, 0.189707, 0.515677], [0.189707, 0.025674, 0.009445]]
# --- end of stored numbers ---


@public_check
def check_softmax(softmax) -> None:
    avoid_library_call(softmax, ("softmax", "log_softmax"),
                       tr("your code calls a library softmax: write it yourself (the grader gives zero to a solution "
                          "that calls one)"))
    x = A.clone()
    out = softmax(x)
    if not torch.equal(x, A):
        fail(tr("softmax changed its input in place (e.g. `x -= x.max(...)`): compute `x - m` into a new tensor"))
    expect_tensor(out, (2, 3), "softmax(x)")
    diagnose(out, A_ROWS, {
        tr("softmax(x) normalised the columns (dim=0); the default dim=-1 means each row sums to 1"): A_COLS,
        tr("you divided by the sum of the whole tensor; sum along `dim` with keepdim=True"): A_WHOLE,
    }, what="softmax(x)")
    out = softmax(A, dim=0)
    expect_tensor(out, (2, 3), "softmax(x, dim=0)")
    if not close(out.sum(0), [1.0, 1.0, 1.0]):
        mistake(tr("softmax(x, dim=0) should sum to 1 down each column, but the column sums are {sums}: "
                "take both the max and the sum along `dim`", sums=out.sum(0).tolist()))
    diagnose(out, A_COLS, {
        tr("softmax(x, dim=0) normalised the rows: your function ignores its `dim` argument"): A_ROWS,
    }, what="softmax(x, dim=0)")

    big = torch.tensor([[1e4, 1e4 - 1, 1e4 - 2], [-1e4, -1e4 - 1, -1e4 - 2]])
    out = softmax(big)
    expect_tensor(out, (2, 3), "softmax(big)")
    if not torch.isfinite(out).all():
        if torch.isfinite(out[0]).all():
            mistake(tr("the row near -1e4 came out as nan: you subtracted the max of the whole tensor; "
                    "take the max along `dim` (keepdim=True) so every row has an entry exp(0) = 1"))
        mistake(tr("inputs near 1e4 give inf/nan: exp(1e4) overflows; subtract the max along `dim` before exp"))
    # = softmax([0, -1, -2])
    diagnose(out, [A_ROWS[0][::-1]] * 2, {}, what=tr("softmax of inputs near +-1e4"), atol=1e-3)

    out = softmax(torch.tensor([[0.0, float("-inf"), 0.0]]))
    diagnose(out, [[0.5, 0.0, 0.5]], {}, what="softmax([0, -inf, 0])")
    passed("softmax")


# ---------------------------------------------------------------- scaled dot-product attention

Q = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 1.0]])  # T = 2, Dk = 4
K = torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0], [2.0, 0.0, 1.0, 0.0]])  # S = 3
V = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # Dv = 2
MASK = torch.tensor([[True, True, False], [False, True, True]])

# --- stored numbers: scaled_dot_product_attention ---
W_OK = [[0.211942, 0.211942, 0.576117], [0.331499, 0.546549, 0.121952]]
OUT_OK = [[0.788058, 0.788058], [0.453451, 0.668501]]
# mistake: no scale
W_NO_SCALE = [[0.106507, 0.106507, 0.786986], [0.259496, 0.705385, 0.035119]]
# mistake: scales by d_k instead of sqrt(d_k)
W_BY_DK = [[0.274069, 0.274069, 0.451863], [0.345954, 0.444214, 0.209832]]
# mistake: scales by sqrt(d_v)
W_BY_DV = [[0.163579, 0.163579, 0.672842], [0.305695, 0.619985, 0.07432]]
# mistake: softmax over the queries (dim=-2)
W_OVER_QUERIES = [[0.377541, 0.268941, 0.817574], [0.622459, 0.731059, 0.182426]]
W_MASK = [[0.5, 0.5, 0.0], [0.0, 0.817574, 0.182426]]
OUT_MASK = [[0.5, 0.5], [0.182426, 1.0]]
# mistake: mask polarity reversed (True = blocked)
W_MASK_REVERSED = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
# mistake: mask applied after the softmax (not renormalised)
W_MASK_AFTER_SOFTMAX = [[0.211942, 0.211942, 0.0], [0.0, 0.546549, 0.121952]]
# mistake: masked scores set to 0 instead of -inf
W_MASK_ZERO = [[0.383652, 0.383652, 0.232697], [0.154281, 0.691438, 0.154281]]
# --- end of stored numbers ---
W_WRONG = {
    tr("you forgot to divide the scores by sqrt(d_k)"): W_NO_SCALE,
    tr("you divided the scores by d_k; divide by sqrt(d_k)"): W_BY_DK,
    tr("you divided by sqrt(d_v) (the size of v); the scale uses d_k, the size of q and k"): W_BY_DV,
    tr("your weights sum to 1 over the queries (dim=-2), not over the keys (dim=-1)"): W_OVER_QUERIES,
}
W_MASK_WRONG = {
    tr("the mask is reversed: True means 'may attend', so fill the scores where the mask is False"): W_MASK_REVERSED,
    tr("you applied the mask after the softmax, so the remaining weights no longer sum to 1; "
       "fill the masked scores with -inf before the softmax"): W_MASK_AFTER_SOFTMAX,
    tr("masked scores were set to 0, which still gets weight exp(0); fill them with -inf"): W_MASK_ZERO,
}


@public_check
def check_scaled_dot_product_attention(attention) -> None:
    avoid_library_call(attention, ("scaled_dot_product_attention",),
                       tr("your code calls F.scaled_dot_product_attention: write it yourself (the grader gives zero to "
                          "a solution that calls it)"))
    out, weights = expect_pair(attention(Q, K, V), "scaled_dot_product_attention(q, k, v)")
    if type(weights) is torch.Tensor and tuple(weights.shape) == (3, 2):
        mistake(tr("weights have shape (S, T) = (3, 2); they should be (T, S): one row per query, one column per key"))
    diagnose(weights, W_OK, W_WRONG, what=tr("the weights"))
    expect_tensor(out, (2, 2), tr("the output (T, Dv)"))
    if not close(out, OUT_OK):
        fail(tr("the weights are right but the output is not: it should be weights @ v; got {out}", out=out.tolist()))

    out, weights = expect_pair(attention(Q, K, V, MASK), "scaled_dot_product_attention(q, k, v, mask)")
    diagnose(weights, W_MASK, W_MASK_WRONG, what=tr("the masked weights"))
    diagnose(out, OUT_MASK, {}, what=tr("the masked output"))

    try:
        out, weights = expect_pair(attention(Q.expand(2, 2, 4), K.expand(2, 3, 4), V.expand(2, 3, 2)),
                             tr("batched attention"))
    except RuntimeError as err:
        fail(tr("batched input (B, T, Dk) raised {err!r}: transpose the last two axes with "
                "k.transpose(-2, -1) (k.T reverses every axis)", err=err))
    diagnose(weights, [W_OK, W_OK], {}, what=tr("the batched weights"))
    diagnose(out, [OUT_OK, OUT_OK], {}, what=tr("the batched output"))

    expect_value_error(attention, Q, K[:, :3], V, what=tr("q and k with different Dk"))
    expect_value_error(attention, Q, K, V[:2], what=tr("k and v with different lengths S"))
    expect_value_error(attention, Q, K, V, MASK.float(), what=tr("a float mask"))
    expect_value_error(attention, Q.expand(2, 2, 4), K.expand(2, 3, 4), V.expand(2, 3, 2),
                       MASK[None, None].expand(2, 1, 2, 3),
                       what=tr("a (B, 1, T, S) mask with 3-d inputs (it would add an axis to the output)"))
    passed("scaled_dot_product_attention")


# ---------------------------------------------------------------- SelfAttention

X = torch.tensor([[[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]]])  # (1, 3, 4)
WQ = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
WK = torch.tensor([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
WV = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 2.0]])
# --- stored numbers: SelfAttention ---
SA_W = [[[0.264458, 0.471083, 0.264458], [0.390414, 0.219172, 0.390414], [0.264458, 0.264458, 0.471083]]]
SA_OUT = [[[0.793375, 2.206625], [1.171242, 1.828758], [1.206625, 1.793375]]]
# mistake: uses W_q for the keys
SA_W_KEYS_FROM_WQ = [[[0.390414, 0.219172, 0.390414], [0.219172, 0.390414, 0.390414], [0.264458, 0.264458, 0.471083]]]
# mistake: keys and queries swapped (weights over queries)
SA_W_SWAPPED = [[[0.219172, 0.390414, 0.390414], [0.390414, 0.219172, 0.390414], [0.167943, 0.29916, 0.532897]]]
# mistake: returns the weights transposed
SA_W_TRANSPOSED = [[[0.264458, 0.390414, 0.264458], [0.471083, 0.219172, 0.264458], [0.264458, 0.390414, 0.471083]]]
SA_W_CAUSAL = [[[1.0, 0.0, 0.0], [0.640457, 0.359543, 0.0], [0.264458, 0.264458, 0.471083]]]
# --- end of stored numbers ---
SA_W_WRONG = {
    tr("the keys were computed with W_q: use W_k for the keys"): SA_W_KEYS_FROM_WQ,
    tr("queries and keys are swapped: q = W_q(x), k = W_k(x)"): SA_W_SWAPPED,
    tr("the weights are transposed: return them as (B, T_query, T_key), each row summing to 1"): SA_W_TRANSPOSED,
}


def _linear(module, name, out_features, in_features, bias):
    layer = getattr(module, name, None)
    if not isinstance(layer, nn.Linear):
        fail(tr("self.{name} should be an nn.Linear, got {type}", name=name, type=type(layer).__name__))
    if (layer.in_features, layer.out_features) != (in_features, out_features):
        fail(tr("self.{name} maps {got_in} -> {got_out}; expected {in_features} -> {out_features}", name=name,
                got_in=layer.in_features, got_out=layer.out_features, in_features=in_features,
                out_features=out_features))
    if (layer.bias is not None) != bias:
        if bias:
            fail(tr("self.{name} should have a bias when bias=True: pass bias=bias to nn.Linear", name=name))
        fail(tr("self.{name} should not have a bias when bias=False: pass bias=bias to nn.Linear", name=name))


@public_check
def check_SelfAttention(cls) -> None:
    avoid_library_call(cls, ("scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward"),
                       tr("your SelfAttention calls a library attention: use your own scaled_dot_product_attention"))
    module = cls(4, 3, 2)
    if not isinstance(module, nn.Module):
        fail(tr("SelfAttention should subclass nn.Module (and call super().__init__())"))
    for name, size in (("W_q", 3), ("W_k", 3), ("W_v", 2)):
        _linear(module, name, size, 4, bias=False)
    with_bias = cls(4, 3, 2, bias=True)
    for name, size in (("W_q", 3), ("W_k", 3), ("W_v", 2)):
        _linear(with_bias, name, size, 4, bias=True)

    with torch.no_grad():
        module.W_q.weight.copy_(WQ)
        module.W_k.weight.copy_(WK)
        module.W_v.weight.copy_(WV)
    out, weights = expect_pair(module(X), "SelfAttention.forward(x)")
    expect_tensor(out, (1, 3, 2), tr("the output (B, T, d_v)"))
    diagnose(weights, SA_W, SA_W_WRONG, what=tr("the weights"))
    diagnose(out, SA_OUT, {}, what=tr("the output"))
    if not out.requires_grad:
        fail(tr("the output is cut off from autograd, so W_q, W_k, W_v could never be trained: "
                "do not .detach() or rebuild tensors inside forward"))
    (out * torch.arange(1.0, 7.0).view(1, 3, 2)).sum().backward()
    for name in ("W_q", "W_k", "W_v"):
        if getattr(module, name).weight.grad is None:
            fail(tr("no gradient reached {name}.weight: do not .detach() or rebuild tensors inside forward", name=name))

    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    _, weights = expect_pair(module(X, causal), "SelfAttention.forward(x, mask)")
    if close(weights, SA_W):
        fail(tr("the mask made no difference: pass `mask` on to scaled_dot_product_attention"))
    diagnose(weights, SA_W_CAUSAL, {}, what=tr("the weights with a causal mask"))
    expect_value_error(module, torch.ones(1, 3, 5), what=tr("x whose last size is not d_model"))
    passed("SelfAttention")

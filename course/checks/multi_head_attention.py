"""Public checks for chapter 04. Between the `# --- stored numbers` lines are what the reference solution
and known mistakes give on the fixed inputs here; `python -m tests.snapshots --write` computes them again."""
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
    passed,
    public_check,
    tr,
)


def _call(fn, *args, what: str):
    """Call the learner's function; turn the classic reshape errors into a hint."""
    try:
        return fn(*args)
    except RuntimeError as err:
        if "view" in str(err) or "contiguous" in str(err) or "stride" in str(err):
            fail(tr("{what} raised `{err}`. After a transpose the numbers are no longer laid out in "
                    "memory in the new order, so `.view` cannot regroup them: use `.reshape(...)` "
                    "(or `.contiguous().view(...)`).", what=what, err=err))
        raise


# ---------------------------------------------------------------- split_heads

X_SPLIT = torch.arange(12.0).view(1, 2, 6)  # B=1, T=2, D=6: token 0 holds 0..5, token 1 holds 6..11
# --- stored numbers: split_heads ---
SPLIT = [[[[0.0, 1.0], [6.0, 7.0]], [[2.0, 3.0], [8.0, 9.0]], [[4.0, 5.0], [10.0, 11.0]]]]
# mistake: view straight to (B, H, T, Dh) without transpose (mixes tokens)
SPLIT_NO_TRANSPOSE = [[[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]], [[8.0, 9.0], [10.0, 11.0]]]]
# mistake: strided heads: head h gets features h, h+H, h+2H, ...
SPLIT_STRIDED = [[[[0.0, 3.0], [6.0, 9.0]], [[1.0, 4.0], [7.0, 10.0]], [[2.0, 5.0], [8.0, 11.0]]]]
# --- end of stored numbers ---
SPLIT_WRONG = {
    tr("you reshaped straight to (B, H, T, Dh): that cuts the flat memory in the wrong places, so head 0 "
       "holds the whole of token 0 instead of features 0:2 of every token. View as (B, T, H, Dh) first, "
       "then swap the T and H axes with .transpose(1, 2)"): SPLIT_NO_TRANSPOSE,
    tr("your heads take every H-th feature (0, 3 / 1, 4 / ...); head h should hold the contiguous slice "
       "h*Dh:(h+1)*Dh, i.e. view the last axis as (H, Dh), not (Dh, H)"): SPLIT_STRIDED,
}


@public_check
def check_split_heads(split_heads) -> None:
    out = _call(split_heads, X_SPLIT, 3, what="split_heads(x, 3)")
    if type(out) is torch.Tensor and tuple(out.shape) == (1, 2, 3, 2):
        fail(tr("split_heads returned (B, T, H, Dh) = (1, 2, 3, 2): move the head axis in front of the "
                "tokens with .transpose(1, 2), so the result is (B, H, T, Dh)"))
    expect_tensor(out, (1, 3, 2, 2), "split_heads(x (1, 2, 6), 3)")
    diagnose(out, SPLIT, SPLIT_WRONG, what="split_heads(x, 3)")
    out = _call(split_heads, X_SPLIT, 1, what="split_heads(x, 1)")
    diagnose(out, X_SPLIT.unsqueeze(1), {}, what="split_heads(x, 1)")
    expect_value_error(split_heads, X_SPLIT, 4, what=tr("split_heads(x, 4) with D = 6"))
    passed("split_heads")


# ---------------------------------------------------------------- merge_heads

X_MERGE = torch.arange(12.0).view(1, 3, 2, 2)  # B=1, H=3, T=2, Dh=2
# --- stored numbers: merge_heads ---
MERGE = [[[0.0, 1.0, 4.0, 5.0, 8.0, 9.0], [2.0, 3.0, 6.0, 7.0, 10.0, 11.0]]]
# mistake: reshape without transposing back (mixes tokens and heads)
MERGE_NO_TRANSPOSE = [[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]]]
# mistake: permutes in the wrong order: features interleaved across heads
MERGE_INTERLEAVED = [[[0.0, 4.0, 8.0, 1.0, 5.0, 9.0], [2.0, 6.0, 10.0, 3.0, 7.0, 11.0]]]
# --- end of stored numbers ---
MERGE_WRONG = {
    tr("you reshaped (B, H, T, Dh) straight to (B, T, H*Dh): token 0 now holds all of head 0 (both tokens). "
       "Swap the H and T axes back with .transpose(1, 2) first, then reshape"): MERGE_NO_TRANSPOSE,
    tr("the heads are interleaved feature by feature; each head's Dh features should sit side by side "
       "(order the axes (B, T, H, Dh) before flattening the last two, e.g. .transpose(1, 2))"): MERGE_INTERLEAVED,
}


@public_check
def check_merge_heads(merge_heads) -> None:
    out = _call(merge_heads, X_MERGE, what="merge_heads(x)")
    expect_tensor(out, (1, 2, 6), "merge_heads(x (1, 3, 2, 2))")
    diagnose(out, MERGE, MERGE_WRONG, what="merge_heads(x)")
    # The output of attention is usually not contiguous: merge a transposed tensor too.
    y = X_MERGE.transpose(2, 3).contiguous().transpose(2, 3)
    out = _call(merge_heads, y, what=tr("merge_heads of a non-contiguous tensor"))
    diagnose(out, MERGE, {}, what=tr("merge_heads of a non-contiguous tensor"))
    expect_value_error(merge_heads, torch.zeros(1, 2, 6), what=tr("merge_heads of a 3-d tensor"))
    passed("merge_heads")


# ---------------------------------------------------------------- MultiHeadAttention

WQ = torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, -1]])
WK = torch.tensor([[0.0, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 1], [0, 1, 1, 0]])
WV = torch.tensor([[1.0, 0, 1, 0], [0, 1, 0, 2], [0, 0, 1, 0], [1, 1, 0, 0]])
WO = torch.tensor([[1.0, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0], [1, 0, -1, 0]])
X = torch.tensor([[[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]]])  # (1, 3, 4)
Q2 = torch.tensor([[[1.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 1.0]]])  # (1, 2, 4): T = 2 queries
V3 = torch.tensor([[[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]])  # values != keys

# D = 4, H = 2, so Dh = 2: weights (1, 2, 3, 3), one 3x3 map per head.
CAUSAL = torch.ones(3, 3, dtype=torch.bool).tril()
# --- stored numbers: MultiHeadAttention ---
MHA_W = [[[[0.197776, 0.401112, 0.401112], [0.283995, 0.140029, 0.575975], [0.163579, 0.163579, 0.672842]],
          [[0.401112, 0.401112, 0.197776], [0.619985, 0.305695, 0.07432], [0.197776, 0.401112, 0.401112]]]]
MHA_OUT = [[[2.197776, 2.0, 0.197776, 0.802224],
            [2.510266, 1.564054, 0.07432, 1.361627],
            [2.910375, 1.490737, 0.401112, 1.108151]]]
# mistake: scales by sqrt(D) instead of sqrt(Dh)
MHA_W_BY_SQRT_D = [[[[0.232697, 0.383652, 0.383652], [0.307196, 0.186324, 0.50648], [0.211942, 0.211942, 0.576117]],
                    [[0.383652, 0.383652, 0.232697], [0.546549, 0.331499, 0.121952], [0.232697, 0.383652, 0.383652]]]]
# mistake: softmax over the queries (dim=-2)
MHA_W_OVER_QUERIES = [[[[0.197776, 0.401112, 0.140029], [0.401112, 0.197776, 0.283995], [0.401112, 0.401112, 0.575975]],
                       [[0.333333, 0.283995, 0.186694],
                        [0.333333, 0.140029, 0.045388],
                        [0.333333, 0.575975, 0.767918]]]]
# mistake: one shared projection (W_q) for queries, keys and values
MHA_W_ONE_PROJECTION = [[[[0.401112, 0.197776, 0.401112],
                          [0.197776, 0.401112, 0.401112],
                          [0.248255, 0.248255, 0.50349]],
                         [[0.333333, 0.333333, 0.333333],
                          [0.283995, 0.575975, 0.140029],
                          [0.283995, 0.140029, 0.575975]]]]
# mistake: splits q, k, v with view to (B, H, T, Dh), no transpose
MHA_W_HEADS_MIX_TOKENS = [[[[0.197776, 0.401112, 0.401112],
                            [0.197776, 0.401112, 0.401112],
                            [0.50349, 0.248255, 0.248255]],
                           [[0.575975, 0.283995, 0.140029],
                            [0.248255, 0.50349, 0.248255],
                            [0.248255, 0.50349, 0.248255]]]]
# mistake: forgets W_o
MHA_OUT_NO_W_O = [[[1.0, 2.0, 0.197776, 1.197776],
                   [1.435946, 1.564054, 0.07432, 1.07432],
                   [1.509263, 1.490737, 0.401112, 1.401112]]]
MASK_W = [[[[1.0, 0.0, 0.0], [0.669762, 0.330238, 0.0], [0.163579, 0.163579, 0.672842]],
           [[1.0, 0.0, 0.0], [0.669762, 0.330238, 0.0], [0.197776, 0.401112, 0.401112]]]]
CROSS_W = [[[[0.197776, 0.401112, 0.401112], [0.186694, 0.045388, 0.767918]],
            [[0.197776, 0.401112, 0.401112], [0.619985, 0.305695, 0.07432]]]]
CROSS_OUT = [[[1.598888, 1.0, 0.598888, 0.401112], [1.92568, 1.72253, 0.694305, 0.305695]]]
# mistake: the key is used as the value
CROSS_OUT_KEY_AS_VALUE = [[[2.401112, 2.0, 0.401112, 0.598888], [2.796849, 1.27747, 0.07432, 1.64821]]]
# --- end of stored numbers ---
MHA_W_WRONG = {
    tr("you divided the scores by sqrt(d_model); each head's scores are dot products of size Dh = D/H, "
       "so divide by sqrt(Dh)"): MHA_W_BY_SQRT_D,
    tr("your weights sum to 1 over the queries (dim=-2); each query's weights should sum to 1 over the keys"):
        MHA_W_OVER_QUERIES,
    tr("the keys (and values) were made with W_q: queries, keys and values each have their own "
       "projection, W_q, W_k and W_v"): MHA_W_ONE_PROJECTION,
    tr("your heads mix tokens: the projected (B, T, D) tensors were viewed straight as (B, H, T, Dh); "
       "use split_heads (view as (B, T, H, Dh), then transpose)"): MHA_W_HEADS_MIX_TOKENS,
}
MHA_OUT_WRONG = {
    tr("the weights are right but the output is not: you forgot the output projection W_o after merging the heads"):
        MHA_OUT_NO_W_O,
}
CROSS_OUT_WRONG = {
    tr("the values were computed from the key input: v = W_v(value), k = W_k(key)"): CROSS_OUT_KEY_AS_VALUE,
}


def _linears(module, bias: bool) -> None:
    for name in ("W_q", "W_k", "W_v", "W_o"):
        layer = getattr(module, name, None)
        if not isinstance(layer, nn.Linear):
            fail(tr("self.{name} should be an nn.Linear, got {type}", name=name, type=type(layer).__name__))
        if (layer.in_features, layer.out_features) != (4, 4):
            fail(tr("self.{name} maps {in_features} -> {out_features}; every projection is "
                    "d_model -> d_model (the heads are slices of it, not separate layers)",
                    name=name, in_features=layer.in_features, out_features=layer.out_features))
        if (layer.bias is not None) != bias:
            if bias:
                fail(tr("self.{name} should have a bias when bias=True: pass bias=bias to nn.Linear", name=name))
            fail(tr("self.{name} should not have a bias when bias=False: pass bias=bias to nn.Linear", name=name))


def _load(cls, **kwargs):
    module = cls(4, 2, bias=False, **kwargs)
    _linears(module, bias=False)
    with torch.no_grad():
        for name, weight in zip(("W_q", "W_k", "W_v", "W_o"), (WQ, WK, WV, WO)):
            getattr(module, name).weight.copy_(weight)
    return module


@public_check
def check_MultiHeadAttention(cls) -> None:
    avoid_library_call(cls, ("MultiheadAttention", "multi_head_attention_forward", "scaled_dot_product_attention"),
                       tr("your MultiHeadAttention calls a library attention (nn.MultiheadAttention or "
                          "F.scaled_dot_product_attention): the grader gives zero for that. The plain name "
                          "scaled_dot_product_attention (chapter 02's function, imported above) is fine"))
    module = cls(4, 2)
    if not isinstance(module, nn.Module):
        fail(tr("MultiHeadAttention should subclass nn.Module (and call super().__init__())"))
    _linears(module, bias=True)
    expect_value_error(cls, 6, 4, what=tr("MultiHeadAttention(6, 4) (6 is not divisible by 4)"))

    module = _load(cls)
    with torch.no_grad():
        out, weights = expect_pair(module(X, X, X), "MultiHeadAttention.forward(x, x, x)")
    if type(weights) is torch.Tensor and tuple(weights.shape) == (1, 3, 3):
        fail(tr("weights have shape (B, T, S) = (1, 3, 3): return every head's map, (B, H, T, S), "
                "not the average over the heads"))
    expect_tensor(weights, (1, 2, 3, 3), tr("the weights (B, H, T, S)"))
    diagnose(weights, MHA_W, MHA_W_WRONG, what=tr("the weights"))
    expect_tensor(out, (1, 3, 4), tr("the output (B, T, D)"))
    diagnose(out, MHA_OUT, MHA_OUT_WRONG, what=tr("the output"))

    causal = CAUSAL
    with torch.no_grad():
        _, weights = expect_pair(module(X, X, X, causal), "MultiHeadAttention.forward(x, x, x, mask)")
    expect_tensor(weights, (1, 2, 3, 3), tr("the masked weights"))
    if close(weights, MHA_W):
        fail(tr("the mask made no difference: pass `mask` on to the attention"))
    blocked = weights.detach()[..., ~causal]
    if torch.isnan(weights).any() or not (blocked == 0).all():
        fail(tr("keys where the mask is False got weight (or the weights are nan): True means "
                "'may attend', so fill the scores with -inf where `~mask`"))
    diagnose(weights, MASK_W, {}, what=tr("the weights with a causal mask"))

    with torch.no_grad():
        out, weights = expect_pair(module(Q2, X, V3), "MultiHeadAttention.forward(query, key, value)")
    expect_tensor(weights, (1, 2, 2, 3), tr("the cross-attention weights (B, H, T, S) with T=2, S=3"))
    diagnose(weights, CROSS_W, {}, what=tr("the cross-attention weights"))
    expect_tensor(out, (1, 2, 4), tr("the cross-attention output (B, T, D)"))
    diagnose(out, CROSS_OUT, CROSS_OUT_WRONG, what=tr("the cross-attention output"))

    module = _load(cls, dropout=0.5)
    module.eval()
    with torch.no_grad():
        out, weights = expect_pair(module(X, X, X), tr("forward in eval mode"))
    if not close(weights, MHA_W):
        fail(tr("with dropout=0.5 in eval() mode the weights changed: dropout must only act while training "
                "(nn.Dropout does this for you; F.dropout needs training=self.training)"))
    module.train()
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(0)
        out, weights = expect_pair(module(X.expand(8, 3, 4), X.expand(8, 3, 4), X.expand(8, 3, 4)),
                                   tr("forward in train mode"))
    if not (weights == 0).any():
        fail(tr("with dropout=0.5 in train mode no attention weight was zeroed: apply dropout to the "
                "weights, before they multiply the values (not to the output), and return those weights"))
    expect_value_error(module, X, torch.ones(1, 3, 5), torch.ones(1, 3, 5),
                       what=tr("a key whose last size is not d_model"))
    passed("MultiHeadAttention")


# ---------------------------------------------------------------- mha_parameter_count

@public_check
def check_mha_parameter_count(count) -> None:
    avoid_library_call(count, ("parameters", "named_parameters"),
                       tr("count the parameters by hand: building a module and calling .parameters() scores zero"))
    got = count(4)
    if isinstance(got, float):
        fail(tr("mha_parameter_count(4) returned the float {got}; a count is an int (use ** 2 or d*d, not ** 2.0)",
                got=got))
    wrong = {
        64: tr("That is 4*D*D: you forgot the four bias vectors of D numbers each"),
        68: tr("That is 4*D*D + D, the GPT-2 layout where only W_o has a bias; here all four layers have one"),
        60: tr("That counts W_q, W_k, W_v but not the output projection W_o"),
    }
    if got != 80:
        fail(tr("mha_parameter_count(4) = {got!r}, expected 80. {hint}", got=got, hint=wrong.get(got, "")))
    if count(4, bias=False) != 64:
        fail(tr("mha_parameter_count(4, bias=False) = {got!r}, expected 4*4*4 = 64", got=count(4, bias=False)))
    expect_value_error(count, 0, what="mha_parameter_count(0)")
    passed("mha_parameter_count")

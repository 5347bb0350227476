"""Public checks for chapter 08 (GPT, sampling, generation, beam search, BPE). Between the
`# --- stored numbers` lines are what the reference solution gives on the fixed inputs here, and what
the usual mistakes give, which is how a failing check names the mistake; `python -m tests.snapshots
--write` computes them again in the course repository. Sampling is checked by frequencies, so any
correct way of drawing passes.
"""
from __future__ import annotations

import math
import zlib

import torch

from course.checks import (
    avoid_library_call,
    dropout_calls,
    expect_tensor,
    expect_value_error,
    fail,
    mistake,
    passed,
    public_check,
    tr,
)

NEG = float("-inf")


def _set_params(module: torch.nn.Module) -> None:
    """Fixed weights from an integer hash of each parameter's name and index (exact on every machine)."""
    for name, p in sorted(module.named_parameters()):
        x = (torch.arange(p.numel(), dtype=torch.int64) * 2654435761 + zlib.crc32(name.encode())) % 4294967296
        for _ in range(2):  # integer mixing: exact everywhere, and no linear pattern LayerNorm could remove
            x = ((x ^ (x >> 16)) * 73244475) % 4294967296
        vals = ((x ^ (x >> 16)).double() / 4294967296 * 2 - 1).float().reshape(p.shape) * math.sqrt(3)
        with torch.no_grad():
            if ".ln_" in name or name.startswith("ln_"):
                p.copy_((1 if name.endswith("weight") else 0) + 0.2 * vals)
            elif "embedding" in name:
                p.copy_(vals)
            elif p.dim() == 2:
                p.copy_(vals / math.sqrt(p.shape[1]))
            else:
                p.copy_(0.1 * vals)


def _same(actual, expected, atol: float) -> bool:
    expected = torch.as_tensor(expected, dtype=torch.float32)
    return (type(actual) is torch.Tensor and actual.shape == expected.shape
            and bool(((actual.detach().float() - expected).abs() <= atol).all()))


def _equal(actual, expected) -> bool:
    expected = torch.as_tensor(expected)
    return (type(actual) is torch.Tensor and actual.shape == expected.shape
            and torch.equal(actual.to(expected.dtype), expected))


# ---------------------------------------------------------------- GPT

GPT_IDX = torch.tensor([[1, 5, 2, 6, 0], [3, 3, 4, 1, 2]])
# --- stored numbers: GPT ---
# logits[0, -1] and logits[1, 2]
GPT_OUT = [[7.160413, 4.2395, -6.63805, 4.026634, 2.557606, 2.592958, 6.648839],
           [-2.833642, 0.297238, -5.134881, 4.133902, -1.281529, 4.172331, 1.065263]]
# mistake: Post-LN blocks (norm after the residual sum) instead of GPT-2's Pre-LN
GPT_POST_LN = [[-0.268649, -2.133424, -9.933499, 6.562705, -2.969629, 2.585927, -2.063526],
               [-3.455001, -3.37558, -7.629078, 5.889119, -3.318987, 3.559279, -2.517561]]
# mistake: no final LayerNorm before the output layer
GPT_NO_LN_F = [[15.163386, -0.150258, -8.756125, -2.013089, 2.951634, 1.348172, 10.077347],
               [-4.113611, -1.596262, -9.261531, 3.185265, -1.272197, 7.970132, 4.210885]]
# mistake: GELU with erf (F.gelu's default) instead of GPT-2's tanh form
GPT_ERF_GELU = [[7.160434, 4.239386, -6.638418, 4.026837, 2.557684, 2.593007, 6.648634],
                [-2.833328, 0.297611, -5.134801, 4.133688, -1.281218, 4.172437, 1.065547]]
# mistake: no causal mask: every position sees the future
GPT_NOT_CAUSAL = [[7.179601, 4.207567, -6.774925, 3.993053, 2.675353, 2.67509, 6.547442],
                  [-1.816036, 0.491415, -5.303592, 3.164634, 0.574482, 4.858186, 0.72802]]
# mistake: scores divided by sqrt(d_model) instead of sqrt(head dim)
GPT_BY_SQRT_D = [[7.319593, 4.119772, -6.955002, 4.091673, 2.829279, 2.744024, 6.640317],
                 [-2.886921, 0.288141, -5.095784, 4.20399, -1.258217, 4.15716, 1.120112]]
# mistake: q, k, v split per head (view (B, T, H, 3*Dh)) instead of side by side
GPT_QKV_PER_HEAD = [[5.951315, 2.262331, -4.970976, 4.857697, -0.287237, 1.436747, 5.977495],
                    [-2.33729, 1.86482, -1.353616, 4.034793, -0.653147, 3.781348, 3.974235]]
# mistake: q, k, v read from qkv in the order k, q, v
GPT_QKV_KQV = [[8.16442, 3.80113, -7.123475, 3.03275, 3.760018, 2.309062, 5.687155],
               [-2.467826, 0.585287, -5.130987, 4.24771, -0.50667, 4.416031, 1.491733]]
# mistake: q, k, v read interleaved from qkv (features 0, 3, 6, ... are q)
GPT_QKV_INTERLEAVED = [[5.82442, 3.86125, -3.927974, 4.801281, -0.755664, 0.538949, 8.473873],
                       [-0.403053, 3.912205, -0.01279, 2.337619, 3.406018, 2.778125, 4.953772]]
# --- end of stored numbers ---
GPT_MISTAKES = {
    tr("this is the Post-LN order, x = norm(x + sublayer(x)); GPT-2 normalises the INPUT of each sublayer: "
       "x = x + attn(ln_1(x)), then x = x + mlp(ln_2(x))"): GPT_POST_LN,
    tr("the final LayerNorm is missing: ln_f normalises the last block's output before it meets the tied "
       "embedding"): GPT_NO_LN_F,
    tr("GPT-2 uses the tanh form of GELU: F.gelu(x, approximate='tanh') (the default is the erf form)"): GPT_ERF_GELU,
    tr("there is no causal mask: position t must not attend to positions after t"): GPT_NOT_CAUSAL,
    tr("divide the scores by sqrt(Dh), the size of one head, not by sqrt(d_model)"): GPT_BY_SQRT_D,
    tr("q, k and v lie side by side in qkv's output (q = the first D features, k the next D, v the last D); "
       "split them into three blocks of D features along the last axis before cutting each into heads"):
        GPT_QKV_PER_HEAD,
    tr("queries and keys are swapped: qkv's output holds q first, then k, then v (the first D features are the "
       "queries)"): GPT_QKV_KQV,
    tr("q, k and v were read interleaved (every third feature): they lie side by side in qkv's output, q in the "
       "first D features, k in the next D, v in the last D"): GPT_QKV_INTERLEAVED,
}


def _gpt_names(n_layer: int) -> set[str]:
    names = {"token_embedding.weight", "position_embedding.weight", "ln_f.weight", "ln_f.bias"}
    for i in range(n_layer):
        for part in ("ln_1", "qkv", "attn_out", "ln_2", "mlp_in", "mlp_out"):
            names |= {f"blocks.{i}.{part}.weight", f"blocks.{i}.{part}.bias"}
    return names


@public_check
def check_GPT(cls) -> None:
    avoid_library_call(cls, ("scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward"),
                       tr("build attention from split_heads, scaled_dot_product_attention and merge_heads (or your own "
                          "code); the grader gives zero to a solution that calls PyTorch's attention"))
    model = cls(7, 8, 2, 2, 8)
    names = {n for n, _ in model.named_parameters()}
    want = _gpt_names(2)
    if names != want:
        extra = sorted(names - want)
        if any("head" in n or n.endswith("out.weight") and "blocks" not in n for n in extra):
            fail(tr("{name} is a separate output layer: tie it to the embedding instead: the output reuses "
                    "token_embedding's weight matrix, so a token's logit is the dot product of the final vector "
                    "with that token's embedding (no new parameters)", name=extra[0]))
        fail(tr("parameters missing: {missing}; unexpected: {extra}. See the docstring for "
                "the names (blocks is an nn.ModuleList of nn.ModuleDict)",
                missing=sorted(want - names)[:4], extra=extra[:4]))
    for name, p in model.named_parameters():
        if p.dim() == 2 and not 0.01 < p.detach().std().item() < 0.03:
            fail(tr("{name} starts with std {std:.3f}: initialise Linear and Embedding weights "
                    "from N(0, 0.02^2) as GPT-2 does (nn.init.normal_(w, std=0.02)); the embedding is also the "
                    "output layer, so large weights give huge first logits", name=name, std=p.detach().std().item()))
    _set_params(model)
    model.eval()
    with torch.no_grad():
        logits = model(GPT_IDX)
        expect_tensor(logits, (2, 5, 7), tr("GPT(7, 8, 2, 2, 8)(idx of shape (2, 5))"))
        got = torch.stack([logits[0, -1], logits[1, 2]])
        if not _same(got, GPT_OUT, 5e-5):
            for hint, wrong in GPT_MISTAKES.items():
                if _same(got, wrong, 5e-5):
                    mistake(hint)
            fail(tr("the logits differ from the expected values {expected}...; got {got}...",
                    expected=GPT_OUT[0][:3], got=got[0, :3].tolist()))
        result = model(GPT_IDX[:, :2], use_cache=True)
        if not isinstance(result, tuple) or len(result) != 2:
            fail(tr("with use_cache=True, forward should return a tuple (logits, cache)"))
        first, cache = result
        pairs = isinstance(cache, (list, tuple)) and len(cache) == 2 and all(
            isinstance(kv, (list, tuple)) and len(kv) == 2 and tuple(kv[0].shape) == (2, 2, 2, 4) for kv in cache)
        if not pairs:
            fail(tr("the cache should be a list with one (keys, values) pair per block, each of shape (B, H, S, Dh)"))
        one, longer = _with_cache(model, GPT_IDX[:, 2:3], cache, 2)
        if not _same(one, logits[:, 2:3], 1e-4):
            fail(tr("one token fed with the cache of two earlier tokens gives other logits than the full pass: its "
                    "position is the cache length S (positions = arange(S, S + T)), and it must attend to all S "
                    "cached keys as well as its own: the mask is (T, S + T), the causal mask with S columns of ones "
                    "in front"))
        again, _ = _with_cache(model, GPT_IDX[:, 2:3], cache, 2)
        if not _same(again, one, 1e-6):
            fail(tr("using the same cache twice gave different logits: return a NEW cache (torch.cat makes new "
                    "tensors) and leave the one you were given unchanged"))
        rest, _ = _with_cache(model, GPT_IDX[:, 3:], longer, 3)
        if not _same(rest, logits[:, 3:], 1e-4):
            fail(tr("two tokens fed at once with a cache give other logits than the full pass: the causal mask must "
                    "be shifted by the cache length S, so query t sees keys 0..S+t (with S = 0 it is the ordinary "
                    "causal mask)"))
    expect_value_error(model, torch.zeros(1, 9, dtype=torch.long), what=tr("a sequence longer than block_size"))
    with torch.no_grad():
        _, six = model(GPT_IDX[:, :1].repeat(1, 6), use_cache=True)
    try:
        model(GPT_IDX[:, :3], cache=six, use_cache=True)
    except ValueError:
        pass
    except Exception as err:  # noqa: BLE001 - the learner's forward ran past block_size
        mistake(tr("3 new tokens with a cache of 6 positions (9 > block_size 8) raised {kind} instead of ValueError: "
                   "the limit is on the cached and the new positions together, S + T, not on T alone",
                   kind=type(err).__name__))
    else:
        mistake(tr("3 new tokens with a cache of 6 positions (9 > block_size 8) gave no ValueError: the limit is on "
                   "the cached and the new positions together, S + T, not on T alone"))
    shapes = [dims for _, dims in dropout_calls(cls(7, 8, 2, 2, 8, dropout=0.1), GPT_IDX)]
    if shapes.count(4) != 2:
        fail(tr("in training mode `drop` ran on the attention weights {count} times for 2 blocks: apply it to "
                "the softmax weights before they multiply v, once per block (the hidden tests check every site)",
                count=shapes.count(4)))
    if shapes.count(3) != 5:
        fail(tr("in training mode `drop` ran on (B, T, D) tensors {count} times; expected 5 for 2 blocks: once "
                "on the embeddings and on each sublayer's output, x = x + drop(attn_out(...)), "
                "x = x + drop(mlp_out(...))", count=shapes.count(3)))
    passed("GPT")


def _with_cache(model, idx, cache, S: int):
    """model(idx, cache=cache, use_cache=True) for the check's GPT (2 blocks, 2 heads, Dh 4); an error it
    raises is named: with 2 blocks and 2 heads, a cache length read off the wrong axis is right for S = 2
    only, and the mask built from it does not fit the keys (issue 39: "mask (2, 4) does not broadcast")."""
    T = idx.shape[1]
    try:
        result = model(idx, cache=cache, use_cache=True)
    except Exception as err:  # noqa: BLE001 - any error of the learner's forward is reported as a hint
        fail(tr("idx of shape (2, {T}) fed with a cache of {S} positions raised {kind}: {err}. The cache holds S = {S} "
                "positions (its keys are (B, H, S, Dh) = (2, 2, {S}, 4)), so the mask must be (T, S + T) = ({T}, "
                "{total}) and the new positions start at {S}. Count S along the keys' S axis: here the number of "
                "blocks (len(cache)) and the number of heads are both 2, which is right only while S = 2",
                T=T, S=S, total=S + T, kind=type(err).__name__, err=str(err)[:120]))
    if not isinstance(result, tuple) or len(result) != 2:
        fail(tr("with use_cache=True, forward should return a tuple (logits, cache)"))
    return result


# ---------------------------------------------------------------- next_token_targets

@public_check
def check_next_token_targets(fn) -> None:
    idx = torch.tensor([[10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33]])
    result = fn(idx)
    if not isinstance(result, tuple) or len(result) != 2:
        fail(tr("return a tuple (inputs, targets)"))
    inputs, targets = result
    if _equal(inputs, idx[:, 1:]) and _equal(targets, idx[:, :-1]):
        mistake(tr("inputs and targets are swapped: for the row [10, 11, 12, 13] the model reads 10, 11, 12 and must "
                "predict 11, 12, 13, the token that follows each one it read; you made 11, 12, 13 the inputs"))
    if _equal(targets, inputs):
        mistake(tr("your targets are the inputs themselves: the model would learn to copy the token it reads. The "
                   "target at position t is the token that FOLLOWS input t, so the targets are the same rows "
                   "shifted by one"))
    if _equal(inputs, idx[:-1]):
        mistake(tr("you sliced the batch axis: your inputs are whole rows ({rows} of the 3 sequences), but each "
                "sequence should lose one TOKEN, so that the 3 rows [10, 11, 12, 13], ... give inputs [10, 11, 12], "
                "...: slice the time axis", rows=len(inputs)))
    if not (_equal(inputs, idx[:, :-1]) and _equal(targets, idx[:, 1:])):
        fail(tr("expected inputs {inputs} and targets {targets}", inputs=idx[:, :-1].tolist(),
                targets=idx[:, 1:].tolist()))
    small = fn(idx.to(torch.int32))
    dtypes = [getattr(t, "dtype", None) for t in small] if isinstance(small, tuple) else [None]
    if any(d != torch.int32 for d in dtypes):
        mistake(tr("an int32 idx gave (inputs, targets) of dtype {dtypes}: both keep idx's dtype (slice idx itself; "
                "no .long(), no torch.tensor(...))", dtypes=dtypes))
    expect_value_error(fn, torch.tensor([[5], [6]]), what=tr("a sequence of one token (nothing to predict)"))
    passed("next_token_targets")


# ---------------------------------------------------------------- apply_temperature

@public_check
def check_apply_temperature(fn) -> None:
    logits = torch.tensor([[2.0, -1.0, NEG], [0.5, 0.0, 4.0]])
    before = logits.clone()
    out = fn(logits, 0.5)
    if not torch.equal(logits, before):
        mistake(tr("apply_temperature changed its input: the caller's logits must stay as they were, so build a new "
                "tensor (an in-place /= changes them)"))
    if _equal(out, before * 0.5):
        mistake(tr("divide by the temperature: a temperature below 1 must SHARPEN the distribution (larger logits)"))
    if not _equal(out, before / 0.5):
        fail(tr("apply_temperature(logits, 0.5) should be logits / 0.5 = {expected}", expected=(before / 0.5).tolist()))
    wide = fn(logits.double(), 0.5)
    if getattr(wide, "dtype", None) != torch.float64:
        mistake(tr("float64 logits came back as {dtype}: return the logits' own dtype (divide the tensor you were "
                   "given; no .float(), no new torch.tensor)", dtype=getattr(wide, "dtype", None)))
    expect_value_error(fn, logits, 0.0, what="temperature 0")
    passed("apply_temperature")


# ---------------------------------------------------------------- top_k_filter

@public_check
def check_top_k_filter(fn) -> None:
    logits = torch.tensor([[1.0, 3.0, 1.0, 0.0, 1.0, -2.0], [0.0, -1.0, 5.0, 4.0, 2.0, 3.0]])
    before = logits.clone()
    try:
        out = fn(logits, 2)
    except RuntimeError as err:
        mistake(tr("top_k_filter(logits of shape (2, 6), 2) raised RuntimeError ({error}): keep each row's k-th "
                "largest value as a column that broadcasts against the row, shape (..., 1) (index with ... to "
                "keep any number of leading axes)", error=str(err)[:90]))
    expected = torch.tensor([[1.0, 3.0, 1.0, NEG, 1.0, NEG], [NEG, NEG, 5.0, 4.0, NEG, NEG]])
    if not torch.equal(logits, before):
        mistake(tr("top_k_filter changed its input: build a new tensor (masked_fill, not masked_fill_ or indexing =)"))
    if not _equal(out, expected):
        kept = out[0][torch.isfinite(out[0])] if type(out) is torch.Tensor and out.shape == expected.shape else None
        if kept is not None and sorted(kept.tolist()) == [1.0, 3.0]:  # 3.0 and ONE of the three tied 1.0s
            mistake(tr("ties with the k-th largest logit must all be kept (row 0 keeps 3.0 and all three 1.0s): "
                       "compare "
                    "with the k-th largest VALUE (logits < kth -> -inf) instead of keeping k indices"))
        if _equal(out[1], [NEG, NEG, 5.0, 4.0, 2.0, 3.0]):
            mistake(tr("each row needs its own k-th largest value (one threshold per row, shape (..., 1)): one "
                    "threshold for the whole batch breaks rows on another scale"))
        if _equal(out[1], [NEG, NEG, 5.0, 4.0, NEG, 3.0]):
            mistake(tr("off by one: with k=2 row 1 kept 5.0, 4.0 and 3.0. The threshold is the k-th largest value, "
                       "the LAST of the k that torch.topk returns (position k - 1 counting from 0), not the (k+1)-th"))
        fail(tr("top_k_filter(logits, 2) should be {expected}, got {got}", expected=expected.tolist(),
                got=out.tolist() if type(out) is torch.Tensor else out))
    try:
        stacked = fn(torch.stack([logits, logits.flip(0)]), 2)  # (2, 2, 6): every row of every batch on its own
    except RuntimeError as err:
        stacked = err
    if not _equal(stacked, torch.stack([expected, expected.flip(0)])):
        mistake(tr("logits of shape (2, 2, 6) were not filtered row by row: take the k-th largest along the LAST "
                "axis and keep every leading axis (index with ..., which stands for all of them, not with a single "
                ":)"))
    everything = fn(logits, 10)
    if not _equal(everything, before):
        mistake(tr("k >= V should keep every token (torch.topk raises for k > V: check k first)"))
    if everything is logits:
        mistake(tr("with k >= V top_k_filter returned logits itself: return a new tensor (a caller that changes the "
                "result would change its logits)"))
    expect_value_error(fn, logits, 0, what="k = 0")
    passed("top_k_filter")


# ---------------------------------------------------------------- top_p_filter

@public_check
def check_top_p_filter(fn) -> None:
    probs = torch.tensor([[0.15, 0.5, 0.1, 0.25]])
    logits = probs.log()
    out = fn(logits, 0.6)
    keep = torch.isfinite(out) if type(out) is torch.Tensor else None
    if keep is None or keep.shape != logits.shape:
        fail(tr("top_p_filter should return a tensor of the shape of logits"))
    kept = keep[0].tolist()
    if kept == [False, True, False, False]:
        mistake(tr("with p=0.6 the tokens of probability 0.5 and 0.25 are kept: keep the token that CROSSES p (a token "
                "is kept when the mass of the tokens before it, not including it, is < p)"))
    if kept == [True, False, True, False] or kept == [True, True, False, False]:
        mistake(tr("your mask is in sorted order: scatter it back to the vocabulary order before applying it"))
    if kept != [False, True, False, True]:
        fail(tr("top_p_filter(logits, 0.6) should keep the tokens of probability 0.5 and 0.25; kept {kept}", kept=kept))
    if not _same(out[keep], logits[keep], 1e-6):
        fail(tr("kept tokens must keep their logits unchanged"))
    small = fn(logits, 0.3)
    if type(small) is not torch.Tensor or torch.isfinite(small).tolist() != [[False, True, False, False]]:
        mistake(tr("p=0.3 is below the top token's probability (0.5): the top token is always kept, alone here"))
    ties = torch.tensor([[0.0, 0.0, 0.0, 0.0]])  # 0.25 each
    counted = fn(ties, 0.5)
    if type(counted) is torch.Tensor and int(torch.isfinite(counted).sum()) == 3:
        mistake(tr("at the boundary (four tokens of 0.25, p=0.5) keep 2: the third has mass 0.5 before it, which is "
                "not < p"))
    if type(counted) is not torch.Tensor or int(torch.isfinite(counted).sum()) != 2:
        fail(tr("four equally likely tokens with p=0.5 should keep 2 of them"))
    expect_value_error(fn, logits, 0.0, what="p = 0")
    passed("top_p_filter")


# ---------------------------------------------------------------- sample_next_token

_ROW = torch.tensor([2.0, 1.0, 0.5, -1.0, 0.0])
_N = 4000
# --- stored numbers: sample_next_token ---
# the distribution at temperature 0.5 and top_p 0.9 (the temperature first, then the nucleus)
COLD_PROBS = [0.880797, 0.119203, 0.0, 0.0, 0.0]
# --- end of stored numbers ---


def _frequencies(samples, V: int) -> torch.Tensor:
    return torch.bincount(samples.long(), minlength=V)[:V].double() / len(samples)


def _looks_like(freq: torch.Tensor, probs: torch.Tensor) -> bool:
    """Within 5 binomial standard deviations (+0.01) everywhere, and never a zero-probability token."""
    sd = (probs * (1 - probs) / _N).sqrt()
    return bool(((freq - probs).abs() <= 5 * sd + 0.01).all() and (freq[probs == 0] == 0).all())


@public_check
def check_sample_next_token(fn) -> None:
    logits = torch.stack([_ROW, _ROW.flip(0)])
    greedy = fn(logits, temperature=0)
    expect_tensor(greedy, (2,), "sample_next_token(logits (2, 5), temperature=0)")
    if greedy.tolist() != [0, 4]:
        fail(tr("temperature=0 should return the argmax of each row, [0, 4]; got {greedy}", greedy=greedy.tolist()))
    if greedy.dtype != torch.int64:
        fail(tr("return int64 token ids, got {dtype}", dtype=greedy.dtype))
    batch = logits.repeat(_N, 1)  # rows alternate between the two distributions
    draws = fn(batch, generator=torch.Generator().manual_seed(0))
    expect_tensor(draws, (2 * _N,), "sample_next_token(logits (8000, 5))")
    for r, probs in enumerate((_ROW.softmax(0), _ROW.flip(0).softmax(0))):
        if not _looks_like(_frequencies(draws[r::2], 5), probs.double()):
            mistake(tr("row {r}: the frequencies {frequencies} do not match softmax(logits) = {probs}: sample each row "
                    "from the softmax over ITS vocabulary (dim=-1)", r=r,
                    frequencies=[round(f, 3) for f in _frequencies(draws[r::2], 5).tolist()],
                    probs=[round(p, 3) for p in probs.tolist()]))
    again = fn(batch, generator=torch.Generator().manual_seed(0))
    if not torch.equal(draws, again):
        mistake(tr("the same seed gave different draws: take every random number from `generator`"))
    sharp = fn(_ROW.repeat(_N, 1), temperature=0.5, generator=torch.Generator().manual_seed(1))
    if not _looks_like(_frequencies(sharp, 5), (_ROW / 0.5).softmax(0).double()):
        if _looks_like(_frequencies(sharp, 5), _ROW.softmax(0).double()):
            mistake(tr("temperature=0.5 changed nothing: the draws follow softmax(logits). Divide the LOGITS by the "
                       "temperature before the softmax; dividing the probabilities only rescales them, and the "
                       "sampler normalises them again"))
        fail(tr("with temperature=0.5 the frequencies {frequencies} do not match softmax(logits / 0.5) = {probs}",
                frequencies=[round(f, 3) for f in _frequencies(sharp, 5).tolist()],
                probs=[round(p, 3) for p in (_ROW / 0.5).softmax(0).tolist()]))
    cold = fn(_ROW.repeat(_N, 1), temperature=0.5, top_p=0.9, generator=torch.Generator().manual_seed(1))
    if not _looks_like(_frequencies(cold, 5), torch.tensor(COLD_PROBS, dtype=torch.float64)):
        mistake(tr("with temperature=0.5 and top_p=0.9 only tokens 0 and 1 may be drawn (about 88% and 12%); got "
                "{frequencies}. Apply the temperature FIRST, then top-k, then top-p, then sample",
                frequencies=[round(f, 3) for f in _frequencies(cold, 5).tolist()]))
    expect_value_error(fn, _ROW, what=tr("1-dimensional logits"))
    passed("sample_next_token")


# ---------------------------------------------------------------- generate

class _Window(torch.nn.Module):
    """A stand-in language model: at window position t the logits are first[window[0]] +
    current[window[t]] + place[t], so cropping and positions matter; block_size 4. Its cache is shaped
    like GPT's, one (keys, values) pair per block, each (B, 1, S, 1): the keys hold the window's ids, the
    values their positions, so a cache passed back slid or stale is named."""

    def __init__(self):
        super().__init__()
        self.block_size = 4
        a, v = torch.arange(5.0)[:, None], torch.arange(5.0)[None, :]
        self.first = (a * 3 + v * 7) % 11 * 0.4
        self.current = (a * 5 + v * 2 + a * v) % 7 * 0.5
        self.place = (a[:4] * 4 + v * 3) % 5 * 0.35
        self.calls = []
        self.grad_enabled = set()
        self.returned = None  # the length of the cache the last call returned
        self.refused = None  # the error this model raised first, kept here: a check identifies its own error by
        # this, not by the exception that comes back through the learner's code (on the grader's side, it comes
        # back rebuilt from plain data, grader.boundary.wire.rebuild)

    def _refuse(self, err: Exception) -> Exception:
        if self.refused is None:
            self.refused = err
        return err

    def forward(self, idx, cache=None, use_cache=False):
        cached = None if cache is None else self._cached_ids(cache)  # (B, S)
        S = 0 if cached is None else cached.shape[1]
        if type(idx) is not torch.Tensor or idx.dim() != 2:
            raise self._refuse(_BadCache(tr(
                "the model got idx of shape {shape}: it reads token ids of shape (B, T), so the newest token alone "
                "is (B, 1): slice so that the time axis stays", shape=tuple(getattr(idx, "shape", ())))))
        self.calls.append((idx.shape[1], S))
        self.grad_enabled.add(torch.is_grad_enabled())
        if S + idx.shape[1] > self.block_size:
            raise self._refuse(_TooLong(tr("{S} cached + {new} new tokens, more than block_size 4", S=S,
                                           new=idx.shape[1]), S, idx.shape[1]))
        window = idx if cached is None else torch.cat([cached, idx], 1)
        logits = self.first[window[:, :1]] + self.current[window[:, S:]] + self.place[S:window.shape[1]]
        if not use_cache:
            return logits
        self.returned = window.shape[1]
        positions = torch.arange(window.shape[1], dtype=torch.float32).expand(window.shape)
        return logits, [(window[:, None, :, None].float(), positions[:, None, :, None])]

    def _cached_ids(self, cache) -> torch.Tensor:
        """The ids a cache passed back holds; _BadCache when it is not the last one this model returned."""
        pair = cache[0] if isinstance(cache, (list, tuple)) and len(cache) == 1 else None
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2
                and all(type(t) is torch.Tensor and t.dim() == 4 for t in pair)):
            raise self._refuse(_BadCache(tr(
                "the cache passed back to the model is not the one it returned (a list with one "
                "(keys, values) pair per block, each (B, H, S, Dh)): pass it back unchanged")))
        keys, positions = pair[0][:, 0, :, 0], pair[1][0, 0, :, 0]  # (B, S), (S,)
        if positions.numel() and positions[0] != 0:
            raise self._refuse(_BadCache(tr(
                "the cache passed back starts at position {start}, not 0: it was slid (its oldest "
                "positions dropped). Learned positions cannot slide: when the cache plus the new "
                "token would not fit in block_size, start a new cache from the last block_size tokens",
                start=int(positions[0]))))
        if keys.shape[1] != self.returned:
            raise self._refuse(_BadCache(tr(
                "the cache passed back holds {S} positions, but the model's last call returned a cache "
                "of {returned}: pass back the cache of the previous step, with only the newest token",
                S=keys.shape[1], returned=self.returned)))
        return keys.long()


_GEN_PROMPT = torch.tensor([[1, 2], [4, 0]])
# --- stored numbers: generate ---
_GEN_GREEDY = [[1, 2, 4, 1, 4, 2, 4, 1], [4, 0, 1, 2, 4, 3, 1, 2]]
# --- end of stored numbers ---


class _TooLong(ValueError):
    """The check's model was asked to see more than block_size tokens."""

    def __init__(self, message: str, cached: int, new: int):
        super().__init__(message)
        self.cached, self.new = cached, new


class _BadCache(Exception):
    """The check's model was handed a cache it did not return last (slid, stale, rebuilt), or an idx that is
    not (B, T)."""


def _generating(fn, model, *args, **kwargs):
    """fn(model, ...), with the check model's own ValueError turned into the mistake behind it."""
    try:
        return fn(model, *args, **kwargs)
    except Exception:
        err = model.refused
        if err is None:
            raise
    if isinstance(err, _BadCache):
        mistake(str(err))
    if isinstance(err, _TooLong):
        if err.cached and err.new > 1:
            mistake(tr("the model got {err}: with a cache, feed only the tokens the cache does not hold yet (after the "
                    "first step, the newest one); the cache already holds the keys and values of the earlier ones",
                    err=err))
        if err.cached:
            mistake(tr("the model got {err}: the cache was never restarted. When the cache plus the new token would "
                       "not "
                    "fit in block_size, start a new cache from the last block_size tokens (learned positions cannot "
                    "slide)", err=err))
        mistake(tr("the model got {err}: the model may see at most block_size tokens, and the next token depends on "
                "the most recent ones: of [1, 2, 4, 1, 4] with block_size 4 it must see [2, 4, 1, 4]", err=err))


@public_check
def check_generate(fn) -> None:
    model = _Window()
    out = _generating(fn, model, _GEN_PROMPT, 6, temperature=0)
    expect_tensor(out, (2, 8), "generate(model, idx (2, 2), 6, temperature=0)")
    if out.tolist() != _GEN_GREEDY:
        if any(t > 4 for t, _ in model.calls) or not out[:, :2].equal(_GEN_PROMPT):
            mistake(tr("the model may see at most block_size tokens, and the next token depends on the most recent "
                    "ones: of [1, 2, 4, 1, 4] with block_size 4 it must see [2, 4, 1, 4], not [1, 2, 4, 1]"))
        fail(tr("greedy generation should give {expected}, got {out}: at each step the model sees the most recent "
                "block_size tokens, the next token comes from the logits of the LAST position (each position "
                "predicts the token after it), and the chosen token is appended",
                expected=_GEN_GREEDY, out=out.tolist()))
    model = _Window()
    cached = _generating(fn, model, _GEN_PROMPT, 6, temperature=0, use_cache=True)
    if type(cached) is not torch.Tensor or cached.tolist() != _GEN_GREEDY:
        fail(tr("use_cache=True should give exactly the tokens of use_cache=False"))
    if model.calls != [(2, 0), (1, 2), (1, 3), (4, 0), (4, 0), (4, 0)]:
        mistake(tr("with use_cache=True the model was called with (new tokens, cached tokens) = {calls}: feed the "
                "prompt once, then only the newest token with the cache; when the cache is full (block_size), start "
                "a new one from the last block_size tokens", calls=model.calls))
    a = fn(_Window(), _GEN_PROMPT, 5, generator=torch.Generator().manual_seed(3))
    b = fn(_Window(), _GEN_PROMPT, 5, generator=torch.Generator().manual_seed(3), use_cache=True)
    if type(a) is not torch.Tensor or not torch.equal(a, b):
        mistake(tr("sampling with the same seed should give the same tokens with and without the cache: pass the "
                "generator to sample_next_token"))
    if model.grad_enabled != {False}:
        mistake(tr("the model ran with gradients enabled: wrap the loop in `with torch.no_grad():` (generation never "
                "trains, and recording the graph costs memory at every step)"))
    for mode in ("eval", "train"):
        getattr(model, mode)()
        fn(model, _GEN_PROMPT, 2, temperature=0)
        if model.training != (mode == "train"):
            mistake(tr("a model in {mode} mode left generate in {now} mode: leave the "
                    "model's mode to the caller (no model.eval() or model.train() inside generate)",
                    mode=mode, now="train" if model.training else "eval"))
    expect_value_error(fn, _Window(), torch.tensor([1, 2]), 3, what=tr("a 1-dimensional idx"))
    passed("generate")


# ---------------------------------------------------------------- beam_search

class _Table(torch.nn.Module):
    """A Markov model: the next token's logits depend on the current token alone. It records whether
    gradients were enabled, and refuses a context longer than block_size (_TooLong)."""

    def __init__(self, probs, block_size: int = 8):
        super().__init__()
        self.block_size = block_size
        self.log_table = torch.tensor(probs).clamp_min(1e-4).log()
        self.grad_enabled = set()
        self.too_long = 0  # the length of the first context longer than block_size the model was given

    def forward(self, idx):
        self.grad_enabled.add(torch.is_grad_enabled())
        if idx.shape[1] > self.block_size:
            self.too_long = self.too_long or idx.shape[1]  # kept: the error comes back rebuilt on the grader's side
            raise ValueError(tr("a context of {new} tokens exceeds block_size {size}", new=idx.shape[1],
                                size=self.block_size))
        return self.log_table[idx]


# From 0, greedy takes 1 (0.55) and then at best 0.37; 2 (0.45) then 3 (0.95) is more likely.
_TRAP = [[0.0, 0.55, 0.45, 0.0, 0.0], [0.3, 0.0, 0.0, 0.33, 0.37], [0.0, 0.0, 0.0, 0.95, 0.05],
         [0.2, 0.2, 0.2, 0.2, 0.2], [0.1, 0.2, 0.3, 0.15, 0.25]]
# eos = 4: stopping at once has probability 0.45, going on 0.4 * 0.9 * 0.9 = 0.324 in total.
_SHORT = [[0.0, 0.4, 0.1, 0.05, 0.45], [0.02, 0.0, 0.9, 0.06, 0.02], [0.02, 0.03, 0.0, 0.9, 0.05],
          [0.5, 0.3, 0.1, 0.05, 0.05], [0.2, 0.2, 0.2, 0.2, 0.2]]
# eos = 4: [0, 4] has 0.6; going on after eos would reach [0, 4, 3, 3] (0.54), more than any sequence without eos.
_PAST_EOS = [[0.0, 0.4, 0.0, 0.0, 0.6], [0.2, 0.2, 0.2, 0.2, 0.2], [0.2, 0.2, 0.2, 0.2, 0.2],
             [0.02, 0.01, 0.01, 0.95, 0.01], [0.01, 0.01, 0.01, 0.95, 0.02]]
# eos = 4: [0, 4] has 0.6, [0, 1, 2, 3] 0.1 (also less per token); after eos the model is uniform.
_AFTER_EOS = [[0.0, 0.4, 0.0, 0.0, 0.6], [0.0, 0.0, 0.5, 0.25, 0.25], [0.1, 0.1, 0.0, 0.5, 0.3],
              [0.25, 0.25, 0.25, 0.05, 0.2], [0.2, 0.2, 0.2, 0.2, 0.2]]


def _searching(fn, table, *args, **kwargs):
    """fn(table, ...) as a list; the table's refusal of a context longer than block_size named."""
    try:
        out = fn(table, *args, **kwargs)
    except Exception:
        if not table.too_long:
            raise
        mistake(tr("the model got {new} tokens with block_size {size}: crop every beam to its last block_size tokens "
                   "before calling the model, as generate does", new=table.too_long, size=table.block_size))
    if table.grad_enabled != {False}:
        mistake(tr("the model ran with gradients enabled: wrap the search in `with torch.no_grad():` (a search never "
                   "trains, and recording the graph costs memory at every step)"))
    return out.tolist() if type(out) is torch.Tensor else out


@public_check
def check_beam_search(fn) -> None:
    prompt = torch.tensor([[0]])
    out = fn(_Table(_TRAP), prompt, 2, 1)
    expect_tensor(out, (1, 3), "beam_search(model, [[0]], 2, beam_width=1)")
    if out.tolist() != [[0, 1, 4]]:
        fail(tr("beam width 1 is greedy decoding: expected [[0, 1, 4]], got {out}", out=out.tolist()))
    got = _searching(fn, _Table(_TRAP), prompt, 2, 2)
    if got != [[0, 2, 3]]:
        fail(tr("with width 2 the search should find 0 -> 2 -> 3 (0.45 * 0.95), more likely than greedy's "
                "0 -> 1 -> 4 (0.55 * 0.37); got {got}. Keep the "
                "beam_width best candidates over ALL (beam, token) pairs, scored by the SUM of log-probabilities",
                got=got))
    long_prompt = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3, 0, 2]])  # 10 tokens, block_size 8
    _searching(fn, _Table(_TRAP), long_prompt, 2, 2)
    got = _searching(fn, _Table(_PAST_EOS), prompt, 3, 5, eos_id=4)
    if isinstance(got, list) and got and isinstance(got[0], list) and 4 in got[0][1:-1]:
        mistake(tr("eos_id ends a sequence: your result {got} goes on after it. A candidate ending with eos_id is "
                   "finished: set it aside, extend it no further, and compare it with the others at the end", got=got))
    if got != [[0, 4]] and isinstance(got, list) and got and isinstance(got[0], list) and 4 not in got[0]:
        mistake(tr("[0, 4] (probability 0.6) lost to {got}, which is less likely: a finished candidate, set aside "
                   "when it ended with eos_id, still competes at the end, with the live ones", got=got))
    if _searching(fn, _Table(_AFTER_EOS), prompt, 3, 5, eos_id=4) == [[0, 1, 2, 3]]:
        mistake(tr("[0, 4] (probability 0.6) lost to [0, 1, 2, 3] (0.1): a candidate ending with eos_id must be set "
                   "aside as finished when it appears; kept among the live beams it is extended, and its longer "
                   "versions score less than it did"))
    got = _searching(fn, _Table(_SHORT), prompt, 3, 5, eos_id=4)
    if got == [[0, 1, 2, 3]]:
        mistake(tr("[0, 4] has total probability 0.45, [0, 1, 2, 3] only 0.324, though more per token: compare "
                   "TOTAL log-probabilities, not averages per token"))
    if got != [[0, 4]]:
        fail(tr("with eos_id=4 the best sequence is [[0, 4]]; got {got}", got=got))
    expect_value_error(fn, _Table(_TRAP), torch.tensor([[0], [1]]), 2, 2, what=tr("a batch of two prompts"))
    passed("beam_search")


# ---------------------------------------------------------------- BPE

def _pairs(merges) -> list:
    return [tuple(int(x) for x in m) for m in merges] if isinstance(merges, list) else merges


@public_check
def check_train_bpe(fn) -> None:
    merges = _pairs(fn("aaabdaaabac", 3))
    if not isinstance(merges, list):
        fail(tr("train_bpe should return a list of (int, int) tuples"))
    if merges != [(97, 97), (256, 97), (257, 98)]:
        fail(tr("train_bpe('aaabdaaabac', 3) should be [(97, 97), (256, 97), (257, 98)] (aa -> 256, 256 a -> 257, "
                "257 b -> 258); got {merges}", merges=merges))
    counted = _pairs(fn("abcbcbcaa", 1))
    if counted == [(97, 98)]:
        mistake(tr("'abcbcbcaa' holds (b, c) three times and (a, b) once, yet you merged (97, 98): count every "
                   "occurrence of a pair, not each distinct pair once"))
    if counted == [(99, 98)]:
        mistake(tr("'abcbcbcaa' holds (b, c) three times, yet you merged (99, 98): you counted the pairs at positions "
                   "(0, 1), (2, 3), ... only; a pair starts at EVERY position, so (1, 2), (3, 4), ... count too"))
    if counted != [(98, 99)]:
        fail(tr("train_bpe('abcbcbcaa', 1) should be [(98, 99)], the pair that occurs most often (3 times); got "
                "{counted}", counted=counted))
    four = _pairs(fn("aaaa", 3))
    if four != [(97, 97), (256, 256)]:
        mistake(tr("'aaaa' should give [(97, 97), (256, 256)] and then stop (one token left); got {four}. Merge "
                "occurrences left to right WITHOUT overlap (skip both elements after a merge), and stop when no pair "
                "is left", four=four))
    tie = _pairs(fn("cdab cdab", 1))
    if tie != [(99, 100)]:
        mistake(tr("(c, d), (d, a) and (a, b) all occur twice in 'cdab cdab'; the tie goes to the pair seen first, "
                "(99, 100); got {tie}", tie=tie))
    accent = _pairs(fn("éé", 1))
    if accent != [(195, 169)]:
        mistake(tr("'é' is two UTF-8 bytes (195, 169): train on text.encode('utf-8'), not on code points; got {accent}",
                accent=accent))
    expect_value_error(fn, "abc", -1, what="num_merges = -1")
    passed("train_bpe")


@public_check
def check_bpe_encode(fn) -> None:
    got = fn("abcbcbc", [(97, 98), (98, 99)])
    if got == [97, 257, 257, 257]:
        if fn("abcbcbc", [(98, 99), (97, 98)]) == [257, 99, 256, 256]:
            mistake(tr("you applied the merges newest first: (b, c) is merge 1, made after (a, b), merge 0; training "
                       "made merge 1 from a sequence in which merge 0 was already done, so apply the lowest merge "
                       "index first"))
        mistake(tr("merge the pair with the LOWEST merge index first ((a, b) is merge 0), not the most frequent one"))
    if got != [256, 99, 257, 257]:
        fail(tr("bpe_encode('abcbcbc', [(97, 98), (98, 99)]) should be [256, 99, 257, 257]; got {got}", got=got))
    got = fn("abc", [(98, 99), (97, 98)])
    if got == [257, 99]:
        mistake(tr("(b, c) is merge 0 and must be applied before (a, b), wherever it is: not greedily left to right"))
    if got != [97, 256]:
        fail(tr("bpe_encode('abc', [(98, 99), (97, 98)]) should be [97, 256]; got {got}", got=got))
    got = fn("aaaaa", [(97, 97), (256, 256)])
    if got != [257, 97]:
        mistake(tr("'aaaaa' with [(97, 97), (256, 256)] should be [257, 97] (merges never overlap); got {got}",
                   got=got))
    if fn("é", []) != [195, 169]:
        mistake(tr("start from the UTF-8 bytes: 'é' is [195, 169]"))
    passed("bpe_encode")


@public_check
def check_bpe_decode(fn) -> None:
    merges = [(97, 97), (256, 256), (104, 105)]
    got = fn([258, 33, 257, 256, 97], merges)
    if got != "hi!aaaaaaa":
        fail(tr("bpe_decode([258, 33, 257, 256, 97], {merges}) should be 'hi!aaaaaaa' (257 = 256 + 256 = 'aaaa'); "
                "got {got!r}", merges=merges, got=got))
    raw = "注".encode("utf-8")
    got = fn([256, raw[2]], [(raw[0], raw[1])])
    if got == "\ufffd\ufffd" or got == "\ufffd" * 3:
        mistake(tr("join the bytes of ALL tokens first and decode once: a character may be split across tokens"))
    if got != "注":
        fail(tr("a character split over two tokens should come back whole ('注'); got {got!r}", got=got))
    try:
        cut = fn([raw[0], raw[1]], [])
    except UnicodeDecodeError:
        mistake(tr("decode with errors='replace': an incomplete character becomes U+FFFD instead of raising"))
    if cut != "\ufffd":
        fail(tr("the first two bytes of '注' should decode to '\\ufffd' (errors='replace'); got {cut!r}", cut=cut))
    expect_value_error(fn, [300], [], what=tr("an id that is not in the vocabulary"))
    passed("bpe_decode")

"""Hidden tests for chapter 08: GPT with a KV cache, next-token targets, temperature, top-k, top-p,
sampling, generation, beam search and a byte-level BPE tokenizer.

Oracles: an independent GPT-2 forward pass written here with torch's own routines
(F.layer_norm, F.scaled_dot_product_attention, the tanh GELU) on the same, randomised weights;
tiny deterministic language models built here for generation and beam search; brute force over
every continuation; statistics (chi-square) for sampling, so a correct sampler that draws in another
way (Gumbel-max, inverse CDF) keeps full marks; an independent BPE (code points, Counter and
str.replace) that agrees with minbpe's BasicTokenizer. Correct versions of this chapter's pieces
an exercise may call are written here and stand in for the learner's, so a mistake costs once.
"""
import itertools
import math
import random
from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.boundary.spec import (
    DECODER_LAYER,
    ENCODER_LAYER,
    MULTI_HEAD_FUNCTION,
    MULTI_HEAD_MODULE,
    SCALED_DOT_PRODUCT,
    Exercise,
    FixedDropout,
    assert_raises_value_error,
    assert_tensor,
    changed_in_place,  # in-place changes are judged by the in-place rule only (with kept)
    fix_dropout,
    kept,
    manual_seed,
    mixed,
    randn,
    seeded,
    seeded_by_name,
)

# ---------------------------------------------------------------- correct pieces, written here

def temperature_stand_in(logits, temperature):
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    return logits / temperature


def top_k_stand_in(logits, k):
    if k < 1:
        raise ValueError("k must be >= 1")
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_stand_in(logits, p):
    if not 0 < p <= 1:
        raise ValueError("p must be in (0, 1]")
    probs = logits.softmax(-1)
    sorted_probs, order = probs.sort(-1, descending=True)
    keep_sorted = sorted_probs.cumsum(-1) - sorted_probs < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def sample_stand_in(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if logits.dim() != 2 or temperature < 0:
        raise ValueError("logits should be (B, V) and temperature >= 0")
    if temperature == 0:
        return logits.argmax(-1)
    logits = temperature_stand_in(logits, temperature)
    if top_k is not None:
        logits = top_k_stand_in(logits, top_k)
    if top_p is not None:
        logits = top_p_stand_in(logits, top_p)
    return torch.multinomial(logits.softmax(-1), 1, generator=generator)[:, 0]


def generate_stand_in(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None,
                      use_cache=False):
    cache, cached, bs = None, 0, model.block_size
    with torch.no_grad():
        for _ in range(max_new_tokens):
            if use_cache and cache is not None and cached < bs:
                logits, cache = model(idx[:, -1:], cache=cache, use_cache=True)
                cached += 1
            elif use_cache:
                logits, cache = model(idx[:, -bs:], use_cache=True)
                cached = min(idx.shape[1], bs)
            else:
                logits = model(idx[:, -bs:])
            idx = torch.cat([idx, sample_stand_in(logits[:, -1], temperature, top_k, top_p, generator)[:, None]], 1)
    return idx


SAMPLING_STAND_INS = {"apply_temperature": temperature_stand_in, "top_k_filter": top_k_stand_in,
                      "top_p_filter": top_p_stand_in}


# ---------------------------------------------------------------- GPT weights and the oracle

V_, BLOCK_, LAYERS_, HEADS_, D_ = 11, 12, 2, 2, 16


def gpt_names(n_layer=LAYERS_):
    names = {"token_embedding.weight", "position_embedding.weight", "ln_f.weight", "ln_f.bias"}
    for i in range(n_layer):
        for part in ("ln_1", "qkv", "attn_out", "ln_2", "mlp_in", "mlp_out"):
            names |= {f"blocks.{i}.{part}.weight", f"blocks.{i}.{part}.bias"}
    return names


def gpt_shapes(V=V_, block=BLOCK_, n_layer=LAYERS_, D=D_):
    shapes = {"token_embedding.weight": (V, D), "position_embedding.weight": (block, D),
              "ln_f.weight": (D,), "ln_f.bias": (D,)}
    sizes = {"ln_1": (D, None), "qkv": (3 * D, D), "attn_out": (D, D), "ln_2": (D, None),
             "mlp_in": (4 * D, D), "mlp_out": (D, 4 * D)}
    for i in range(n_layer):
        for part, (out, inp) in sizes.items():
            shapes[f"blocks.{i}.{part}.weight"] = (out, inp) if inp else (out,)
            shapes[f"blocks.{i}.{part}.bias"] = (out,)
    return shapes


def random_gpt_state(seed: int, n_layer=LAYERS_) -> dict:
    """Seeded values for every documented parameter, each seeded by its own name."""
    state = {}
    for name, shape in gpt_shapes(n_layer=n_layer).items():
        value = torch.randn(shape, generator=seeded_by_name(name, seed))
        if ".ln_" in name or name.startswith("ln_"):
            value = (1.0 if name.endswith("weight") else 0.0) + 0.2 * value
        elif "embedding" in name:
            value = 0.6 * value
        elif len(shape) == 2:
            value = value / math.sqrt(shape[1])
        else:
            value = 0.1 * value
        state[name] = value
    return state


def loaded_gpt(cls, seed, dropout=0.0, block=BLOCK_):
    model = cls(V_, block, LAYERS_, HEADS_, D_, dropout=dropout)
    params = dict(model.named_parameters())
    want = gpt_names()
    if set(params) != want:
        raise AssertionError(f"parameters missing: {sorted(want - set(params))[:4]}; "
                             f"unexpected: {sorted(set(params) - want)[:4]}")
    state = random_gpt_state(seed)
    if block != BLOCK_:
        state["position_embedding.weight"] = randn(block, D_, seed=seed + 7) * 0.6
    model.load_state_dict(state, strict=False)
    return model.eval(), state


GPT_DROPOUT_SITES = ("the embeddings", "the attention weights", "the attention output", "the feed-forward output")


def oracle_logits(state, idx, n_head=HEADS_, n_layer=LAYERS_, drop=None):
    """GPT-2's forward pass from torch routines: Pre-LN blocks, causal attention, tanh GELU, tied output.
    `drop` maps dropout sites (GPT_DROPOUT_SITES) to the dropout applied there (none by default)."""
    drop = {site: (drop or {}).get(site, nn.Identity()) for site in GPT_DROPOUT_SITES}
    W = state["token_embedding.weight"]
    B, T = idx.shape
    D = W.shape[1]
    x = drop["the embeddings"](W[idx] + state["position_embedding.weight"][:T])

    def norm(h, name):
        return F.layer_norm(h, (D,), state[name + ".weight"], state[name + ".bias"], 1e-5)

    def linear(h, name):
        return F.linear(h, state[name + ".weight"], state[name + ".bias"])

    for i in range(n_layer):
        p = f"blocks.{i}."
        q, k, v = linear(norm(x, p + "ln_1"), p + "qkv").split(D, -1)
        q, k, v = (t.reshape(B, T, n_head, D // n_head).transpose(1, 2) for t in (q, k, v))
        if isinstance(drop["the attention weights"], nn.Identity):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, Dh)
        else:
            scores = (q @ k.transpose(-2, -1) / math.sqrt(D // n_head)).masked_fill(
                ~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            a = drop["the attention weights"](scores.softmax(-1)) @ v
        x = x + drop["the attention output"](linear(a.transpose(1, 2).reshape(B, T, D), p + "attn_out"))
        x = x + drop["the feed-forward output"](
            linear(F.gelu(linear(norm(x, p + "ln_2"), p + "mlp_in"), approximate="tanh"), p + "mlp_out"))
    return (norm(x, "ln_f") @ W.T).detach()


def token_ids(B, T, seed, V=V_):
    return torch.randint(0, V, (B, T), generator=seeded(seed))


def unpack(result, what):
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(f"{what} with use_cache=True should return a tuple (logits, cache), "
                             f"got {type(result).__name__}")
    return result


# ---------------------------------------------------------------- GPT
GPT = Exercise("GPT", points=6,
               forbidden=SCALED_DOT_PRODUCT + MULTI_HEAD_FUNCTION + MULTI_HEAD_MODULE + DECODER_LAYER + ENCODER_LAYER,
               stand_ins={"generate": generate_stand_in, "sample_next_token": sample_stand_in})


@GPT.check("parameters: exactly the documented names and shapes (the output layer is the token embedding)",
           states=("weights are loaded by these names", "which is also the output layer (tied weights)",
                   "qkv: nn.Linear(D, 3D)", "mlp_in: nn.Linear(D, 4D); mlp_out: nn.Linear(4D, D)"), part="__init__")
def _(cls):
    model = cls(V_, BLOCK_, LAYERS_, HEADS_, D_)
    params = {k: tuple(v.shape) for k, v in model.named_parameters()}
    want = gpt_shapes()
    if set(params) != set(want):
        raise AssertionError(f"parameters missing: {sorted(set(want) - set(params))[:4]}; "
                             f"unexpected: {sorted(set(params) - set(want))[:4]}")
    wrong = [f"{k} {params[k]} (expected {want[k]})" for k in want if params[k] != want[k]]
    if wrong:
        raise AssertionError("wrong shapes: " + "; ".join(wrong[:3]))


@GPT.check("fresh weights as GPT-2: Linear and Embedding weights with std 0.02, biases 0",
           states=("Linear and Embedding weights from N(0, 0.02^2), biases 0",), part="__init__")
def _(cls):
    manual_seed(801)
    model = cls(V_, BLOCK_, LAYERS_, HEADS_, 32)
    if not any(p.dim() == 2 for p in model.parameters()):  # else a module with no layers passes
        raise AssertionError("the model holds no weight matrices: create its layers in __init__")
    for name, p in model.named_parameters():
        if p.dim() == 2 and not 0.015 < p.detach().std().item() < 0.025:
            raise AssertionError(f"{name} has std {p.detach().std().item():.4f}; initialise it from N(0, 0.02^2)")
        if p.dim() == 1 and name.endswith("bias") and p.detach().abs().max() > 0:
            raise AssertionError(f"{name} should start at 0")


@GPT.check("logits equal an independent GPT-2 forward pass (B=3, T=7 < block_size), eval mode",
           states=("queries, keys and values side by side in that order",
                   "applies GELU in its tanh form", "the final norm ln_f of the last block's output times the token "
                   "embedding matrix", "Each block is Pre-LN",
                   "softmax(q k^T / sqrt(Dh))"))
def _(cls):
    model, state = loaded_gpt(cls, 810)
    idx = token_ids(3, 7, 811)
    assert_tensor(model(idx), oracle_logits(state, idx), atol=1e-5, what="GPT(idx)")


@GPT.check("a full block (T == block_size) and T=1 equal the oracle")
def _(cls):
    model, state = loaded_gpt(cls, 820)
    for B, T in ((2, BLOCK_), (4, 1)):
        idx = token_ids(B, T, 821 + T)
        assert_tensor(model(idx), oracle_logits(state, idx), atol=1e-5, what=f"GPT(idx) with B={B}, T={T}")


@GPT.check("causal: changing later tokens leaves the logits of earlier positions unchanged",
           states=("with a causal mask",))
def _(cls):
    model, _ = loaded_gpt(cls, 830)
    idx = token_ids(2, 8, 831)
    changed = idx.clone()
    changed[:, 5:] = (changed[:, 5:] + 3) % V_
    a, b = model(idx), model(changed)
    assert_tensor(b[:, :5], a[:, :5].detach(), atol=1e-5, what="logits 0..4 after changing tokens 5..7")


@GPT.check("dropout: eval mode gives the dropout-free logits; train mode drops (outputs change)",
           states=("in training mode; in eval mode the logits are dropout-free",))
def _(cls):
    model, state = loaded_gpt(cls, 840, dropout=0.5)
    idx = token_ids(2, 6, 841)
    assert_tensor(model(idx), oracle_logits(state, idx), atol=1e-5, what="GPT(dropout=0.5).eval()(idx)")
    model.train()
    manual_seed(842)
    if torch.allclose(model(idx).detach(), oracle_logits(state, idx), atol=1e-4):
        raise AssertionError("in train mode with dropout=0.5 the logits should differ from eval mode")


@GPT.check("training mode, dropout=0.2, `drop` swapped for a fixed mask: dropout on the embeddings, on the attention "
           "weights and on each sublayer's output",
           states=("on the embeddings, on the attention weights and on each sublayer's output",
                   "Apply every dropout through `drop`", "the hidden tests swap it for a fixed mask"))
def _(cls):
    model, state = loaded_gpt(cls, 845, dropout=0.2)
    idx = token_ids(2, 6, 846)
    fix_dropout(model).train()
    logits = model(idx)
    fixed = {site: FixedDropout(0.2) for site in GPT_DROPOUT_SITES}
    try:
        assert_tensor(logits, oracle_logits(state, idx, drop=fixed), atol=1e-5,
                      what="training-mode logits (fixed masks)")
    except AssertionError:
        # each site alone, then both sublayers' outputs (a label of its own: the feedback translates it whole)
        for label, missing in [(site, (site,)) for site in GPT_DROPOUT_SITES] + [
                ("both sublayers' outputs", GPT_DROPOUT_SITES[2:])]:
            without = oracle_logits(state, idx, drop={k: d for k, d in fixed.items() if k not in missing})
            if type(logits) is torch.Tensor and torch.allclose(logits.detach(), without, atol=1e-5):
                raise AssertionError(f"training-mode logits match a GPT without dropout on {label}: "
                                     "dropout acts on the embeddings, on the attention weights and on each sublayer's "
                                     "output") from None
        raise


@GPT.check("use_cache=True returns (logits, cache): one (keys, values) pair per block, each (B, H, T, Dh)",
           states=("a list with one (keys, values) pair per block, each (B, H, S, Dh)",
                   "(logits, new_cache) when it is True"))
def _(cls):
    model, state = loaded_gpt(cls, 850)
    idx = token_ids(2, 5, 851)
    logits, cache = unpack(model(idx, use_cache=True), "GPT(idx)")
    assert_tensor(logits, oracle_logits(state, idx), atol=1e-5, what="logits with use_cache=True")
    if not isinstance(cache, (list, tuple)) or len(cache) != LAYERS_:
        raise AssertionError(f"the cache should be a list with one entry per block ({LAYERS_}), got "
                             f"{type(cache).__name__} of length {len(cache) if hasattr(cache, '__len__') else '?'}")
    for i, entry in enumerate(cache):
        if not isinstance(entry, (list, tuple)) or len(entry) != 2:
            raise AssertionError(f"cache[{i}] should be a pair (keys, values)")
        for what, t in zip(("keys", "values"), entry):
            if type(t) is not torch.Tensor or tuple(t.shape) != (2, HEADS_, 5, D_ // HEADS_):
                raise AssertionError(f"cache[{i}] {what} should have shape (B, H, T, Dh) = "
                                     f"{(2, HEADS_, 5, D_ // HEADS_)}, got {tuple(getattr(t, 'shape', ()))}")


@GPT.check("with the cache: a prompt of 4, then 1 token, then 3 at once give the logits of one full pass",
           states=("their positions are S, ..., S + T - 1",
                   "token t attends to the S cached positions and to idx's tokens up to itself"))
def _(cls):
    model, state = loaded_gpt(cls, 860)
    idx = token_ids(3, 8, 861)
    expected = oracle_logits(state, idx)
    l1, cache = unpack(model(idx[:, :4], use_cache=True), "GPT(prompt)")
    l2, cache = unpack(model(idx[:, 4:5], cache=cache, use_cache=True), "GPT(1 token, cache)")
    assert_tensor(l2, expected[:, 4:5], atol=1e-5, what="logits of token 4 fed with the cache of tokens 0..3")
    l3, cache = unpack(model(idx[:, 5:], cache=cache, use_cache=True), "GPT(3 tokens, cache)")
    assert_tensor(l3, expected[:, 5:], atol=1e-5, what="logits of tokens 5..7 fed at once with a cache of 5")


@GPT.check("the cache passed in is left unchanged: extending the same cache twice gives the same logits",
           states=("The cache passed in is left unchanged",))
def _(cls):
    model, state = loaded_gpt(cls, 870)
    idx = token_ids(2, 6, 871)
    _, cache = unpack(model(idx[:, :3], use_cache=True), "GPT(prompt)")
    before = kept(cache)
    first, _ = unpack(model(idx[:, 3:5], cache=cache, use_cache=True), "GPT(2 tokens, cache)")
    if changed_in_place(cache, before):
        raise AssertionError("GPT changed the cache passed in (its list or its tensors); return a new cache")
    again, _ = unpack(model(idx[:, 3:5], cache=cache, use_cache=True), "GPT(the same 2 tokens, the same cache)")
    assert_tensor(again, first.detach(), atol=1e-6, what="logits when the same cache is used a second time")
    assert_tensor(first, oracle_logits(state, idx[:, :5])[:, 3:5], atol=1e-5, what="logits with the cache")


@GPT.side_check("ValueError: T > block_size, cached + new > block_size, idx not (B, T), d_model % n_head != 0",
                states=("ValueError if d_model % n_head != 0, idx is not (B, T), or S + T > block_size",))
def _(cls):
    model, _ = loaded_gpt(cls, 880)
    assert_raises_value_error(model, token_ids(1, BLOCK_ + 1, 881))
    _, cache = unpack(model(token_ids(1, BLOCK_ - 1, 882), use_cache=True), "GPT(idx)")
    assert_raises_value_error(model, token_ids(1, 2, 883), cache=cache, use_cache=True)
    assert_raises_value_error(model, torch.tensor([1, 2, 3]))
    assert_raises_value_error(cls, V_, BLOCK_, LAYERS_, 3, D_)


@GPT.check("generate(use_cache=True) gives exactly the tokens of use_cache=False with your GPT, same generator",
           states=("the keys and values of the S positions already seen (after qkv, split into heads)",))
def _(cls):
    model, _ = loaded_gpt(cls, 890)
    prompt = token_ids(3, 5, 891)
    plain = generate_stand_in(model, prompt, 20, generator=seeded(892))
    cached = generate_stand_in(model, prompt, 20, generator=seeded(892), use_cache=True)
    if not torch.equal(plain, cached):
        raise AssertionError("sampling 20 tokens (past block_size=12) with the cache gave other tokens than "
                             "without it: the cached forward pass differs from the full one")


# ---------------------------------------------------------------- next_token_targets
next_token_targets = Exercise("next_token_targets", points=1)


@next_token_targets.check("fixed values: inputs drop the last token, targets drop the first",
                          states=("inputs are each row without its last token",))
def _(fn):
    idx = torch.tensor([[5, 1, 4, 2, 3], [9, 8, 7, 6, 0]])
    result = fn(idx)
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError("next_token_targets should return a tuple (inputs, targets)")
    assert_tensor(result[0], idx[:, :-1], atol=0, rtol=0, what="inputs")
    assert_tensor(result[1], idx[:, 1:], atol=0, rtol=0, what="targets")


@next_token_targets.check("T=2 and a batch of 4: shapes (B, T-1), the dtype kept, idx unchanged",
                          states=("Both keep idx's dtype", "idx is not modified"))
def _(fn):
    idx = torch.randint(0, 50, (4, 2), generator=seeded(901), dtype=torch.int32)
    before = idx.clone()
    inputs, targets = fn(idx)
    assert_tensor(inputs, before[:, :1], atol=0, rtol=0, what="inputs")
    assert_tensor(targets, before[:, 1:], atol=0, rtol=0, what="targets")
    if changed_in_place(idx, before):
        raise AssertionError("next_token_targets changed idx")


@next_token_targets.side_check("ValueError for a 1-D idx and for T < 2",
                               states=("ValueError if idx is not 2-dimensional or T < 2",))
def _(fn):
    assert_raises_value_error(fn, torch.tensor([1, 2, 3]))
    assert_raises_value_error(fn, torch.tensor([[1], [2]]))


# ---------------------------------------------------------------- apply_temperature
apply_temperature = Exercise("apply_temperature", points=1)


@apply_temperature.check("fixed values: divides the logits by the temperature (0.5 and 2)",
                         states=("logits / temperature",))
def _(fn):
    logits = torch.tensor([[2.0, -1.0, 0.5], [0.0, 3.0, -4.0]])
    assert_tensor(fn(logits, 0.5), logits * 2, what="apply_temperature(logits, 0.5)")
    assert_tensor(fn(logits, 2.0), logits / 2, what="apply_temperature(logits, 2.0)")


@apply_temperature.check("any leading axes, float64 kept, -inf stays -inf, the input is not modified",
                         states=("(..., V), may hold -inf", "float64 stays float64", "logits is not modified"))
def _(fn):
    logits = randn(2, 3, 5, seed=911).double()
    logits[0, 1, 2] = float("-inf")
    before = logits.clone()
    assert_tensor(fn(logits, 0.7), before / 0.7, what="apply_temperature(float64 (2, 3, 5), 0.7)")
    if changed_in_place(logits, before):
        raise AssertionError("apply_temperature modified logits in place")


@apply_temperature.side_check("ValueError for temperature 0 and below", states=("ValueError if temperature <= 0",))
def _(fn):
    assert_raises_value_error(fn, torch.zeros(1, 3), 0)
    assert_raises_value_error(fn, torch.zeros(1, 3), -1.0)


# ---------------------------------------------------------------- top_k_filter
top_k_filter = Exercise("top_k_filter", points=2)
NEG = float("-inf")


@top_k_filter.check("fixed values: k=3 keeps the three largest logits, the rest -inf",
                    states=("every logit strictly below the row's k-th largest becomes -inf",))
def _(fn):
    logits = torch.tensor([[3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0, 6.0]])
    expected = torch.tensor([[NEG, NEG, NEG, NEG, 5.0, 9.0, NEG, 6.0]])
    assert_tensor(fn(logits, 3), expected, atol=0, rtol=0, what="top_k_filter(logits, 3)")


@top_k_filter.check("ties with the k-th largest are all kept (k=2 keeps 3.0 and every 1.0)",
                    states=("ties with the k-th largest are all kept",))
def _(fn):
    logits = torch.tensor([[1.0, 3.0, 1.0, 0.0, 1.0, -2.0]])
    expected = torch.tensor([[1.0, 3.0, 1.0, NEG, 1.0, NEG]])
    assert_tensor(fn(logits, 2), expected, atol=0, rtol=0, what="top_k_filter(logits with ties, 2)")


@top_k_filter.check("every row on its own: a batch of rows on different scales, and a (2, 3, V) tensor",
                    states=("every row (every index of the leading axes) is filtered on its own",))
def _(fn):
    scale, shift = torch.tensor([[1.0], [10.0], [0.1], [100.0]]), torch.tensor([[0.0], [50], [-7], [3]])
    logits = randn(4, 9, seed=921) * scale + shift
    assert_tensor(fn(logits, 4), top_k_stand_in(logits, 4), atol=0, rtol=0, what="top_k_filter((4, 9), 4)")
    logits = randn(2, 3, 7, seed=922) + 5 * randn(2, 3, 1, seed=923)
    assert_tensor(fn(logits, 2), top_k_stand_in(logits, 2), atol=0, rtol=0, what="top_k_filter((2, 3, 7), 2)")


@top_k_filter.check("k >= V keeps every token in a new tensor (not logits itself); k=1 keeps the maximum",
                    states=("k >= V keeps every token", "a new tensor"))
def _(fn):
    logits = randn(3, 5, seed=924)
    for k in (5, 8):
        out = fn(logits, k)
        if out is logits:
            raise AssertionError(f"top_k_filter(logits, {k}) with V=5 returned logits itself: return a new tensor "
                                 "(a caller that changes the result would change its logits)")
        assert_tensor(out, logits, atol=0, rtol=0, what=f"top_k_filter(logits, {k}) with V=5")
    assert_tensor(fn(logits, 1), top_k_stand_in(logits, 1), atol=0, rtol=0, what="top_k_filter(logits, 1)")


@top_k_filter.check("float64 kept, the input not modified, -inf input stays; ValueError for k < 1",
                    states=("float64 stays float64", "logits is not modified", "ValueError if k < 1"))
def _(fn):
    logits = randn(2, 6, seed=925).double()
    logits[1, 0] = NEG
    before = logits.clone()
    assert_tensor(fn(logits, 3), top_k_stand_in(before, 3), atol=0, rtol=0, what="top_k_filter(float64, 3)")
    if changed_in_place(logits, before):
        raise AssertionError("top_k_filter modified logits in place")
    assert_raises_value_error(fn, logits, 0)


# ---------------------------------------------------------------- top_p_filter
top_p_filter = Exercise("top_p_filter", points=2)

# probabilities 0.5, 0.25, 0.15, 0.1 placed in a shuffled vocabulary order
NUCLEUS_PROBS = torch.tensor([0.15, 0.5, 0.1, 0.25])


def nucleus_expected(probs: torch.Tensor, p: float) -> torch.Tensor:
    """Kept tokens, by the rule itself, in float64, one token at a time."""
    keep = torch.zeros(probs.shape[-1], dtype=torch.bool)
    mass = 0.0
    for i in sorted(range(len(probs)), key=lambda j: -float(probs[j])):
        keep[i] = mass < p
        mass += float(probs[i])
    return keep


@top_p_filter.check("keeps the token that crosses p: p=0.6 keeps 0.5 and 0.25, p=0.8 also keeps 0.15",
                    states=("the token that crosses p is kept",))
def _(fn):
    logits = NUCLEUS_PROBS.log()[None]
    for p, kept_mask in ((0.6, [False, True, False, True]), (0.8, [True, True, False, True])):
        expected = logits.masked_fill(~torch.tensor([kept_mask]), NEG)
        assert_tensor(fn(logits, p), expected, atol=0, rtol=0, what=f"top_p_filter(logits, {p})")


@top_p_filter.check("the top token is always kept: p below its probability keeps it alone",
                    states=("the top token always is",))
def _(fn):
    logits = NUCLEUS_PROBS.log()[None]
    for p in (0.3, 1e-6):
        expected = logits.masked_fill(torch.tensor([[True, False, True, True]]), NEG)
        assert_tensor(fn(logits, p), expected, atol=0, rtol=0, what=f"top_p_filter(logits, {p})")


@top_p_filter.check("the exact boundary: four equal tokens (0.25 each) keep 2 at p=0.5 and 1 at p=0.25",
                    states=("token i is kept when the mass of the tokens before it is < p",))
def _(fn):
    logits = torch.tensor([[0.0, NEG, 0.0, 0.0, NEG, 0.0]])
    for p, count in ((0.5, 2), (0.25, 1), (0.5001, 3)):
        out = fn(logits, p)
        if type(out) is not torch.Tensor or out.shape != logits.shape:
            raise AssertionError(f"top_p_filter should return a tensor of shape {tuple(logits.shape)}")
        kept = int(torch.isfinite(out).sum())
        if kept != count or torch.isfinite(out[0, [1, 4]]).any():
            raise AssertionError(f"with four tokens of probability 0.25 and p={p}, {count} should be kept "
                                 f"(a token is kept when the mass before it is < p); {kept} were")


@top_p_filter.check("every row on its own (a batch and a (2, 2, V) tensor) and p=1 keeps every token",
                    states=("every row is filtered on its own",))
def _(fn):
    for shape, seed in (((5, 8), 931), ((2, 2, 6), 932)):
        logits = 2 * randn(*shape, seed=seed)
        for p in (0.5, 0.9):
            probs = logits.softmax(-1).reshape(-1, shape[-1])
            keep = torch.stack([nucleus_expected(row, p) for row in probs]).reshape(shape)
            assert_tensor(fn(logits, p), logits.masked_fill(~keep, NEG), atol=0, rtol=0,
                          what=f"top_p_filter({tuple(shape)}, {p})")
        assert_tensor(fn(logits, 1.0), logits, atol=0, rtol=0, what=f"top_p_filter({tuple(shape)}, 1.0)")


@top_p_filter.check("float64 kept, the input not modified; ValueError for p outside (0, 1]",
                    states=("float64 stays float64", "logits is not modified", "ValueError if p is not in (0, 1]"))
def _(fn):
    logits = randn(3, 5, seed=933).double()
    before = logits.clone()
    out = fn(logits, 0.7)
    assert_tensor(out, top_p_stand_in(before, 0.7), atol=0, rtol=0, what="top_p_filter(float64, 0.7)")
    if changed_in_place(logits, before):
        raise AssertionError("top_p_filter modified logits in place")
    for p in (0.0, -0.1, 1.5):
        assert_raises_value_error(fn, logits, p)


# ---------------------------------------------------------------- sample_next_token
sample_next_token = Exercise("sample_next_token", points=3, stand_ins=SAMPLING_STAND_INS)

DRAWS = 20000


def chi_square_threshold(df: int) -> float:
    """Wilson-Hilferty: the chi-square value exceeded with probability about 1e-7."""
    z = 5.2
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def pooled(observed: torch.Tensor, expected: torch.Tensor, least: float = 5.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The bins with the least likely tokens merged into one until it expects `least` draws: Pearson's statistic
    needs about 5 in each bin (a token expected 0.07 times and drawn twice adds 52 to it: a correct `generate`
    failed so for one secret of CI's). Tokens that rare cannot be judged one by one from DRAWS draws anyway."""
    order = torch.argsort(expected)
    observed, expected = observed[order], expected[order]
    merged, pool = 0, 0.0
    while merged < len(expected) and pool < least:
        pool += float(expected[merged])
        merged += 1
    if merged < 2:  # the least likely bin alone expects enough
        return observed, expected
    return (torch.cat([observed[:merged].sum()[None], observed[merged:]]),
            torch.cat([expected[:merged].sum()[None], expected[merged:]]))


def assert_frequencies(samples, probs: torch.Tensor, what: str) -> None:
    """samples (N,) drawn from probs (V,): zero-probability tokens never, the rest in proportion."""
    if type(samples) is not torch.Tensor or samples.shape != (DRAWS,):
        raise AssertionError(f"{what}: expected a tensor of shape ({DRAWS},), got "
                             f"{tuple(samples.shape) if type(samples) is torch.Tensor else type(samples).__name__}")
    counts = torch.bincount(samples.long(), minlength=len(probs)).double()
    if len(counts) > len(probs):
        raise AssertionError(f"{what}: drew token ids outside the vocabulary")
    banned = probs == 0
    if counts[banned].sum() > 0:
        raise AssertionError(f"{what}: drew tokens {torch.nonzero(banned & (counts > 0))[:, 0].tolist()}, "
                             "which should have probability 0")
    observed, expected = pooled(counts[~banned], probs[~banned].double() * DRAWS)
    stat = ((observed - expected) ** 2 / expected).sum().item()
    df = len(expected) - 1
    if df > 0 and stat > chi_square_threshold(df):
        freq = (counts / DRAWS).tolist()
        raise AssertionError(f"{what}: frequencies {[round(f, 3) for f in freq]} do not match the probabilities "
                             f"{[round(float(q), 3) for q in probs]} (chi-square {stat:.0f})")


SAMPLE_ROWS = torch.tensor([[2.0, 1.0, 0.5, -1.0, 0.0, 1.5], [-1.0, 0.0, 2.5, 0.3, -2.0, 1.0]])


def draw(fn, rows: torch.Tensor, seed: int, **kwargs) -> list:
    """One call on every row repeated DRAWS times, interleaved; the samples of each row."""
    batch = rows.repeat(DRAWS, 1)
    out = fn(batch, generator=seeded(seed), **kwargs)
    if type(out) is not torch.Tensor or out.shape != (len(batch),):
        raise AssertionError(f"sample_next_token on logits of shape {tuple(batch.shape)} should return a tensor "
                             f"of shape ({len(batch)},), got "
                             f"{tuple(out.shape) if type(out) is torch.Tensor else type(out).__name__}")
    if out.dtype != torch.int64:
        raise AssertionError(f"the sampled ids should be int64, got {out.dtype}")
    return [out[i::len(rows)] for i in range(len(rows))]


@sample_next_token.check("temperature 1: each row of a batch drawn from its own softmax (chi-square, 20000 draws)",
                         states=("row b drawn from softmax of its logits",))
def _(fn):
    for row, samples in zip(SAMPLE_ROWS, draw(fn, SAMPLE_ROWS, 941)):
        assert_frequencies(samples, row.softmax(-1), "sample_next_token(logits)")


@sample_next_token.check("temperature 0.5 and 2.0 draw from softmax(logits / temperature)",
                         states=("apply_temperature",))
def _(fn):
    for t, seed in ((0.5, 942), (2.0, 943)):
        for row, samples in zip(SAMPLE_ROWS, draw(fn, SAMPLE_ROWS, seed, temperature=t)):
            assert_frequencies(samples, (row / t).softmax(-1), f"sample_next_token(logits, temperature={t})")


@sample_next_token.check("temperature 0 is greedy: the argmax of every row, int64 (B,), filters ignored",
                         states=("0 means greedy: the argmax of each row",
                                 "top_k, top_p and the generator are then not used", "(B,) int64"))
def _(fn):
    logits = randn(5, 7, seed=944)
    for kwargs in ({}, {"top_k": 3, "top_p": 0.5}):
        out = fn(logits, temperature=0, **kwargs)
        assert_tensor(out, logits.argmax(-1), atol=0, rtol=0,
                      what=f"sample_next_token(logits, temperature=0, {kwargs})")


@sample_next_token.check("top_k=3 and top_p=0.7: filtered tokens are never drawn, the rest in proportion",
                         states=("top_k, top_p: optional filters (None: not used)",))
def _(fn):
    for kwargs, seed in (({"top_k": 3}, 945), ({"top_p": 0.7}, 946)):
        for row, samples in zip(SAMPLE_ROWS, draw(fn, SAMPLE_ROWS, seed, **kwargs)):
            probs = sample_probs(row, **kwargs)
            assert_frequencies(samples, probs, f"sample_next_token(logits, {kwargs})")


def sample_probs(row, temperature=1.0, top_k=None, top_p=None):
    logits = row[None] / temperature
    if top_k is not None:
        logits = top_k_stand_in(logits, top_k)
    if top_p is not None:
        logits = top_p_stand_in(logits, top_p)
    return logits.softmax(-1)[0]


ORDER_ROW = torch.tensor([[3.0, 2.6, 2.2, 1.0, 0.0, -1.0]])


@sample_next_token.check("the order: temperature, then top-k, then top-p measured on what top-k left",
                         states=("in this order, apply_temperature, top_k_filter, then top_p_filter (on the already "
                                 "filtered logits)",))
def _(fn):
    # temperature before top-p: at T=3 the nucleus of p=0.5 has 3 tokens, at T=1 only 2;
    # top-k before top-p: after top_k=2 the top token alone holds more than p=0.55.
    for kwargs, seed in (({"temperature": 3.0, "top_p": 0.5}, 947), ({"top_k": 2, "top_p": 0.55}, 948),
                         ({"temperature": 0.5, "top_k": 4, "top_p": 0.9}, 949)):
        (samples,) = draw(fn, ORDER_ROW, seed, **kwargs)
        assert_frequencies(samples, sample_probs(ORDER_ROW[0], **kwargs), f"sample_next_token(logits, {kwargs})")


@sample_next_token.check("the generator is the only randomness: one seed, the same draws, whatever the global seed",
                         states=("draw every random number from `generator`",))
def _(fn):
    logits = randn(64, 5, seed=950)
    manual_seed(1)
    a = fn(logits, generator=seeded(951))
    manual_seed(2)
    b = fn(logits, generator=seeded(951))
    c = fn(logits, generator=seeded(952))
    if type(a) is not torch.Tensor or not torch.equal(a, b):
        raise AssertionError("two calls with generators seeded alike gave different tokens: take every random "
                             "number from `generator` (torch.multinomial(..., generator=generator))")
    if torch.equal(a, c):
        raise AssertionError("generators with different seeds gave identical tokens for 64 rows")


@sample_next_token.side_check("ValueError for 1-D logits and a negative temperature",
                              states=("ValueError if logits is not 2-dimensional or temperature < 0",))
def _(fn):
    assert_raises_value_error(fn, torch.zeros(5))
    assert_raises_value_error(fn, torch.zeros(2, 5), temperature=-0.5)


# ---------------------------------------------------------------- generate
generate = Exercise("generate", points=4, stand_ins={"sample_next_token": sample_stand_in, **SAMPLING_STAND_INS})


class WindowModel(nn.Module):
    """A deterministic language model with GPT's interface whose logits, like a GPT with learned
    positions, depend on where the window starts: at window position t,
    logits = first[window[0]] + current[window[t]] + place[t]. Its cache is the window so far.
    It raises ValueError when asked to see more than block_size tokens, and records every call."""

    def __init__(self, V=7, block_size=6, seed=960):
        super().__init__()
        self.block_size, self.V = block_size, V
        self.first = nn.Parameter(2 * randn(V, V, seed=seed))
        self.current = nn.Parameter(2 * randn(V, V, seed=seed + 1))
        self.place = nn.Parameter(2 * randn(block_size, V, seed=seed + 2))
        self.calls = []  # (new tokens, cached tokens, grad enabled)

    def window_logits(self, window, start):
        T = window.shape[1]
        return self.first[window[:, :1]] + self.current[window[:, start:]] + self.place[start:T]

    def forward(self, idx, cache=None, use_cache=False):
        if idx.dim() != 2:
            raise ValueError("idx should be (B, T)")
        S = 0 if cache is None else cache.shape[1]
        self.calls.append((idx.shape[1], S, torch.is_grad_enabled()))
        if S + idx.shape[1] > self.block_size:
            raise ValueError(f"{S} cached + {idx.shape[1]} new tokens exceed block_size={self.block_size}")
        window = idx if cache is None else torch.cat([cache, idx], 1)
        logits = self.window_logits(window, S)
        return (logits, window) if use_cache else logits


def greedy_oracle(model, idx, n):
    with torch.no_grad():
        for _ in range(n):
            window = idx[:, -model.block_size:]
            idx = torch.cat([idx, model.window_logits(window, 0)[:, -1].argmax(-1, keepdim=True)], 1)
    return idx


@generate.check("greedy (temperature 0): the argmax of the LAST position appended each step; (B, T0 + n) int64",
                states=("the logits of its LAST position choose the next token",
                        "(B, T0 + max_new_tokens) int64: idx followed by the new tokens"))
def _(fn):
    model = WindowModel()
    idx = torch.tensor([[1, 4], [6, 0], [3, 3]])
    out = fn(model, idx, 4, temperature=0)
    assert_tensor(out, greedy_oracle(model, idx, 4), atol=0, rtol=0, what="generate(model, idx, 4, temperature=0)")


@generate.check("the context is cropped to the LAST block_size tokens (the model raises on longer input)",
                states=("the model sees at most the last block_size tokens",))
def _(fn):
    model = WindowModel(seed=965)
    idx = torch.tensor([[2, 5, 1, 0, 6, 3, 3, 1], [0, 1, 2, 3, 4, 5, 6, 0]])  # T0 = 8 > block_size = 6
    out = fn(model, idx, 5, temperature=0)
    assert_tensor(out, greedy_oracle(model, idx, 5), atol=0, rtol=0, what="generate past block_size")


@generate.check("use_cache=True gives exactly the tokens of use_cache=False with the same generator, past block_size",
                states=("use_cache=True gives exactly the tokens of use_cache=False",))
def _(fn):
    model = WindowModel(seed=970)
    idx = torch.tensor([[1, 2, 3], [4, 5, 6], [0, 0, 1], [2, 2, 2]])
    plain = fn(model, idx, 12, generator=seeded(971))
    cached = fn(model, idx, 12, generator=seeded(971), use_cache=True)
    assert_tensor(plain, generate_stand_in(model, idx, 12, generator=seeded(971)), atol=0, rtol=0,
                  what="generate(..., use_cache=False)")
    assert_tensor(cached, plain, atol=0, rtol=0, what="generate(..., use_cache=True)")


@generate.check("use_cache=True feeds one new token while the cache has room, a fresh window when it is full",
                states=("the first step runs the (cropped) prompt with use_cache=True",
                        "each later step feeds only the newest token with the cache, while the cache plus that token "
                        "fit in block_size",
                        "start a new cache from the last block_size tokens"))
def _(fn):
    model = WindowModel(seed=975)
    fn(model, torch.tensor([[1, 2, 3, 4]]), 6, temperature=0, use_cache=True)
    calls = [(t, s) for t, s, _ in model.calls]
    # prompt of 4; tokens 5 and 6 fill the cache (block_size 6); then a fresh window each step
    expected = [(4, 0), (1, 4), (1, 5), (6, 0), (6, 0), (6, 0)]
    if calls != expected:
        raise AssertionError(f"the model was called with (new tokens, cached tokens) = {calls}; expected "
                             f"{expected}: the prompt, then only the newest token with the cache, and a new "
                             "cache from the last block_size tokens once the cache is full")


@generate.check("sampling: the first new token of 20000 rows follows softmax(logits / 0.7) after top_k=3",
                states=("passed to sample_next_token for every new token",))
def _(fn):
    model = WindowModel(seed=980)
    idx = torch.tensor([[3, 1]]).repeat(DRAWS, 1)
    out = fn(model, idx, 1, temperature=0.7, top_k=3, generator=seeded(981))
    if type(out) is not torch.Tensor or out.shape != (DRAWS, 3):
        raise AssertionError(f"generate should return (B, T0 + 1) = ({DRAWS}, 3)")
    logits = model.window_logits(idx[:1], 0)[0, -1].detach()
    assert_frequencies(out[:, -1], sample_probs(logits, temperature=0.7, top_k=3), "the first generated token")


@generate.check("the generator drives sampling (same seed, same tokens, whatever the global seed); n=0 returns idx",
                states=("passed to sample_next_token for every new token", "max_new_tokens: >= 0"))
def _(fn):
    model = WindowModel(seed=985)
    idx = torch.tensor([[1, 2], [3, 4], [5, 6]])
    manual_seed(1)
    a = fn(model, idx, 8, generator=seeded(986))
    manual_seed(2)
    b = fn(model, idx, 8, generator=seeded(986))
    assert_tensor(b, a, atol=0, rtol=0, what="generate with a generator seeded alike")
    assert_tensor(fn(model, idx, 0), idx, atol=0, rtol=0, what="generate(model, idx, 0)")


@generate.side_check("no gradients are recorded; idx and the model's mode are left unchanged",
                     states=("Runs without gradients (torch.no_grad)", "leaves idx and the model's mode unchanged"))
def _(fn):
    model = WindowModel(seed=990).train()
    idx = torch.tensor([[1, 2, 3]])
    before = idx.clone()
    fn(model, idx, 3, generator=seeded(991))
    fn(model, idx, 3, generator=seeded(991), use_cache=True)
    if any(grad for _, _, grad in model.calls):
        raise AssertionError("the model ran with gradients enabled: wrap the loop in torch.no_grad()")
    if changed_in_place(idx, before):
        raise AssertionError("generate changed idx in place")
    if not model.training:
        raise AssertionError("generate switched the model to eval mode; leave its mode to the caller")


@generate.side_check("the model's mode is left unchanged: a model in eval mode stays in eval mode, one in training "
                     "mode stays in training mode (with and without the cache)",
                     states=("a model in eval mode stays in eval mode, one in training mode stays in training mode",))
def _(fn):
    for training in (False, True):
        model = WindowModel(seed=992).train(training)
        for use_cache in (False, True):
            fn(model, torch.tensor([[1, 2, 3]]), 3, generator=seeded(993), use_cache=use_cache)
            if model.training != training:
                raise AssertionError(f"a model in {'training' if training else 'eval'} mode left generate in "
                                     f"{'training' if model.training else 'eval'} mode (use_cache={use_cache}): "
                                     "leave the mode to the caller; do not call model.eval() or model.train()")


@generate.side_check("ValueError for a 1-D idx and for max_new_tokens < 0",
                     states=("ValueError if idx is not 2-dimensional or max_new_tokens < 0",))
def _(fn):
    assert_raises_value_error(fn, WindowModel(), torch.tensor([1, 2]), 3)
    assert_raises_value_error(fn, WindowModel(), torch.tensor([[1, 2]]), -1)


# ---------------------------------------------------------------- beam_search
beam_search = Exercise("beam_search", points=3)


class TableModel(nn.Module):
    """A Markov model: logits of the next token depend only on the current token. Raises on a
    context longer than block_size; counts calls."""

    def __init__(self, logits_table, block_size=16):
        super().__init__()
        self.table = torch.as_tensor(logits_table, dtype=torch.float32)
        self.block_size = block_size
        self.grad_enabled = set()  # torch.is_grad_enabled() at each call

    def forward(self, idx):
        self.grad_enabled.add(torch.is_grad_enabled())
        if idx.shape[1] > self.block_size:
            raise ValueError(f"a context of {idx.shape[1]} tokens exceeds block_size={self.block_size}")
        return self.table[idx]


def from_probs(rows):
    return torch.tensor(rows, dtype=torch.float64).clamp_min(1e-4).log().float()


def brute_force(table, prompt, n, eos=None):
    """Every continuation of up to n tokens (ending at eos), scored by total log-probability."""
    log_p = torch.log_softmax(table.double(), -1)
    V, best, best_score = table.shape[0], None, -math.inf
    for length in range(1, n + 1):
        for seq in itertools.product(range(V), repeat=length):
            if eos is not None and eos in seq[:-1]:
                continue
            if length < n and (eos is None or seq[-1] != eos):
                continue
            score, prev = 0.0, prompt[-1]
            for tok in seq:
                score += log_p[prev, tok].item()
                prev = tok
            if score > best_score:
                best, best_score = list(seq), score
    return torch.tensor([list(prompt) + best])


def run_beam(fn, model, prompt, n, width, eos=None):
    out = fn(model, torch.tensor([prompt]), n, width, eos_id=eos)
    if type(out) is not torch.Tensor or out.dim() != 2 or out.shape[0] != 1:
        raise AssertionError(f"beam_search should return a (1, T0 + L) tensor, got "
                             f"{tuple(out.shape) if type(out) is torch.Tensor else type(out).__name__}")
    return out


# From 0, greedy takes 1 (0.55) and then at best 0.37; taking 2 (0.45) leads to 3 with 0.95.
GREEDY_TRAP = from_probs([[0.0, 0.55, 0.45, 0.0, 0.0], [0.3, 0.0, 0.0, 0.33, 0.37], [0.0, 0.0, 0.0, 0.95, 0.05],
                          [0.2, 0.2, 0.2, 0.2, 0.2], [0.1, 0.2, 0.3, 0.15, 0.25]])
# eos = 4. Ending at once: 0.45. Going on with 1, 2, 3 (no eos): 0.4 * 0.9 * 0.9 = 0.324 in total,
# but a higher average per token. After eos the model would go on anywhere.
SHORT_WINS = from_probs([[0.0, 0.4, 0.1, 0.05, 0.45], [0.02, 0.0, 0.9, 0.06, 0.02], [0.02, 0.03, 0.0, 0.9, 0.05],
                         [0.5, 0.3, 0.1, 0.05, 0.05], [0.2, 0.2, 0.2, 0.2, 0.2]])


@beam_search.check("beam width 1 without eos is greedy decoding (random 6-token Markov model, 6 steps)",
                   states=("Width 1 without eos_id is greedy decoding",))
def _(fn):
    model = TableModel(3 * randn(6, 6, seed=1001))
    out = run_beam(fn, model, [2, 5], 6, 1)
    expected = torch.tensor([[2, 5]])
    for _ in range(6):
        expected = torch.cat([expected, model(expected)[:, -1].argmax(-1, keepdim=True)], 1)
    assert_tensor(out, expected, atol=0, rtol=0, what="beam_search(width 1)")


@beam_search.check("where greedy is not best, width 2 finds the higher total log-probability",
                   states=("the W best other candidates are the next live sequences",))
def _(fn):
    out = run_beam(fn, TableModel(GREEDY_TRAP), [0], 2, 2)
    assert_tensor(out, torch.tensor([[0, 2, 3]]), atol=0, rtol=0, what="beam_search(width 2, 2 steps)")


@beam_search.check("an exhaustive width equals brute force over every continuation, with eos ending sequences",
                   states=("every live sequence is extended by every token",
                           "return the best of the finished and the live sequences"))
def _(fn):
    for seed in (1010, 1011, 1012):
        table = 2 * randn(4, 4, seed=seed)
        out = run_beam(fn, TableModel(table), [1], 4, 4 ** 4, eos=3)
        assert_tensor(out, brute_force(table, [1], 4, eos=3), atol=0, rtol=0,
                      what=f"beam_search(exhaustive width, eos=3), table seed {seed}")


@beam_search.check("the TOTAL log-probability decides: a short sequence ending in eos beats a longer one",
                   states=("the SUM of log softmax(logits)[token] of its new tokens (no averaging over its length)",))
def _(fn):
    out = run_beam(fn, TableModel(SHORT_WINS), [0], 3, 200, eos=4)
    assert_tensor(out, torch.tensor([[0, 4]]), atol=0, rtol=0, what="beam_search(eos=4)")


@beam_search.check("eos ends a sequence: nothing follows it, and a finished sequence still competes",
                   states=("a candidate that ends with eos_id is finished and set aside",
                           "the best of the finished and the live sequences"))
def _(fn):
    out = run_beam(fn, TableModel(SHORT_WINS), [0], 3, 2, eos=4)
    assert_tensor(out, torch.tensor([[0, 4]]), atol=0, rtol=0, what="beam_search(width 2, eos=4)")
    table = 2 * randn(5, 5, seed=1020)
    out = run_beam(fn, TableModel(table), [0], 5, 3, eos=2)
    tokens = out[0, 1:].tolist()
    if 2 in tokens[:-1]:
        raise AssertionError(f"the result {out.tolist()} goes on after eos_id=2")


@beam_search.check("the model sees only the last block_size tokens (a prompt longer than block_size)",
                   states=("the model sees the last block_size tokens",))
def _(fn):
    table = 3 * randn(5, 5, seed=1030)
    prompt = [0, 1, 2, 3, 4, 0, 2]
    out = run_beam(fn, TableModel(table, block_size=4), prompt, 3, 125)
    assert_tensor(out, brute_force(table, prompt, 3), atol=0, rtol=0,
                  what="beam_search with a prompt of 7, block_size 4")


@beam_search.side_check("no gradients are recorded (the model runs under torch.no_grad)",
                        states=("Runs without gradients (torch.no_grad)",))
def _(fn):
    model = TableModel(2 * randn(4, 4, seed=1035))
    run_beam(fn, model, [1], 3, 2)
    if True in model.grad_enabled:
        raise AssertionError("the model ran with gradients enabled: wrap the search in torch.no_grad()")


@beam_search.side_check("ValueError for a batch of 2 prompts, beam_width < 1 and max_new_tokens < 0",
                        states=("ValueError if idx is not (1, T0), beam_width < 1 or max_new_tokens < 0",))
def _(fn):
    model = TableModel(randn(4, 4, seed=1040))
    assert_raises_value_error(fn, model, torch.tensor([[1], [2]]), 3, 2)
    assert_raises_value_error(fn, model, torch.tensor([[1]]), 3, 0)
    assert_raises_value_error(fn, model, torch.tensor([[1]]), -1, 2)


# ---------------------------------------------------------------- BPE oracle (independent of the reference)

def oracle_train(text: str, num_merges: int) -> list:
    """Code points stand for ids; Counter counts every position; str.replace merges left to right."""
    seq = "".join(map(chr, text.encode("utf-8")))
    merges = []
    for i in range(num_merges):
        counts = Counter(zip(seq, seq[1:]))
        if not counts:
            break
        top = max(counts.values())
        pair = next(p for p in counts if counts[p] == top)  # Counter keeps first-seen order
        seq = seq.replace(pair[0] + pair[1], chr(256 + i))
        merges.append((ord(pair[0]), ord(pair[1])))
    return merges


def oracle_encode(text: str, merges: list) -> list:
    """Merging in rank order is what 'the lowest-ranked pair present first' amounts to."""
    seq = "".join(map(chr, text.encode("utf-8")))
    for i, (a, b) in enumerate(merges):
        seq = seq.replace(chr(a) + chr(b), chr(256 + i))
    return [ord(c) for c in seq]


def words_text(seed: int, n: int) -> str:
    rng = random.Random(mixed(seed))
    words = ["the", "then", "there", "token", "tokens", "attention", "at", "ten", "net", "entente", "tête"]
    return " ".join(rng.choice(words) for _ in range(n))


def train_text() -> str:
    """300 words drawn from the grading run's secret (grader.boundary.spec.mixed), so never the same text twice."""
    return words_text(1100, 300)


OTHER_TEXT = "then the net attends to ten tokens; entente at the tête-à-tête"
CHINESE = "注意力就是你所需要的一切。注意力机制让模型关注重要的词。"


def assert_merges(actual, expected, what):
    if not isinstance(actual, list):
        raise AssertionError(f"{what} should return a list of (int, int) tuples, got {type(actual).__name__}")
    actual = [tuple(int(x) for x in pair) for pair in actual]
    if actual != expected:
        first = next((i for i, (a, b) in enumerate(zip(actual, expected)) if a != b), min(len(actual), len(expected)))
        raise AssertionError(f"{what}: {len(actual)} merges, expected {len(expected)}; first difference at merge "
                             f"{first}: got {actual[first:first + 3]}, expected {expected[first:first + 3]}")


def assert_ids(actual, expected, what):
    if not isinstance(actual, list):
        raise AssertionError(f"{what} should return a list of int, got {type(actual).__name__}")
    if [int(i) for i in actual] != expected:
        raise AssertionError(f"{what}: got {list(actual)[:12]}{' ...' if len(actual) > 12 else ''}, "
                             f"expected {expected[:12]}{' ...' if len(expected) > 12 else ''}")


# ---------------------------------------------------------------- train_bpe
train_bpe = Exercise("train_bpe", points=3)


@train_bpe.check("fixed merges: 'aaabdaaabac' gives (97, 97), (256, 97), (257, 98) as in minbpe",
                 states=("merges[i] is the pair that new id 256 + i stands for",))
def _(fn):
    assert_merges(fn("aaabdaaabac", 3), [(97, 97), (256, 97), (257, 98)], "train_bpe('aaabdaaabac', 3)")


@train_bpe.check("a tie goes to the pair that occurs first (not the smallest or largest ids)",
                 states=("a tie goes to the pair whose first occurrence comes first in the current sequence",))
def _(fn):
    # (c, d), (d, a) and (a, b) all occur twice; (c, d) comes first
    assert_merges(fn("cdab cdab", 1), [(99, 100)], "train_bpe('cdab cdab', 1)")
    assert_merges(fn("zyxw zyxw yx", 3), oracle_train("zyxw zyxw yx", 3), "train_bpe('zyxw zyxw yx', 3)")


@train_bpe.check("repeated characters: pairs counted at every position, merged without overlap ('aaaa', 'aaaaa')",
                 states=('counts every adjacent pair of the current sequence at every position ("aaa" holds the pair '
                         '(97, 97) twice)',
                         "replaces its non-overlapping occurrences, left to right"))
def _(fn):
    assert_merges(fn("aaaa", 3), [(97, 97), (256, 256)], "train_bpe('aaaa', 3)")
    assert_merges(fn("aaaaa", 3), [(97, 97), (256, 256), (257, 97)], "train_bpe('aaaaa', 3)")
    assert_merges(fn("aaabcbc", 2), oracle_train("aaabcbc", 2), "train_bpe('aaabcbc', 2)")


@train_bpe.check("a 1,800-character text with 40 merges agrees with an independent minbpe-style oracle",
                 states=("the algorithm of minbpe's BasicTokenizer",))
def _(fn):
    text = train_text()
    assert_merges(fn(text, 40), oracle_train(text, 40), "train_bpe(text, 40)")


@train_bpe.check("non-ASCII text is trained on its UTF-8 bytes (Chinese, accents, emoji)",
                 states=("it is tokenized as its UTF-8 bytes, ids 0-255, with no pre-splitting",))
def _(fn):
    text = CHINESE * 2 + " tête-à-tête 🙂🙂"
    assert_merges(fn(text, 12), oracle_train(text, 12), "train_bpe(Chinese text, 12)")


@train_bpe.check("stops early when no pair is left; num_merges=0 gives []",
                 states=("Stops early when the sequence has no pair left",))
def _(fn):
    assert_merges(fn("ab", 5), [(97, 98)], "train_bpe('ab', 5)")
    assert_merges(fn("a", 3), [], "train_bpe('a', 3)")
    assert_merges(fn("", 3), [], "train_bpe('', 3)")
    assert_merges(fn("hello", 0), [], "train_bpe('hello', 0)")


@train_bpe.side_check("ValueError for num_merges < 0", states=("ValueError if num_merges < 0",))
def _(fn):
    assert_raises_value_error(fn, "hello", -1)


# ---------------------------------------------------------------- bpe_encode
bpe_encode = Exercise("bpe_encode", points=2)


@bpe_encode.check("the training text encodes to what training produced; so does text it never saw",
                  states=("any str (not only the text the merges were learned from)",))
def _(fn):
    train = train_text()
    merges = oracle_train(train, 40)
    for text in (train[:400], OTHER_TEXT):
        assert_ids(fn(text, merges), oracle_encode(text, merges), f"bpe_encode({text[:20]!r}...)")


@bpe_encode.check("the lowest merge index first, not the most frequent pair: 'abcbcbc' with merges (a,b), (b,c)",
                  states=("the adjacent pair with the LOWEST merge index that occurs",))
def _(fn):
    assert_ids(fn("abcbcbc", [(97, 98), (98, 99)]), [256, 99, 257, 257], "bpe_encode('abcbcbc')")


@bpe_encode.check("not greedy left to right: 'abc' with merges (b,c) then (a,b) gives [97, 256]",
                  states=("the adjacent pair with the LOWEST merge index that occurs",))
def _(fn):
    assert_ids(fn("abc", [(98, 99), (97, 98)]), [97, 256], "bpe_encode('abc', [(98, 99), (97, 98)])")


@bpe_encode.check("repeated characters merge without overlap: 'aaaa', 'aaaaa'",
                  states=("replace its non-overlapping occurrences, left to right",))
def _(fn):
    merges = [(97, 97), (256, 256)]
    assert_ids(fn("aaaa", merges), [257], "bpe_encode('aaaa', [(97, 97), (256, 256)])")
    assert_ids(fn("aaaaa", merges), [257, 97], "bpe_encode('aaaaa', [(97, 97), (256, 256)])")
    assert_ids(fn("aaaaa", merges[:1]), [256, 256, 97], "bpe_encode('aaaaa', [(97, 97)])")


@bpe_encode.check("Chinese and emoji: UTF-8 bytes first, then the merges",
                  states=("start from the UTF-8 bytes of text",))
def _(fn):
    merges = oracle_train(CHINESE, 20)
    for text in (CHINESE, "注意模型 🙂 ok"):
        assert_ids(fn(text, merges), oracle_encode(text, merges), f"bpe_encode({text[:8]!r}...)")


@bpe_encode.check("no merges gives the UTF-8 bytes; empty text gives []",
                  states=("stop when no pair of merges occurs",))
def _(fn):
    assert_ids(fn("é!", []), [195, 169, 33], "bpe_encode('é!', [])")
    assert_ids(fn("", oracle_train(train_text(), 40)), [], "bpe_encode('', merges)")


# ---------------------------------------------------------------- bpe_decode
bpe_decode = Exercise("bpe_decode", points=2)


def assert_text(actual, expected, what):
    if actual != expected:
        raise AssertionError(f"{what}: got {actual!r}, expected {expected!r}")


@bpe_decode.check("fixed value: bytes, a merge and a merge of merges")
def _(fn):
    merges = [(97, 97), (256, 256), (104, 105)]  # 'aa', 'aaaa', 'hi'
    assert_text(fn([258, 33, 257, 256, 97], merges), "hi!aaaaaaa", "bpe_decode([258, 33, 257, 256, 97])")


@bpe_decode.check("round trip: decode(encode(t)) == t for English, Chinese and emoji text, merges that cut characters",
                  states=("bpe_decode(bpe_encode(t, merges), merges) == t for every str t",))
def _(fn):
    merges = oracle_train(CHINESE + " tête 🙂🙂", 25)
    for text in (OTHER_TEXT, CHINESE, "模型 🙂 tête", ""):
        assert_text(fn(oracle_encode(text, merges), merges), text, f"round trip of {text[:10]!r}")


@bpe_decode.check("bytes are joined before decoding: a character split over two tokens comes back whole",
                  states=("join the bytes of ALL the tokens first",))
def _(fn):
    raw = "注".encode("utf-8")  # three bytes
    merges = [(raw[0], raw[1])]
    assert_text(fn([256, raw[2]], merges), "注", "bpe_decode([bytes 1-2 of '注', byte 3])")


@bpe_decode.check("errors='replace': a cut multi-byte sequence becomes U+FFFD instead of raising",
                  states=('errors="replace"', "an incomplete character becomes U+FFFD"))
def _(fn):
    raw = "注意".encode("utf-8")
    for ids in ([raw[0], raw[1]], [97, raw[3], raw[4], 98], [0x80, 99]):
        assert_text(fn(ids, []), bytes(ids).decode("utf-8", errors="replace"), f"bpe_decode({ids})")


@bpe_decode.check("empty ids give ''; ValueError for an id outside [0, 256 + len(merges))",
                  states=("ValueError if an id is outside [0, 256 + len(merges))",))
def _(fn):
    assert_text(fn([], [(97, 98)]), "", "bpe_decode([])")
    assert_raises_value_error(fn, [97, 257], [(97, 98)])
    assert_raises_value_error(fn, [-1], [])

"""Hidden tests for chapter 07: GELU, BERT's inputs, MLM masking, NSP pairs, the pretraining model
and its loss.

Oracles are torch routines: F.gelu(approximate="tanh"), F.layer_norm, F.cross_entropy, and a whole
BERT written here from nn.MultiheadAttention (batch_first, the course's weights copied in) with
F.layer_norm(eps=1e-12) and the tanh GELU. mask_tokens and make_nsp_examples are random, so they
are checked statistically on large seeded inputs (binomial bounds of 5 standard deviations): an
implementation that draws its random numbers in another order still gets full marks. Correct
versions of gelu and BertEmbeddings stand in for the learner's while BertForPretraining is graded,
so a mistake costs points once, in the exercise where it was made.
"""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.boundary.spec import (
    ENCODER,
    GELU,
    MULTI_HEAD_ATTENTION,
    Exercise,
    FixedDropout,
    assert_raises_value_error,
    assert_tensor,
    blocked,
    changed_in_place,  # in-place changes are judged by the in-place rule only
    documented_shapes,
    fix_dropout,
    load_torch_attention,
    manual_seed,
    randn,
    seeded,
    seeded_by_name,
)

EPS = 1e-12


def gelu_oracle(x):
    return F.gelu(x, approximate="tanh")


class BertEmbeddingsStandIn(nn.Module):
    def __init__(self, vocab_size, d_model, max_len, num_segments=2, dropout=0.0):
        super().__init__()
        self.token = nn.Embedding(vocab_size, d_model)
        self.segment = nn.Embedding(num_segments, d_model)
        self.position = nn.Embedding(max_len, d_model)
        self.norm = nn.LayerNorm(d_model, eps=EPS)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input_ids, segment_ids=None):
        if segment_ids is None:
            segment_ids = torch.zeros_like(input_ids)
        T = input_ids.shape[1]
        x = self.token(input_ids) + self.segment(segment_ids) + self.position(torch.arange(T))
        return self.dropout(self.norm(x))


def assert_number_near(value, expected, sigma, what, z=5.0):
    if abs(value - expected) > z * sigma:
        raise AssertionError(f"{what} is {value:.4f}; expected {expected:.4f} (allowed +-{z * sigma:.4f})")


def assert_unchanged(before, after, what="the input"):
    if changed_in_place(after, before):
        raise AssertionError(f"{what} was modified in place; work on a copy (clone) instead")


# ---------------------------------------------------------------- gelu
gelu = Exercise("gelu", points=1, forbidden=GELU)


@gelu.check("matches F.gelu(approximate='tanh') on [-6, 6], shape (3, 401) kept", states=("same shape and dtype",))
def _(fn):
    x = torch.linspace(-6, 6, 1203).reshape(3, 401)
    assert_tensor(fn(x), gelu_oracle(x), atol=1e-6, what="gelu(x)")


@gelu.check("the tanh form, not the exact erf form: fixed values at x = -3, -2.2, -1, 0, 0.5, 1, 2.2, 3",
            states=("in its tanh form", "0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))"))
def _(fn):
    x = torch.tensor([-3.0, -2.2, -1.0, 0.0, 0.5, 1.0, 2.2, 3.0])
    xd = x.double()
    expected = 0.5 * xd * (1 + torch.tanh(math.sqrt(2 / math.pi) * (xd + 0.044715 * xd ** 3)))
    assert_tensor(fn(x), expected.float(), atol=2e-6, what="gelu at fixed points")


@gelu.check("float64 in, float64 out, with the float64 values of the formula", states=("float64 stays float64",))
def _(fn):
    x = 3 * randn(5, 7, seed=701).double()
    assert_tensor(fn(x), gelu_oracle(x), atol=1e-9, what="gelu(float64 x)")


@gelu.check("large inputs (|x| up to 1000) give finite values: x for large x, 0 for very negative x",
            states=("Finite for every finite x", "use torch.tanh, which saturates"))
def _(fn):
    x = torch.tensor([-1000.0, -100.0, -30.0, -10.0, 10.0, 30.0, 100.0, 1000.0])
    out = fn(x)
    if type(out) is torch.Tensor and not torch.isfinite(out).all():
        raise AssertionError("gelu gave inf or nan for large |x|: use torch.tanh, which saturates, "
                             "instead of writing tanh with exp")
    assert_tensor(out, gelu_oracle(x), atol=1e-4, what="gelu for large |x|")


@gelu.check("the input is not modified, and gradients flow (d gelu / dx equals torch's)",
            states=("The input is not modified",))
def _(fn):
    x = randn(4, 6, seed=702)
    before = x.clone()
    leaf = x.clone().requires_grad_()
    out = fn(x)
    assert_unchanged(before, x)
    assert_tensor(out, gelu_oracle(before), atol=1e-6, what="gelu(x)")
    fn(leaf).sum().backward()
    expected = before.clone().requires_grad_()
    gelu_oracle(expected).sum().backward()
    if leaf.grad is None:
        raise AssertionError("no gradient reached x: build gelu from torch operations on x")
    assert_tensor(leaf.grad, expected.grad, atol=1e-5, what="d gelu / dx")


# ---------------------------------------------------------------- build_pair_input
build_pair_input = Exercise("build_pair_input", points=2)


def assert_int_list(value, expected, what):
    if type(value) is not list:
        raise AssertionError(f"{what} should be a list, got {type(value).__name__}")
    if any(type(v) is not int for v in value):
        raise AssertionError(f"{what} should hold Python ints, got {[type(v).__name__ for v in value][:3]}")
    if value != expected:
        raise AssertionError(f"{what} is {value}, expected {expected}")


def assert_pair_result(result, ids, segments, what):
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(f"{what} should return a tuple (input_ids, segment_ids), got {type(result).__name__}")
    assert_int_list(result[0], ids, f"input_ids of {what}")
    assert_int_list(result[1], segments, f"segment_ids of {what}")


@build_pair_input.check("a pair: [CLS] a [SEP] b [SEP], segment 0 up to and including the first [SEP]",
                        states=("input_ids = [cls_id] + tokens_a + [sep_id] + tokens_b + [sep_id]",
                                "every token of a and the FIRST [SEP]"))
def _(fn):
    assert_pair_result(fn([7, 8, 9], [10, 11], 1, 2), [1, 7, 8, 9, 2, 10, 11, 2], [0, 0, 0, 0, 0, 1, 1, 1],
                       "build_pair_input([7, 8, 9], [10, 11], 1, 2)")


@build_pair_input.check("tokens_b=None: [CLS] a [SEP], all segment 0",
                        states=("just [cls_id] + tokens_a + [sep_id] when tokens_b is None",))
def _(fn):
    assert_pair_result(fn([5, 6], None, 1, 2), [1, 5, 6, 2], [0, 0, 0, 0], "build_pair_input([5, 6], None, 1, 2)")


@build_pair_input.check("other special ids (101, 102), b longer than a, an empty b",
                        states=("cls_id, sep_id: the ids of [CLS] and [SEP]", "possibly empty"))
def _(fn):
    assert_pair_result(fn([9], [4, 4, 5, 6], 101, 102), [101, 9, 102, 4, 4, 5, 6, 102], [0, 0, 0, 1, 1, 1, 1, 1],
                       "build_pair_input([9], [4, 4, 5, 6], 101, 102)")
    assert_pair_result(fn([3, 8], [], 101, 102), [101, 3, 8, 102, 102], [0, 0, 0, 0, 1],
                       "build_pair_input([3, 8], [], 101, 102)")


@build_pair_input.check("tokens_a and tokens_b are not modified, and the results are new lists",
                        states=("two new lists of ints",
                                "tokens_a and tokens_b are not modified (build new lists; do not append to them)"))
def _(fn):
    a, b = [7, 8, 9], [10, 11]
    ids, segments = fn(a, b, 1, 2)
    if changed_in_place(a, [7, 8, 9]) or changed_in_place(b, [10, 11]):
        raise AssertionError(f"the input lists were modified: tokens_a is now {a}, tokens_b {b}; build new lists")
    if ids is a or ids is b or segments is a or segments is b:
        raise AssertionError("return new lists, not one of the inputs")
    a2 = [4, 5]
    fn(a2, None, 1, 2)
    if changed_in_place(a2, [4, 5]):
        raise AssertionError(f"with tokens_b=None, tokens_a was modified to {a2}")


@build_pair_input.check("random lengths: lengths agree, segment 1 covers exactly b and the last [SEP]",
                        states=("1 for every token of b and the last [SEP]",))
def _(fn):
    g = seeded(703)
    for _ in range(20):
        la, lb = int(torch.randint(1, 9, (), generator=g)), int(torch.randint(0, 9, (), generator=g))
        a = torch.randint(5, 50, (la,), generator=g).tolist()
        b = torch.randint(5, 50, (lb,), generator=g).tolist()
        assert_pair_result(fn(a, b, 0, 3), [0, *a, 3, *b, 3], [0] * (la + 2) + [1] * (lb + 1),
                           f"build_pair_input(a of length {la}, b of length {lb}, 0, 3)")


@build_pair_input.side_check("an empty tokens_a raises ValueError", states=("ValueError if tokens_a is empty",))
def _(fn):
    assert_raises_value_error(fn, [], [4, 5], 1, 2)
    assert_raises_value_error(fn, [], None, 1, 2)


# ---------------------------------------------------------------- BertEmbeddings
BertEmbeddings = Exercise("BertEmbeddings", points=3)

EV_, ED_, EL_ = 30, 16, 12  # vocabulary, d_model, max_len


def embedding_names():
    return {"token.weight", "segment.weight", "position.weight", "norm.weight", "norm.bias"}


def seeded_state(module: nn.Module, names: set, seed: int, scale: float = 1.0, norm_scale: float = 1.0) -> dict:
    """Seeded values for every documented parameter, each seeded by its own name (creation order does
    not matter), loaded into `module`. `scale` multiplies weights and biases of everything but the norms'
    weights; `norm_scale` multiplies the norms' weights."""
    state = {}
    for name, shape in documented_shapes(module, names).items():
        noise = torch.randn(shape, generator=seeded_by_name(name, seed))
        if "norm" in name and name.endswith("weight"):
            value = norm_scale * (1.0 + 0.2 * noise)
        elif "norm" in name:
            value = scale * 0.1 * noise
        elif name.endswith("bias"):
            value = scale * 0.1 * noise
        elif "embeddings" in name or name in embedding_names():
            value = scale * noise
        else:
            value = scale * noise / math.sqrt(shape[-1])
        state[name] = value
    module.load_state_dict(state, strict=False)
    return state


def embeddings_oracle(state, input_ids, segment_ids, prefix=""):
    T = input_ids.shape[1]
    x = (state[prefix + "token.weight"][input_ids] + state[prefix + "segment.weight"][segment_ids]
         + state[prefix + "position.weight"][:T])
    return F.layer_norm(x, (x.shape[-1],), state[prefix + "norm.weight"], state[prefix + "norm.bias"], eps=EPS)


def loaded_embeddings(cls, seed, scale=1.0, dropout=0.0, num_segments=2):
    m = cls(EV_, ED_, EL_, num_segments=num_segments, dropout=dropout)
    return m.eval(), seeded_state(m, embedding_names(), seed, scale=scale)


def ids_and_segments(B, T, seed, num_segments=2):
    g = seeded(seed)
    ids = torch.randint(0, EV_, (B, T), generator=g)
    cut = torch.randint(1, T, (B, 1), generator=g)
    segments = (torch.arange(T)[None, :] >= cut).long() * (num_segments - 1)  # 0 then the last segment id
    return ids, segments


@BertEmbeddings.check("parameters: token (V, D), segment (num_segments, D), position (max_len, D), "
                      "norm weight and bias",
                      states=("token: nn.Embedding(V, D)", "segment: nn.Embedding(num_segments, D)",
                              "position: nn.Embedding(max_len, D)", "norm: LayerNorm(D, eps=1e-12)"))
def _(cls):
    m = cls(EV_, ED_, EL_, num_segments=2)
    params = {k: tuple(v.shape) for k, v in m.named_parameters()}
    expected = {"token.weight": (EV_, ED_), "segment.weight": (2, ED_), "position.weight": (EL_, ED_),
                "norm.weight": (ED_,), "norm.bias": (ED_,)}
    if params != expected:
        raise AssertionError(f"parameters {params}, expected {expected}")


@BertEmbeddings.check("equals F.layer_norm(token + segment + position, eps=1e-12) with seeded weights (B=3, T=7)",
                      states=("dropout(norm(token(input_ids) + segment(segment_ids) + position(p)))",))
def _(cls):
    m, state = loaded_embeddings(cls, 710)
    ids, segments = ids_and_segments(3, 7, 711)
    assert_tensor(m(ids, segments), embeddings_oracle(state, ids, segments), atol=1e-5,
                  what="BertEmbeddings(ids, segments)")


@BertEmbeddings.check("LayerNorm eps is 1e-12: tiny embeddings (variance ~1e-6) are still normalised to unit scale",
                      states=("LayerNorm(D, eps=1e-12) (BERT's eps, not the 1e-5 default)",))
def _(cls):
    m, state = loaded_embeddings(cls, 720, scale=1e-3)
    ids, segments = ids_and_segments(2, 6, 721)
    assert_tensor(m(ids, segments), embeddings_oracle(state, ids, segments), atol=1e-4, rtol=1e-4,
                  what="BertEmbeddings output for tiny embeddings")


@BertEmbeddings.check("segment_ids=None means segment 0 everywhere; num_segments=3 works",
                      states=("segment_ids None means every token is in segment 0",
                              "segment: nn.Embedding(num_segments, D)"))
def _(cls):
    m, state = loaded_embeddings(cls, 730)
    ids, _ = ids_and_segments(2, 5, 731)
    assert_tensor(m(ids), embeddings_oracle(state, ids, torch.zeros_like(ids)), atol=1e-5,
                  what="BertEmbeddings(ids) without segment_ids")
    m3, state3 = loaded_embeddings(cls, 732, num_segments=3)
    ids, segments = ids_and_segments(2, 5, 733, num_segments=3)
    assert_tensor(m3(ids, segments), embeddings_oracle(state3, ids, segments), atol=1e-5,
                  what="BertEmbeddings with num_segments=3 (segment ids 0 and 2)")


@BertEmbeddings.check("positions count 0..T-1 in every row: each row alone and a shorter T give the same vectors",
                      states=("p = 0..T-1 is the position within each row",))
def _(cls):
    m, _ = loaded_embeddings(cls, 740)
    ids, segments = ids_and_segments(3, EL_, 741)
    full = m(ids, segments)
    assert_tensor(m(ids[1:2], segments[1:2]), full[1:2].detach(), atol=1e-6, what="row 1 alone")
    assert_tensor(m(ids[:, :4], segments[:, :4]), full[:, :4].detach(), atol=1e-6, what="the first 4 positions")


@BertEmbeddings.check("dropout after the norm: eval mode is dropout-free; training mode zeroes ~p and scales the rest "
                      "by 1/(1-p)",
                      states=("nn.Dropout(dropout), applied after the norm",
                              "in training mode; in eval mode the output is dropout-free"))
def _(cls):
    m, state = loaded_embeddings(cls, 750, dropout=0.5)
    ids, segments = ids_and_segments(6, 10, 751)
    expected = embeddings_oracle(state, ids, segments)
    assert_tensor(m(ids, segments), expected, atol=1e-5, what="eval-mode output with dropout=0.5")
    m.train()
    manual_seed(752)
    out = m(ids, segments).detach()
    zero = out == 0
    frac = zero.float().mean().item()
    assert_number_near(frac, 0.5, math.sqrt(0.25 / out.numel()), "the fraction of zeroed entries in training mode")
    assert_tensor(out[~zero], 2 * expected[~zero], atol=1e-4, what="the kept entries (x 1/(1-p)) in training mode")


@BertEmbeddings.side_check("T > max_len, 1-D input_ids or segment_ids of another shape raise ValueError",
                           states=("ValueError if input_ids is not 2-dimensional, segment_ids has another shape, or T "
                                   "> max_len",))
def _(cls):
    m = cls(EV_, ED_, EL_)
    assert_raises_value_error(m, torch.zeros(2, EL_ + 1, dtype=torch.long))
    assert_raises_value_error(m, torch.zeros(5, dtype=torch.long))
    assert_raises_value_error(m, torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long))


# ---------------------------------------------------------------- mask_tokens
mask_tokens = Exercise("mask_tokens", points=4)

MV_, MASK_ID = 40, 3
SPECIAL = (0, 1, 2, 3)  # [PAD], [CLS], [SEP], [MASK]


def corpus_batch(B, T, seed, vocab=MV_):
    """[CLS] tokens [SEP] tokens [SEP] [PAD]..., a few [MASK]s already in the text (special too)."""
    g = seeded(seed)
    ids = torch.randint(4, vocab, (B, T), generator=g)
    ids[:, 0] = 1
    ids[torch.arange(B), torch.randint(3, T // 2, (B,), generator=g)] = 2
    lengths = torch.randint(T // 2 + 2, T + 1, (B,), generator=g)
    ids[torch.arange(B), lengths - 1] = 2
    ids[torch.arange(T)[None, :] >= lengths[:, None]] = 0
    ids[torch.rand(B, T, generator=g) < 0.01] = MASK_ID
    return ids


def run_masking(fn, ids, p, seed, vocab=MV_, special=SPECIAL):
    before = ids.clone()
    result = fn(ids, vocab, MASK_ID, special, p, seeded(seed))
    assert_unchanged(before, ids)
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(f"mask_tokens should return a tuple (masked_ids, labels), got {type(result).__name__}")
    masked, labels = result
    for what, t in (("masked_ids", masked), ("labels", labels)):
        if type(t) is not torch.Tensor or t.shape != ids.shape or t.dtype != torch.int64:
            raise AssertionError(f"{what} should be an int64 tensor of shape {tuple(ids.shape)}, got "
                                 f"{type(t).__name__} {getattr(t, 'dtype', '')} {tuple(getattr(t, 'shape', ()))}")
    return masked, labels


@mask_tokens.check("returns new int64 (B, T) tensors; the input is not modified",
                   states=("both (B, T) int64, new tensors", "The input is not modified"))
def _(fn):
    ids = corpus_batch(8, 20, 760)
    masked, labels = run_masking(fn, ids, 0.5, 761)
    if masked.data_ptr() == ids.data_ptr():
        raise AssertionError("masked_ids shares memory with input_ids: return a new tensor (clone first)")


@mask_tokens.check("special tokens are never chosen: label -100 and id unchanged at [PAD], [CLS], [SEP], [MASK]",
                   states=("the ids never chosen", "special tokens never"))
def _(fn):
    ids = corpus_batch(200, 40, 762)
    masked, labels = run_masking(fn, ids, 0.9, 763)
    special = torch.isin(ids, torch.tensor(SPECIAL))
    if (labels[special] != -100).any():
        raise AssertionError(f"{int((labels[special] != -100).sum())} special tokens were chosen; skip every id in "
                             "special_ids")
    assert_tensor(masked[special], ids[special], atol=0, rtol=0, what="masked_ids at special positions")


@mask_tokens.check("labels: the ORIGINAL id at chosen positions (also where it was replaced), -100 elsewhere; unchosen "
                   "ids unchanged",
                   states=("labels hold the ORIGINAL id at chosen positions (whatever replaced it) and -100 elsewhere",
                           "tokens not chosen stay unchanged"))
def _(fn):
    ids = corpus_batch(200, 40, 764)
    masked, labels = run_masking(fn, ids, 0.3, 765)
    chosen = labels != -100
    if not chosen.any():
        raise AssertionError("no token was chosen at mlm_probability=0.3")
    assert_tensor(labels[chosen], ids[chosen], atol=0, rtol=0, what="labels at chosen positions")
    assert_tensor(masked[~chosen], ids[~chosen], atol=0, rtol=0, what="masked_ids at positions not chosen")
    replaced = (masked != ids) & chosen
    if replaced.sum() < 0.5 * chosen.sum():
        raise AssertionError("fewer than half of the chosen tokens were replaced")


def non_special(ids):
    return ~torch.isin(ids, torch.tensor(SPECIAL))


@mask_tokens.check("about p of the non-special tokens are chosen (p = 0.15 and p = 0.4, binomial bounds)",
                   states=("every non-special token is chosen independently with probability p",))
def _(fn):
    ids = corpus_batch(400, 50, 766)
    n = int(non_special(ids).sum())
    for p, seed in ((0.15, 767), (0.4, 768)):
        _, labels = run_masking(fn, ids, p, seed)
        rate = (labels != -100).sum().item() / n
        assert_number_near(rate, p, math.sqrt(p * (1 - p) / n), f"the fraction of non-special tokens chosen at p={p}")


@mask_tokens.check("chosen tokens: 80% [MASK], 10% a random id, 10% unchanged (binomial bounds)",
                   states=("a chosen token becomes mask_id with probability 0.8",
                           "with probability 0.1, and stays unchanged with probability 0.1"))
def _(fn):
    ids = corpus_batch(400, 50, 769)
    masked, labels = run_masking(fn, ids, 0.5, 770)
    chosen = labels != -100
    n = int(chosen.sum())
    out = masked[chosen]
    orig = ids[chosen]
    for what, frac, expected in (
            ("[MASK]", (out == MASK_ID).float().mean().item(), 0.8 + 0.1 / MV_),
            ("left unchanged", (out == orig).float().mean().item(), 0.1 + 0.1 / MV_),
            ("another id", ((out != orig) & (out != MASK_ID)).float().mean().item(), 0.1 * (MV_ - 2) / MV_)):
        assert_number_near(frac, expected, math.sqrt(expected * (1 - expected) / n),
                           f"the fraction of chosen tokens that end up {what}")


@mask_tokens.check("random replacements are uniform over [0, vocab_size), special ids included (every id, V=10)",
                   states=("a random id drawn uniformly from [0, vocab_size) (any id, special ones included",))
def _(fn):
    V = 10
    ids = corpus_batch(400, 50, 771, vocab=V)
    masked, labels = run_masking(fn, ids, 1.0, 772, vocab=V)
    chosen = labels != -100
    out, orig = masked[chosen], ids[chosen]
    for v in range(V):
        if v == MASK_ID:
            continue
        expected = 0.1 / V * (orig != v).sum().item()
        count = ((out == v) & (orig != v)).sum().item()
        if abs(count - expected) > 5 * math.sqrt(expected) + 2:
            raise AssertionError(f"id {v} replaced a chosen token {count} times; a uniform draw from [0, {V}) "
                                 f"gives about {expected:.0f}")


@mask_tokens.check("each token is chosen independently: per-row counts spread like a binomial",
                   states=("chosen independently",))
def _(fn):
    ids = corpus_batch(400, 50, 773)
    _, labels = run_masking(fn, ids, 0.3, 774)
    counts = (labels != -100).sum(1).double()
    n = non_special(ids).sum(1).double()
    expected = (n * 0.3 * 0.7).mean().item()
    spread = ((counts - 0.3 * n) ** 2).mean().item()
    if not 0.6 * expected < spread < 1.5 * expected:
        raise AssertionError(f"the per-row count of chosen tokens has variance {spread:.2f}; independent choices give "
                             f"about {expected:.2f} (choose each token on its own, not a fixed number per row)")


@mask_tokens.check("all randomness from generator: same seed -> same output whatever torch's global seed; other seed "
                   "-> other",
                   states=("the source of ALL randomness (None: torch's global generator)",
                           "Draw every random number from `generator`"))
def _(fn):
    ids = corpus_batch(20, 30, 775)
    manual_seed(1)
    a = fn(ids, MV_, MASK_ID, SPECIAL, 0.3, seeded(776))
    manual_seed(2)
    b = fn(ids, MV_, MASK_ID, SPECIAL, 0.3, seeded(776))
    c = fn(ids, MV_, MASK_ID, SPECIAL, 0.3, seeded(777))
    for x, y in zip(a, b):
        if not torch.equal(x, y):
            raise AssertionError("the same generator seed gave different results: draw every random number "
                                 "from `generator` (torch.rand(..., generator=generator))")
    if torch.equal(a[1], c[1]) and torch.equal(a[0], c[0]):
        raise AssertionError("two different generator seeds gave the same result")
    manual_seed(3)
    d = fn(ids, MV_, MASK_ID, list(SPECIAL), 0.3)  # generator=None: torch's global generator
    if type(d[0]) is not torch.Tensor or d[0].shape != ids.shape:
        raise AssertionError("generator=None should work (torch's global generator)")


@mask_tokens.check("mlm_probability 0 chooses nothing and 1 every non-special token; special_ids as a list or set",
                   states=("any iterable of ints", "mlm_probability: p in [0, 1]"))
def _(fn):
    ids = corpus_batch(10, 30, 778)
    masked, labels = run_masking(fn, ids, 0.0, 779, special=list(SPECIAL))
    assert_tensor(labels, torch.full_like(ids, -100), atol=0, rtol=0, what="labels at p=0")
    assert_tensor(masked, ids, atol=0, rtol=0, what="masked_ids at p=0")
    masked, labels = run_masking(fn, ids, 1.0, 780, special=set(SPECIAL))
    assert_tensor(labels, torch.where(non_special(ids), ids, -100), atol=0, rtol=0, what="labels at p=1")


@mask_tokens.side_check("mlm_probability outside [0, 1] or 1-D input_ids raise ValueError",
                        states=("ValueError if input_ids is not 2-dimensional or mlm_probability is outside [0, 1]",))
def _(fn):
    ids = corpus_batch(2, 10, 781)
    assert_raises_value_error(fn, ids, MV_, MASK_ID, SPECIAL, 1.5, seeded(0))
    assert_raises_value_error(fn, ids, MV_, MASK_ID, SPECIAL, -0.1, seeded(0))
    assert_raises_value_error(fn, ids[0], MV_, MASK_ID, SPECIAL, 0.15, seeded(0))


# ---------------------------------------------------------------- make_nsp_examples
make_nsp_examples = Exercise("make_nsp_examples", points=3)


def numbered_documents(sizes, seed):
    """Document d, sentence j starts with token 1000 * d + j (so every sentence says where it is from),
    followed by 0-3 filler tokens."""
    g = seeded(seed)
    return [[[1000 * d + j] + torch.randint(0, 999, (int(torch.randint(0, 4, (), generator=g)),),
                                            generator=g).tolist() for j in range(n)]
            for d, n in enumerate(sizes)]


def origin(sentence):
    first = list(sentence)[0]
    return first // 1000, first % 1000


def checked_examples(fn, documents, seed):
    snapshot = copy.deepcopy(documents)
    examples = fn(documents, seeded(seed))
    if changed_in_place(documents, snapshot):
        raise AssertionError("the documents were modified; leave them as they are")
    if not isinstance(examples, list):
        raise AssertionError(f"make_nsp_examples should return a list, got {type(examples).__name__}")
    for ex in examples:
        if not isinstance(ex, tuple) or len(ex) != 3:
            raise AssertionError(f"each example should be a tuple (a, b, is_next), got {ex!r:.80}")
        if type(ex[2]) is not bool:
            raise AssertionError(f"is_next should be a Python bool, got {type(ex[2]).__name__}")
    return examples


@make_nsp_examples.check("one example per sentence that has a next sentence: n - 1 per document, each a once",
                         states=("one for every sentence a that has a next sentence in its document",
                                 "n - 1 examples",
                                 "a and b are the sentence lists themselves (or copies); is_next is a Python bool",
                                 "The documents are not modified"))
def _(fn):
    documents = numbered_documents([5, 1, 8, 3, 2], 790)
    examples = checked_examples(fn, documents, 791)
    expected = sorted((d, j) for d, doc in enumerate(documents) for j in range(len(doc) - 1))
    got = sorted(origin(a) for a, _, _ in examples)
    if got != expected:
        raise AssertionError(f"the first sentences a are {got[:8]}...; expected every (document, sentence) with a "
                             f"next sentence once: {expected[:8]}...")
    for a, _, _ in examples:
        d, j = origin(a)
        if list(a) != documents[d][j]:
            raise AssertionError("a should be the sentence itself (its token ids)")


@make_nsp_examples.check("is_next examples: b is the sentence right after a, in the same document",
                         states=("b is the sentence right after a and is_next is True",))
def _(fn):
    documents = numbered_documents([6] * 30, 792)
    positives = [(a, b) for a, b, is_next in checked_examples(fn, documents, 793) if is_next]
    if not positives:
        raise AssertionError("no example has is_next True")
    for a, b in positives:
        d, j = origin(a)
        if list(b) != documents[d][j + 1]:
            raise AssertionError(f"is_next is True but b is sentence {origin(b)} (document, index) for a = {(d, j)}; "
                                 f"b should be the next sentence {(d, j + 1)}")


@make_nsp_examples.check("not-next examples: b is a sentence of ANOTHER document",
                         states=("b is a random sentence of ANOTHER document",))
def _(fn):
    documents = numbered_documents([6] * 30, 794)
    negatives = [(a, b) for a, b, is_next in checked_examples(fn, documents, 795) if not is_next]
    if not negatives:
        raise AssertionError("no example has is_next False")
    same = [(origin(a), origin(b)) for a, b in negatives if origin(a)[0] == origin(b)[0]]
    if same:
        raise AssertionError(f"{len(same)} of {len(negatives)} random sentences come from a's own document "
                             f"(e.g. a = {same[0][0]}, b = {same[0][1]}); draw b from the other documents")
    for a, b in negatives:
        d, j = origin(b)
        if list(b) != documents[d][j]:
            raise AssertionError("b should be one of the documents' sentences (its token ids)")


@make_nsp_examples.check("is_next is True for about half the examples (binomial bounds)",
                         states=("with probability 1/2",))
def _(fn):
    documents = numbered_documents([7] * 200, 796)
    examples = checked_examples(fn, documents, 797)
    frac = sum(is_next for _, _, is_next in examples) / len(examples)
    assert_number_near(frac, 0.5, math.sqrt(0.25 / len(examples)), "the fraction of is_next examples")


@make_nsp_examples.check("random sentences come from every other document about equally, at random positions",
                         states=("a document drawn uniformly from the others, "
                                 "then a sentence drawn uniformly from it",))
def _(fn):
    documents = numbered_documents([150] * 5, 798)
    negatives = [(origin(a), origin(b)) for a, b, is_next in checked_examples(fn, documents, 799) if not is_next]
    counts = torch.zeros(5, 5)
    for (da, _), (db, _) in negatives:
        counts[da, db] += 1
    for da in range(5):
        row = counts[da]
        total = row.sum().item()
        for db in range(5):
            if db == da:
                continue
            expected = total / 4
            if abs(row[db].item() - expected) > 5 * math.sqrt(expected * 0.75) + 1:
                raise AssertionError(f"for a in document {da}, {int(row[db])} of {int(total)} random sentences come "
                                     f"from document {db}; a uniform choice among the 4 others gives about "
                                     f"{expected:.0f}")
    positions = [jb for _, (_, jb) in negatives]
    if len(set(positions)) < 50:
        raise AssertionError(f"the random sentences come from only {len(set(positions))} positions of 150: "
                             "draw the sentence uniformly from the chosen document")
    aligned = sum(ja == jb for (_, ja), (_, jb) in negatives) / len(negatives)
    if aligned > 0.1:
        raise AssertionError(f"{100 * aligned:.0f}% of the random sentences sit at the same position as a: draw the "
                             "position at random")


@make_nsp_examples.check("documents of very different lengths (400, 1, 1, 98 sentences): each other document is "
                         "drawn equally often, however many sentences it holds",
                         states=("a document drawn uniformly from the others, "
                                 "then a sentence drawn uniformly from it",))
def _(fn):
    sizes = [400, 1, 1, 98]
    negatives = [(origin(a)[0], origin(b)[0]) for a, b, is_next in
                 checked_examples(fn, numbered_documents(sizes, 807), 808) if not is_next]
    for da in (0, 3):
        sources = [db for d, db in negatives if d == da]
        expected = len(sources) / 3
        for db in set(range(4)) - {da}:
            if abs(sources.count(db) - expected) > 5 * math.sqrt(expected * 2 / 3) + 1:
                raise AssertionError(
                    f"for a in document {da}, {sources.count(db)} of {len(sources)} random sentences come from "
                    "document "
                    f"{db} ({sizes[db]} sentences); drawing the document first (uniformly among the 3 others), then a "
                    f"sentence of it, gives about {expected:.0f} each. A sentence drawn uniformly from all the other "
                    "documents' sentences favours long documents")


@make_nsp_examples.check("one-sentence documents give no example but can supply random sentences",
                         states=("a document of n sentences gives n - 1 examples",
                                 "a document drawn uniformly from the others"))
def _(fn):
    documents = numbered_documents([1, 40, 1], 800)
    examples = checked_examples(fn, documents, 801)
    if len(examples) != 39:
        raise AssertionError(f"got {len(examples)} examples, expected 39 (only the 40-sentence document has pairs)")
    sources = {origin(b)[0] for _, b, is_next in examples if not is_next}
    if not sources <= {0, 2} or not sources:
        raise AssertionError(f"random sentences for document 1 came from documents {sorted(sources)}; expected 0 and 2")


@make_nsp_examples.check("all randomness from generator: same seed -> same examples whatever torch's global seed",
                         states=("the source of ALL randomness", "Draw every random number from `generator`"))
def _(fn):
    documents = numbered_documents([5] * 20, 802)
    manual_seed(1)
    a = fn(documents, seeded(803))
    manual_seed(2)
    b = fn(documents, seeded(803))
    c = fn(documents, seeded(804))

    def key(examples):
        return [(origin(x), origin(y), n) for x, y, n in examples]

    if key(a) != key(b):
        raise AssertionError("the same generator seed gave different examples: draw every random number from "
                             "`generator` (torch.rand(..., generator=generator)), not from random or numpy")
    if key(a) == key(c):
        raise AssertionError("two different generator seeds gave the same examples")


@make_nsp_examples.side_check("fewer than 2 documents, or an empty document, raise ValueError",
                              states=("ValueError if there are fewer than 2 documents or a document is empty",))
def _(fn):
    assert_raises_value_error(fn, numbered_documents([5], 805), seeded(0))
    assert_raises_value_error(fn, [], seeded(0))
    assert_raises_value_error(fn, numbered_documents([3, 0, 2], 806), seeded(0))


# ---------------------------------------------------------------- BertForPretraining
BertForPretraining = Exercise("BertForPretraining", points=5, forbidden=ENCODER + MULTI_HEAD_ATTENTION,
                              stand_ins={"gelu": gelu_oracle, "BertEmbeddings": BertEmbeddingsStandIn})

BV_, BD_, BH_, BN_, BFF_, BL_ = 23, 16, 4, 2, 24, 20  # vocabulary, d_model, heads, layers, d_ff, max_len


def bert_names(num_layers):
    names = {f"embeddings.{n}" for n in embedding_names()}
    for i in range(num_layers):
        p = f"layers.{i}."
        names |= {f"{p}self_attn.W_{x}.{w}" for x in "qkvo" for w in ("weight", "bias")}
        names |= {f"{p}ffn.linear{k}.{w}" for k in (1, 2) for w in ("weight", "bias")}
        names |= {f"{p}norm{k}.{w}" for k in (1, 2) for w in ("weight", "bias")}
    names |= {f"{m}.{w}" for m in ("mlm_transform", "mlm_norm", "pooler", "nsp_head") for w in ("weight", "bias")}
    return names | {"mlm_bias"}


def loaded_bert(cls, seed, dropout=0.0, scale=1.0, norm_scale=1.0):
    m = cls(BV_, BD_, BH_, BN_, BFF_, max_len=BL_, dropout=dropout)
    state = seeded_state(m, bert_names(BN_), seed, scale=scale, norm_scale=norm_scale)
    return m.eval(), state


def bert_oracle(state, input_ids, segment_ids, attention_mask=None, num_layers=BN_, num_heads=BH_):
    """(hidden (B, T, D), mlm_logits, nsp_logits) from torch layers holding the same weights."""
    x = embeddings_oracle(state, input_ids, segment_ids, prefix="embeddings.")
    B, T, D = x.shape
    pad = None if attention_mask is None else blocked(~attention_mask.bool(), num_heads, T)  # True = may NOT attend
    for i in range(num_layers):
        p = f"layers.{i}."
        attn = nn.MultiheadAttention(D, num_heads, batch_first=True)
        load_torch_attention(attn, state, p + "self_attn")
        a = attn.eval()(x, x, x, attn_mask=pad, need_weights=False)[0]
        x = F.layer_norm(x + a, (D,), state[p + "norm1.weight"], state[p + "norm1.bias"], eps=EPS)
        h = gelu_oracle(F.linear(x, state[p + "ffn.linear1.weight"], state[p + "ffn.linear1.bias"]))
        h = F.linear(h, state[p + "ffn.linear2.weight"], state[p + "ffn.linear2.bias"])
        x = F.layer_norm(x + h, (D,), state[p + "norm2.weight"], state[p + "norm2.bias"], eps=EPS)
    t = gelu_oracle(F.linear(x, state["mlm_transform.weight"], state["mlm_transform.bias"]))
    t = F.layer_norm(t, (D,), state["mlm_norm.weight"], state["mlm_norm.bias"], eps=EPS)
    mlm = t @ state["embeddings.token.weight"].T + state["mlm_bias"]
    pooled = torch.tanh(F.linear(x[:, 0], state["pooler.weight"], state["pooler.bias"]))
    nsp = F.linear(pooled, state["nsp_head.weight"], state["nsp_head.bias"])
    return x.detach(), mlm.detach(), nsp.detach()


def bert_inputs(B, T, seed):
    g = seeded(seed)
    ids = torch.randint(4, BV_, (B, T), generator=g)
    ids[:, 0] = 1
    cut = torch.randint(2, T - 1, (B,), generator=g)
    ids[torch.arange(B), cut] = 2
    segments = (torch.arange(T)[None, :] > cut[:, None]).long()
    return ids, segments


def assert_bert_output(out, expected_mlm, expected_nsp, what, atol=1e-4):
    if not isinstance(out, tuple) or len(out) != 2:
        raise AssertionError(f"forward should return a tuple (mlm_logits, nsp_logits), got {type(out).__name__}")
    assert_tensor(out[0], expected_mlm, atol=atol, what=f"mlm_logits {what}")
    assert_tensor(out[1], expected_nsp, atol=atol, what=f"nsp_logits {what}")


@BertForPretraining.check("parameters are exactly the documented ones: the MLM decoder is the token table (no (V, D) "
                          "matrix), mlm_bias (V,)",
                          states=("exactly these parameters", "mlm_bias: nn.Parameter of V zeros",
                                  "tied, no new (V, D) matrix"))
def _(cls):
    m = cls(BV_, BD_, BH_, BN_, BFF_, max_len=BL_)
    params = {k: tuple(v.shape) for k, v in m.named_parameters()}
    want = bert_names(BN_)
    extra, missing = sorted(set(params) - want), sorted(want - set(params))
    if extra or missing:
        raise AssertionError(f"unexpected parameters {extra[:4]}, missing {missing[:4]} (the MLM output layer must "
                             "reuse embeddings.token.weight; its bias is mlm_bias)")
    for name, shape in (("mlm_bias", (BV_,)), ("nsp_head.weight", (2, BD_)),
                        ("layers.1.ffn.linear1.weight", (BFF_, BD_)),
                        ("embeddings.position.weight", (BL_, BD_))):
        if params[name] != shape:
            raise AssertionError(f"{name} has shape {params[name]}, expected {shape}")


@BertForPretraining.check("forward (B=2, T=9, two segments, no padding) matches a torch oracle: MLM and NSP logits",
                          states=("mlm_logits = mlm_norm(gelu(mlm_transform(h))) @ embeddings.token.weight.T "
                                  "+ mlm_bias",
                                  "nsp_logits = nsp_head(tanh(pooler(h[:, 0]))), from the [CLS] position only",
                                  "x = norm2(x + dropout2(ffn.linear2(gelu(ffn.linear1(x)))))"))
def _(cls):
    m, state = loaded_bert(cls, 810)
    ids, segments = bert_inputs(2, 9, 811)
    _, mlm, nsp = bert_oracle(state, ids, segments)
    assert_bert_output(m(ids, segments), mlm, nsp, "without attention_mask")


@BertForPretraining.check("with padding (attention_mask not all True, B=3): every position's MLM logits and the NSP "
                          "logits match",
                          states=("padded tokens are hidden as KEYS from every query",))
def _(cls):
    m, state = loaded_bert(cls, 820)
    ids, segments = bert_inputs(3, 8, 821)
    mask = torch.arange(8)[None, :] < torch.tensor([8, 5, 3])[:, None]
    ids = ids.masked_fill(~mask, 0)
    _, mlm, nsp = bert_oracle(state, ids, segments, mask)
    assert_bert_output(m(ids, segments, mask), mlm, nsp, "with a padding attention_mask")


@BertForPretraining.check("attention_mask as 0/1 integers works like the bool mask; a padded row equals the row alone",
                          states=("(B, T) bool or 0/1 numbers",))
def _(cls):
    m, _ = loaded_bert(cls, 830)
    ids, segments = bert_inputs(2, 7, 831)
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1]])
    as_bool = m(ids, segments, mask.bool())
    as_int = m(ids, segments, mask)
    assert_bert_output(as_int, as_bool[0].detach(), as_bool[1].detach(), "with an int64 0/1 mask")
    alone = m(ids[:1, :5], segments[:1, :5])
    assert_tensor(as_bool[0][:1, :5], alone[0].detach(), atol=1e-5,
                  what="mlm_logits of the padded row vs the row alone")
    assert_tensor(as_bool[1][:1], alone[1].detach(), atol=1e-5, what="nsp_logits of the padded row vs the row alone")


@BertForPretraining.check("Post-LN with eps 1e-12 everywhere: small-scale weights (norm inputs with variance ~1e-6) "
                          "still match",
                          states=("Post-LN", "replaced by LayerNorm(D, eps=1e-12)",
                                  "mlm_norm: LayerNorm(D, eps=1e-12)"))
def _(cls):
    m, state = loaded_bert(cls, 840, scale=1e-3, norm_scale=1e-3)
    with torch.no_grad():
        for name in ("mlm_norm.weight",):  # keep the last norm at unit scale, so the logits are O(1)
            state[name] = state[name] / 1e-3
            dict(m.named_parameters())[name].copy_(state[name])
    ids, segments = bert_inputs(2, 6, 841)
    hidden, mlm, nsp = bert_oracle(state, ids, segments)
    assert_bert_output(m(ids, segments), mlm, nsp, "with small-scale weights", atol=1e-4)
    # The heads' own biases dominate their inputs at this scale and the last norm undoes any scaling, so
    # the logits alone miss an eps of 1e-5 for some draws; the hidden states (about 1e-3) never do.
    assert_tensor(m.encode(ids, segments), hidden, atol=1e-7, rtol=1e-3, what="encode(...) with small-scale weights")


@BertForPretraining.check("encode(input_ids, segment_ids, attention_mask) returns the final hidden states (B, T, D)",
                          states=("encode(input_ids (B, T), segment_ids (B, T), attention_mask=None) -> hidden states "
                                  "(B, T, D)",))
def _(cls):
    m, state = loaded_bert(cls, 850)
    ids, segments = bert_inputs(2, 6, 851)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    hidden, _, _ = bert_oracle(state, ids, segments, mask)
    assert_tensor(m.encode(ids, segments, mask), hidden, atol=1e-5, what="encode(...)")


@BertForPretraining.check("tied MLM head: a loss on mlm_logits sends gradient to every row of the token table and to "
                          "mlm_bias",
                          states=("the MLM head's weight matrix is the token table embeddings.token.weight",))
def _(cls):
    m, _ = loaded_bert(cls, 860)
    ids, segments = bert_inputs(1, 5, 861)
    m.zero_grad()
    mlm_logits, _ = m(ids, segments)
    mlm_logits.logsumexp(-1).sum().backward()
    table = m.embeddings.token.weight.grad
    unused = [v for v in range(BV_) if v not in ids.tolist()[0]]
    if table is None or (table[unused].abs().sum(-1) == 0).any():
        raise AssertionError("rows of tokens that are not in the input got no gradient: the MLM decoder should be "
                             "the token table itself (logits = ... @ embeddings.token.weight.T + mlm_bias)")
    if m.mlm_bias.grad is None or m.mlm_bias.grad.abs().sum() == 0:
        raise AssertionError("mlm_bias got no gradient: add it to the MLM logits")


@BertForPretraining.check("dropout=0.3: eval mode is dropout-free (equals the oracle); training mode is random",
                          states=("the dropout probability everywhere, in training mode; in eval mode the model is "
                                  "dropout-free",))
def _(cls):
    m, state = loaded_bert(cls, 870, dropout=0.3)
    ids, segments = bert_inputs(2, 6, 871)
    _, mlm, nsp = bert_oracle(state, ids, segments)
    assert_bert_output(m(ids, segments), mlm, nsp, "in eval mode with dropout=0.3")
    if isinstance(getattr(m.embeddings, "dropout", None), nn.Dropout):
        m.embeddings.dropout.p = 0.0  # the embeddings are graded on their own: the layers must be random here
    m.train()
    manual_seed(872)
    a = m(ids, segments)[0].detach()
    b = m(ids, segments)[0].detach()
    if torch.equal(a, b):
        raise AssertionError("in training mode two calls gave identical logits: pass dropout to the encoder layers")


DROPOUT_SITES = ("the embeddings' output", "the attention weights", "dropout1", "dropout2")


def bert_train_oracle(state, input_ids, segment_ids, p, sites=DROPOUT_SITES):
    """(mlm_logits, nsp_logits) in training mode, a FixedDropout(p) at each of `sites` (no padding)."""
    drop = {site: FixedDropout(p) if site in sites else nn.Identity() for site in DROPOUT_SITES}
    x = drop["the embeddings' output"](embeddings_oracle(state, input_ids, segment_ids, prefix="embeddings."))
    (B, T, D), H = x.shape, BH_
    for i in range(BN_):
        pre = f"layers.{i}."
        q, k, v = (F.linear(x, state[f"{pre}self_attn.W_{n}.weight"], state[f"{pre}self_attn.W_{n}.bias"])
                   .view(B, T, H, D // H).transpose(1, 2) for n in "qkv")  # (B, H, T, Dh)
        weights = drop["the attention weights"]((q @ k.transpose(-2, -1) / math.sqrt(D // H)).softmax(-1))
        a = (weights @ v).transpose(1, 2).reshape(B, T, D)
        a = F.linear(a, state[pre + "self_attn.W_o.weight"], state[pre + "self_attn.W_o.bias"])
        x = F.layer_norm(x + drop["dropout1"](a), (D,), state[pre + "norm1.weight"], state[pre + "norm1.bias"], eps=EPS)
        h = gelu_oracle(F.linear(x, state[pre + "ffn.linear1.weight"], state[pre + "ffn.linear1.bias"]))
        h = F.linear(h, state[pre + "ffn.linear2.weight"], state[pre + "ffn.linear2.bias"])
        x = F.layer_norm(x + drop["dropout2"](h), (D,), state[pre + "norm2.weight"], state[pre + "norm2.bias"], eps=EPS)
    t = F.layer_norm(gelu_oracle(F.linear(x, state["mlm_transform.weight"], state["mlm_transform.bias"])), (D,),
                     state["mlm_norm.weight"], state["mlm_norm.bias"], eps=EPS)
    pooled = torch.tanh(F.linear(x[:, 0], state["pooler.weight"], state["pooler.bias"]))
    return (t @ state["embeddings.token.weight"].T + state["mlm_bias"]).detach(), \
        F.linear(pooled, state["nsp_head.weight"], state["nsp_head.bias"]).detach()


@BertForPretraining.check("training mode, dropout=0.3, every nn.Dropout swapped for a fixed mask: dropout after the "
                          "embeddings, on the attention weights, and dropout1 and dropout2 in every layer",
                          states=("dropout acts at four sites",
                                  "dropout1 and dropout2 on every layer's sublayer outputs",
                                  "the hidden tests swap each for a fixed mask"))
def _(cls):
    m, state = loaded_bert(cls, 875, dropout=0.3)
    ids, segments = bert_inputs(2, 6, 876)
    fix_dropout(m).train()
    out = m(ids, segments)
    try:
        assert_bert_output(out, *bert_train_oracle(state, ids, segments, 0.3),
                           "in training mode with fixed dropout masks")
    except AssertionError:
        # each site alone, then both of a layer's (a label of its own: the feedback translates it whole)
        for label, missing in [(site, (site,)) for site in DROPOUT_SITES] + [
                ("both dropout1 and dropout2", ("dropout1", "dropout2"))]:
            without = bert_train_oracle(state, ids, segments, 0.3, [s for s in DROPOUT_SITES if s not in missing])
            if torch.allclose(out[0].detach(), without[0], atol=1e-4):
                raise AssertionError(f"training-mode logits match a model without dropout at {label}: "
                                     "dropout acts at four sites (the embeddings' output, the attention weights, and "
                                     "dropout1 and dropout2 in every layer)") from None
        raise


@BertForPretraining.side_check("bad arguments raise ValueError (num_layers=0, 1-D input_ids, segment_ids or "
                               "attention_mask of another shape)",
                               states=("ValueError if num_layers < 1, input_ids is not 2-dimensional, or segment_ids "
                                       "or attention_mask is not of shape (B, T)",))
def _(cls):
    assert_raises_value_error(cls, BV_, BD_, BH_, 0, BFF_)
    m = cls(BV_, BD_, BH_, BN_, BFF_, max_len=BL_)
    ids, segments = bert_inputs(2, 6, 881)
    assert_raises_value_error(m, ids[0], segments[0])
    assert_raises_value_error(m, ids, segments[:, :5])
    assert_raises_value_error(m, ids, segments, torch.ones(2, 5, dtype=torch.bool))


# ---------------------------------------------------------------- bert_pretraining_loss
bert_pretraining_loss = Exercise("bert_pretraining_loss", points=2)


def loss_oracle(mlm_logits, mlm_labels, nsp_logits, nsp_labels):
    V = mlm_logits.shape[-1]
    mlm = F.cross_entropy(mlm_logits.reshape(-1, V), mlm_labels.reshape(-1), ignore_index=-100)
    nsp = F.cross_entropy(nsp_logits, nsp_labels)
    return mlm + nsp, mlm, nsp


def assert_losses(out, expected, what, atol=1e-5):
    if not isinstance(out, tuple) or len(out) != 3:
        raise AssertionError(f"bert_pretraining_loss should return a tuple (total, mlm, nsp), got {type(out).__name__}")
    for name, value, want in zip(("total", "mlm", "nsp"), out, expected):
        assert_tensor(value, want.detach(), atol=atol, what=f"the {name} loss {what}")


def loss_inputs(B, T, V, seed, labelled=0.3):
    g = seeded(seed)
    mlm_logits = 2 * torch.randn(B, T, V, generator=g)
    labels = torch.randint(0, V, (B, T), generator=g)
    labels[torch.rand(B, T, generator=g) >= labelled] = -100
    labels[0, 0] = 3  # at least one labelled position
    nsp_logits = torch.randn(B, 2, generator=g)
    nsp_labels = torch.randint(0, 2, (B,), generator=g)
    return mlm_logits, labels, nsp_logits, nsp_labels


@bert_pretraining_loss.check("fixed example (B=2, T=5, V=7): total, mlm, nsp equal F.cross_entropy with "
                             "ignore_index=-100",
                             states=("(total, mlm, nsp), three scalar (shape ()) tensors", "total = mlm + nsp"))
def _(fn):
    mlm_logits = torch.linspace(-2, 2, 70).reshape(2, 5, 7).sin() * 3
    labels = torch.tensor([[-100, 4, -100, -100, 0], [6, -100, -100, 2, -100]])
    nsp_logits = torch.tensor([[1.5, -0.5], [0.2, 0.9]])
    nsp_labels = torch.tensor([0, 0])
    args = (mlm_logits, labels, nsp_logits, nsp_labels)
    assert_losses(fn(*args), loss_oracle(*args), "on the fixed example")


@bert_pretraining_loss.check("only labelled positions count, in the sum and in the mean (5% labelled, B=4, T=30)",
                             states=("only those count, in the sum and in the mean",))
def _(fn):
    args = loss_inputs(4, 30, 11, 890, labelled=0.05)
    assert_losses(fn(*args), loss_oracle(*args), "with 5% of the positions labelled")


@bert_pretraining_loss.check("B=1 and logits around 1e3 give finite, correct values",
                             states=("must stay finite for large logits",))
def _(fn):
    mlm_logits, labels, nsp_logits, nsp_labels = loss_inputs(1, 6, 9, 891, labelled=0.5)
    args = (mlm_logits * 500, labels, nsp_logits * 1000, nsp_labels)
    out = fn(*args)
    if isinstance(out, tuple) and any(type(v) is torch.Tensor and not torch.isfinite(v).all() for v in out):
        raise AssertionError("large logits gave inf or nan: use F.cross_entropy or log_softmax")
    assert_losses(out, loss_oracle(*args), "for large logits", atol=1e-2)


@bert_pretraining_loss.check("gradients: d total / d mlm_logits is (softmax - one-hot) / n on labelled positions, 0 "
                             "elsewhere",
                             states=("mean cross-entropy over the positions whose label is not -100",
                                     "total = mlm + nsp"))
def _(fn):
    mlm_logits, labels, nsp_logits, nsp_labels = loss_inputs(3, 4, 6, 892, labelled=0.4)
    mlm_logits.requires_grad_()
    nsp_logits.requires_grad_()
    out = fn(mlm_logits, labels, nsp_logits, nsp_labels)
    if not isinstance(out, tuple) or len(out) != 3:
        raise AssertionError("bert_pretraining_loss should return (total, mlm, nsp)")
    out[0].backward()
    keep = labels != -100
    expected = torch.zeros_like(mlm_logits)
    p = mlm_logits.detach().softmax(-1)
    expected[keep] = (p[keep] - F.one_hot(labels[keep], 6).float()) / keep.sum()
    if mlm_logits.grad is None or nsp_logits.grad is None:
        raise AssertionError("no gradient reached the logits from total")
    assert_tensor(mlm_logits.grad, expected, atol=1e-6, what="d total / d mlm_logits")
    expected_nsp = (nsp_logits.detach().softmax(-1) - F.one_hot(nsp_labels, 2).float()) / 3
    assert_tensor(nsp_logits.grad, expected_nsp, atol=1e-6, what="d total / d nsp_logits")


@bert_pretraining_loss.side_check("bad shapes raise ValueError",
                                  states=("ValueError if mlm_logits is not 3-dimensional, mlm_labels is not (B, T), "
                                          "nsp_logits is not (B, 2) or nsp_labels is not (B,)",))
def _(fn):
    mlm_logits, labels, nsp_logits, nsp_labels = loss_inputs(2, 4, 5, 893)
    assert_raises_value_error(fn, mlm_logits[0], labels[0], nsp_logits, nsp_labels)
    assert_raises_value_error(fn, mlm_logits, labels[:, :3], nsp_logits, nsp_labels)
    assert_raises_value_error(fn, mlm_logits, labels, nsp_logits[:, :1], nsp_labels)
    assert_raises_value_error(fn, mlm_logits, labels, nsp_logits, nsp_labels[:1])

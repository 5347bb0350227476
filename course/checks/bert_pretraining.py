"""Public checks for chapter 07 (GELU, BERT's inputs, masking, NSP pairs, the model, the loss).

Between the `# --- stored numbers` lines are what the reference solution gives on the fixed inputs
defined here, and what the usual mistakes give on the same inputs, which is how a failing check names
the mistake; `python -m tests.snapshots --write` computes them again in the course repository.
Weights are set with a fixed formula (`fill`), chosen by each parameter's name.
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn

from course.checks import (
    avoid_library_call,
    close,
    diagnose,
    dropout_calls,
    expect_tensor,
    expect_value_error,
    fail,
    mistake,
    name_wave,
    passed,
    public_check,
    tr,
)


def fill(module: nn.Module) -> None:
    """Fixed, formula-made weights chosen by each parameter's name (creation order does not matter)."""
    for name, p in sorted(module.named_parameters()):
        wave = name_wave(name, p.shape)
        with torch.no_grad():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * wave)
            elif name.endswith("bias"):
                p.copy_(0.1 * wave)
            elif p.dim() == 2:
                p.copy_(wave / math.sqrt(p.shape[1]))
            else:
                p.copy_(wave)


# ---------------------------------------------------------------- gelu

GELU_X = torch.tensor([-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0])
# --- stored numbers: gelu ---
GELU_OUT = [-0.003637, -0.045402, -0.158808, -0.154286, 0.0, 0.345714, 0.841192, 1.954598, 2.996363]
# mistake: the exact erf form (what F.gelu does by default), not the tanh form
GELU_EXACT = [-0.00405, -0.0455, -0.158655, -0.154269, 0.0, 0.345731, 0.841345, 1.9545, 2.99595]
# mistake: the sigmoid approximation x * sigmoid(1.702 x)
GELU_SIGMOID = [-0.018071, -0.064341, -0.154204, -0.149612, 0.0, 0.350388, 0.845796, 1.935659, 2.981929]
# mistake: x**2 in the cubic term
GELU_SQUARE = [-0.046784, -0.103704, -0.178812, -0.157155, 0.0, 0.346664, 0.841192, 1.94005, 2.986902]
# mistake: sqrt(2 * pi) instead of sqrt(2 / pi)
GELU_SQRT_2PI = [0.0, -1.5e-05, -0.005286, -0.036732, 0.0, 0.463268, 0.994714, 1.999985, 3.0]
# mistake: the 0.5 in front left out
GELU_NO_HALF = [-0.007275, -0.090805, -0.317616, -0.308572, 0.0, 0.691428, 1.682384, 3.909195, 5.992725]
# --- end of stored numbers ---
GELU_MISTAKES = {
    tr("these are the values of the EXACT GELU, x * Phi(x) with erf; this exercise asks for the tanh form "
       "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) that BERT's code uses"): GELU_EXACT,
    tr("this is the sigmoid approximation x * sigmoid(1.702 x), not the tanh form"): GELU_SIGMOID,
    tr("the cubic term is 0.044715 * x**3 (you used x**2)"): GELU_SQUARE,
    tr("the factor inside tanh is sqrt(2 / pi) (about 0.798), not sqrt(2 * pi)"): GELU_SQRT_2PI,
    tr("the 0.5 in front is missing: 0.5 * x * (1 + tanh(...))"): GELU_NO_HALF,
}

@public_check
def check_gelu(fn) -> None:
    avoid_library_call(fn, ("gelu", "GELU"), tr("write the formula yourself with torch.tanh; the grader gives zero "
                                                "to a solution that calls F.gelu or nn.GELU"))
    x = GELU_X.clone()
    out = fn(x)
    if not torch.equal(x, GELU_X):
        fail(tr("gelu modified its input in place: compute a new tensor (no mul_, add_, ...)"))
    diagnose(out, GELU_OUT, GELU_MISTAKES, "gelu([-3, -2, -1, -0.5, 0, 0.5, 1, 2, 3])", atol=2e-5)
    big = fn(torch.tensor([-100.0, 100.0]))
    if not torch.isfinite(big).all():
        fail(tr("gelu(+-100) gave inf or nan: use torch.tanh (it saturates to +-1) rather than a formula with exp"))
    if fn(torch.zeros(2, 3, dtype=torch.float64)).dtype != torch.float64:
        fail(tr("gelu should keep the dtype of x (float64 in, float64 out)"))
    passed("gelu")


# ---------------------------------------------------------------- build_pair_input

@public_check
def check_build_pair_input(fn) -> None:
    a, b = [7, 8, 9], [10, 11]
    result = fn(a, b, 1, 2)
    if not isinstance(result, tuple) or len(result) != 2:
        fail(tr("build_pair_input should return a tuple (input_ids, segment_ids), got {type}",
                type=type(result).__name__))
    ids, segments = result
    if a != [7, 8, 9] or b != [10, 11]:
        fail(tr("tokens_a or tokens_b was modified (now {a}, {b}): build new lists instead of appending to them",
                a=a, b=b))
    if ids != [1, 7, 8, 9, 2, 10, 11, 2]:
        fail(tr("input_ids should be [CLS] a [SEP] b [SEP] = [1, 7, 8, 9, 2, 10, 11, 2]; got {ids}", ids=ids))
    if segments == [0, 0, 0, 0, 1, 1, 1, 1]:
        fail(tr("the first [SEP] closes sentence A, so it has segment 0: segment 1 starts with the first token of b"))
    if segments == [0, 0, 0, 0, 0, 1, 1, 0]:
        fail(tr("the last [SEP] belongs to sentence B: segment 1"))
    if segments == [1, 1, 1, 1, 1, 2, 2, 2]:
        fail(tr("segment ids are 0 (sentence A) and 1 (sentence B): they index a table of num_segments = 2 rows"))
    if segments != [0, 0, 0, 0, 0, 1, 1, 1]:
        fail(tr("segment_ids should be [0, 0, 0, 0, 0, 1, 1, 1]; got {segments}", segments=segments))
    single = fn([5, 6], None, 1, 2)
    if single != ([1, 5, 6, 2], [0, 0, 0, 0]):
        fail(tr("with tokens_b=None the input is [CLS] a [SEP] with segments 0: ([1, 5, 6, 2], [0, 0, 0, 0]); "
                "got {single}", single=single))
    expect_value_error(fn, [], [3], 1, 2, what=tr("an empty tokens_a"))
    passed("build_pair_input")


# ---------------------------------------------------------------- BertEmbeddings

EMB_IDS = torch.tensor([[1, 4, 2, 5, 2]])
EMB_SEGMENTS = torch.tensor([[0, 0, 0, 1, 1]])
# --- stored numbers: BertEmbeddings ---
EMB_OUT = [[[1.188532, 0.275499, -0.587522, -1.284384],
            [1.181523, 0.284555, -0.578751, -1.295792],
            [-0.999489, -0.500508, 0.285259, 1.32304],
            [-0.860049, -0.611589, 0.146656, 1.431572],
            [-1.039818, -0.462897, 0.328115, 1.282336]]]
# mistake: the segment embedding is never added
EMB_NO_SEGMENT = [[[1.235759, 0.208888, -0.649436, -1.198037],
                   [1.199908, 0.260379, -0.601938, -1.265189],
                   [-1.067254, -0.43555, 0.358242, 1.251567],
                   [-1.04049, -0.462252, 0.328859, 1.281605],
                   [-1.337184, 0.294832, 0.892714, 0.159869]]]
# mistake: no LayerNorm applied
EMB_NO_NORM = [[[-0.038316, -0.372505, -0.656286, -0.851238],
                [0.002204, -0.478807, -0.89501, -1.19008],
                [-0.462462, -0.335367, -0.162869, 0.031665],
                [-0.670238, -0.609692, -0.466627, -0.260383],
                [-0.158571, -0.094187, -0.017048, 0.062411]]]
# --- end of stored numbers ---
EMB_MISTAKES = {
    tr("the segment embedding is missing: add segment(segment_ids)"): EMB_NO_SEGMENT,
    tr("the embeddings are summed but never normalised: apply norm (LayerNorm) to the sum"): EMB_NO_NORM,
}

@public_check
def check_BertEmbeddings(cls) -> None:
    m = cls(6, 4, 5)
    params = dict(m.named_parameters())
    want = {"token.weight": (6, 4), "segment.weight": (2, 4), "position.weight": (5, 4), "norm.weight": (4,),
            "norm.bias": (4,)}
    got = {k: tuple(v.shape) for k, v in params.items()}
    if got != want:
        fail(tr("BertEmbeddings(6, 4, 5) should have the parameters {want}; got {got}. The position table is "
                "learned (an nn.Embedding of max_len rows), not the sinusoids of chapter 03", want=want, got=got))
    eps = getattr(m.norm, "eps", None)
    if eps is not None and eps != 1e-12:
        fail(tr("norm has eps={eps}; BERT uses LayerNorm(d_model, eps=1e-12)", eps=eps))
    fill(m)
    m.eval()
    out = m(EMB_IDS, EMB_SEGMENTS)
    expect_tensor(out, (1, 5, 4), "BertEmbeddings(6, 4, 5)(ids (1, 5), segments (1, 5))")
    diagnose(out, EMB_OUT, EMB_MISTAKES, tr("the embeddings with fixed weights"))
    if not close(m(EMB_IDS), m(EMB_IDS, torch.zeros_like(EMB_IDS))):
        fail(tr("segment_ids=None should mean segment 0 for every token"))
    expect_value_error(m, torch.zeros(1, 6, dtype=torch.long), what="T = 6 > max_len = 5")
    passed("BertEmbeddings")


# ---------------------------------------------------------------- mask_tokens

def _mask_batch() -> torch.Tensor:
    ids = (torch.arange(96 * 40).reshape(96, 40) * 7 % 26 + 4)  # ordinary tokens 4..29
    ids[:, 0], ids[:, 19], ids[:, 33] = 1, 2, 2  # [CLS] ... [SEP] ... [SEP]
    ids[:, 34:] = 0  # [PAD]
    return ids


@public_check
def check_mask_tokens(fn) -> None:
    ids = _mask_batch()
    before = ids.clone()
    result = fn(ids, 30, 3, (0, 1, 2, 3), 0.5, torch.Generator().manual_seed(0))
    if not torch.equal(ids, before):
        fail(tr("mask_tokens modified input_ids in place: clone it first and change the copy"))
    if not isinstance(result, tuple) or len(result) != 2:
        fail(tr("mask_tokens should return a tuple (masked_ids, labels), got {type}", type=type(result).__name__))
    masked, labels = result
    for what, t in (("masked_ids", masked), ("labels", labels)):
        expect_tensor(t, tuple(ids.shape), what)
        if t.dtype != torch.int64:
            fail(tr("{what} should be int64, got {dtype}", what=what, dtype=t.dtype))
    special = (ids <= 3)
    if (labels == 0).sum() > (labels == -100).sum():
        fail(tr("positions that were not chosen should have label -100 (the value cross-entropy ignores), not 0"))
    chosen = labels != -100
    if chosen[special].any():
        fail(tr("special tokens ([PAD], [CLS], [SEP], [MASK]) were chosen: exclude every id in special_ids"))
    if (labels[chosen] == 3).any():
        fail(tr("some labels are the [MASK] id: take the labels from the ORIGINAL input_ids, before replacing "
                "anything"))
    if not torch.equal(labels[chosen], ids[chosen]):
        fail(tr("labels at chosen positions should be the original ids"))
    if not torch.equal(masked[~chosen], ids[~chosen]):
        fail(tr("tokens that were not chosen must stay as they were, and every changed token needs its label"))
    rate = chosen.sum().item() / (~special).sum().item()
    if abs(rate - 0.5) > 0.05:
        fail(tr("with mlm_probability=0.5, {percent:.1f}% of the non-special tokens were chosen", percent=100 * rate))
    out, orig = masked[chosen], ids[chosen]
    masked_frac = (out == 3).float().mean().item()
    same_frac = (out == orig).float().mean().item()
    other_frac = 1 - masked_frac - same_frac
    if other_frac < 0.05:
        fail(tr("only {percent:.1f}% of the chosen tokens became a random id (expected 10%). Drawing the random "
                "branch with probability 0.1 among the tokens not masked gives 0.2 * 0.1 = 2%: split ONE uniform "
                "number per token into [0, 0.8), [0.8, 0.9), [0.9, 1)", percent=100 * other_frac))
    if abs(masked_frac - 0.8) > 0.05 or abs(same_frac - 0.1) > 0.04:
        fail(tr("of the chosen tokens {masked:.1f}% became [MASK] and {same:.1f}% stayed unchanged; expected 80% "
                "and 10%", masked=100 * masked_frac, same=100 * same_frac))
    again = fn(ids, 30, 3, (0, 1, 2, 3), 0.5, torch.Generator().manual_seed(0))
    if not (torch.equal(again[0], masked) and torch.equal(again[1], labels)):
        fail(tr("the same generator seed gave a different result: pass generator=generator to every "
                "torch.rand/randint"))
    expect_value_error(fn, ids, 30, 3, (0, 1, 2, 3), 1.5, what="mlm_probability = 1.5")
    passed("mask_tokens")


# ---------------------------------------------------------------- make_nsp_examples

def _documents() -> list:
    """Document d, sentence j is [100 * d + j, 99]."""
    return [[[100 * d + j, 99] for j in range(n)] for d, n in enumerate([6, 4, 7, 5, 1, 6])]


@public_check
def check_make_nsp_examples(fn) -> None:
    docs = _documents()
    snapshot = copy.deepcopy(docs)
    examples = fn(docs, torch.Generator().manual_seed(0))
    if docs != snapshot:
        fail(tr("the documents were modified"))
    if not isinstance(examples, list) or not all(isinstance(e, tuple) and len(e) == 3 for e in examples):
        fail(tr("make_nsp_examples should return a list of (a, b, is_next) tuples"))
    if any(type(n) is not bool for _, _, n in examples):
        fail(tr("is_next should be a Python bool (True or False), e.g. torch.rand(()).item() < 0.5"))
    if len(examples) != 23:
        fail(tr("got {count} examples; a document of n sentences gives n - 1 (here 5 + 3 + 6 + 4 + 0 + 5 = 23)",
                count=len(examples)))
    follows = [divmod(list(b)[0], 100) == (list(a)[0] // 100, list(a)[0] % 100 + 1) for a, b, _ in examples]
    if examples and all(f != n for f, (_, _, n) in zip(follows, examples)):
        fail(tr("is_next is inverted: it is True when b is a random sentence and False when b is the next sentence. "
                "is_next should be True exactly when b is the sentence right after a"))
    for a, b, is_next in examples:
        da, ja = divmod(list(a)[0], 100)
        db, jb = divmod(list(b)[0], 100)
        if is_next and (db, jb) != (da, ja + 1):
            fail(tr("is_next is True for a = sentence {ja} of document {da} but b is sentence {jb} of document {db}; "
                    "b should be the next sentence", ja=ja, da=da, jb=jb, db=db))
        if not is_next and db == da:
            fail(tr("a random b came from a's own document {da}: draw it from the OTHER documents", da=da))
    pos = sum(n for _, _, n in examples)
    if pos in (0, len(examples)):
        fail(tr("all examples have the same is_next: flip a fair coin for each one"))
    again = fn(docs, torch.Generator().manual_seed(0))
    if [(list(a), list(b), n) for a, b, n in again] != [(list(a), list(b), n) for a, b, n in examples]:
        fail(tr("the same generator seed gave different examples: draw every random number from `generator`"))
    expect_value_error(fn, docs[:1], what=tr("a single document"))
    passed("make_nsp_examples")


# ---------------------------------------------------------------- BertForPretraining

MODEL_IDS = torch.tensor([[1, 4, 5, 2, 6, 2], [1, 5, 2, 6, 4, 0]])
MODEL_SEGMENTS = torch.tensor([[0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0]])
MODEL_MASK = torch.tensor([[True] * 6, [True] * 5 + [False]])
# --- stored numbers: BertForPretraining ---
MLM_ROW0 = [[0.087615, -0.274107, 0.030743, 0.432966, 0.165544, -0.336645, -0.220716],
            [0.088173, -0.273727, 0.030253, 0.432498, 0.165949, -0.336103, -0.221023],
            [0.000551, 0.070771, 0.180355, 0.115243, -0.041678, -0.056472, 0.037316],
            [0.041444, 0.10447, 0.145574, 0.075237, -0.014151, -0.011474, 0.01795],
            [0.071809, 0.128087, 0.119493, 0.04689, 0.006791, 0.02067, 0.002838],
            [0.029067, 0.094436, 0.156131, 0.087186, -0.022541, -0.024944, 0.023897]]
NSP = [[-0.431257, -0.120225], [-0.43002, -0.122321]]
# mistake: calls chapter 05's layer(x, mask): ReLU feed-forward
MLM_RELU = [[0.041997, -0.304765, 0.070801, 0.470889, 0.132363, -0.380584, -0.195503],
            [0.042518, -0.304418, 0.070343, 0.470459, 0.132744, -0.380086, -0.195793],
            [-0.02331, 0.050629, 0.200563, 0.13905, -0.057568, -0.083161, 0.048367],
            [0.023035, 0.089502, 0.161268, 0.093051, -0.026615, -0.031548, 0.026773],
            [0.055804, 0.115842, 0.133276, 0.061635, -0.004319, 0.003911, 0.010908],
            [0.009045, 0.077907, 0.173154, 0.106802, -0.036008, -0.047003, 0.033363]]
# mistake: Pre-LN instead of Post-LN
MLM_PRE_LN = [[0.573106, 0.105528, -0.385906, -0.022221, 0.499645, 0.179134, -0.461287],
              [0.57333, 0.105734, -0.386093, -0.022461, 0.499789, 0.1794, -0.461383],
              [0.395689, 0.310688, -0.171269, -0.188442, 0.254879, 0.300987, -0.194413],
              [0.400662, 0.30653, -0.176996, -0.185323, 0.261171, 0.299008, -0.201065],
              [0.439189, 0.324857, -0.2122, -0.210034, 0.291894, 0.32929, -0.226296],
              [0.394635, 0.305109, -0.171227, -0.182856, 0.25585, 0.295577, -0.196365]]
# mistake: the decoder bias is never added
MLM_NO_BIAS = [[-0.007491, -0.373951, -0.060326, 0.362999, 0.12615, -0.340136, -0.187833],
               [-0.006933, -0.373571, -0.060815, 0.36253, 0.126555, -0.339595, -0.188139],
               [-0.094556, -0.029073, 0.089286, 0.045275, -0.081072, -0.059964, 0.0702],
               [-0.053663, 0.004626, 0.054505, 0.005269, -0.053545, -0.014966, 0.050833],
               [-0.023298, 0.028243, 0.028424, -0.023077, -0.032604, 0.017178, 0.035722],
               [-0.06604, -0.005408, 0.065062, 0.017218, -0.061936, -0.028436, 0.056781]]
# mistake: the MLM head has no transform (logits straight from the hidden states)
MLM_NO_TRANSFORM = [[0.77395, 0.72967, -0.47356, -0.662243, 0.47124, 0.814021, -0.317747],
                    [0.774529, 0.729601, -0.474151, -0.662282, 0.471824, 0.814165, -0.318305],
                    [-0.627323, -0.171418, 0.764311, 0.46332, -0.562511, -0.499008, 0.477901],
                    [-0.69737, -0.278768, 0.814889, 0.579838, -0.59196, -0.620871, 0.485252],
                    [-0.683051, -0.335926, 0.790203, 0.632516, -0.557723, -0.667345, 0.442586],
                    [-0.681567, -0.245911, 0.805045, 0.545197, -0.588397, -0.585583, 0.488088]]
# mistake: segment_ids are not passed to the embeddings
MLM_NO_SEGMENTS = [[0.087494, -0.274189, 0.030849, 0.433068, 0.165457, -0.336762, -0.22065],
                   [0.088051, -0.273811, 0.030361, 0.432601, 0.16586, -0.336222, -0.220955],
                   [-0.000149, 0.070185, 0.180949, 0.115937, -0.042145, -0.057251, 0.037642],
                   [0.041176, 0.104255, 0.145803, 0.075493, -0.014333, -0.011763, 0.01808],
                   [0.033821, 0.098312, 0.15208, 0.082575, -0.019326, -0.01975, 0.021624],
                   [0.001749, 0.071778, 0.179339, 0.114052, -0.040878, -0.055136, 0.036759]]
# mistake: NSP pooled from the mean of the hidden states, not [CLS]
NSP_MEAN = [[-0.065172, 0.123502], [-0.243721, 0.021927]]
# mistake: the pooler has no tanh
NSP_NO_TANH = [[-0.503299, -0.095753], [-0.503341, -0.098199]]
# --- end of stored numbers ---
MLM_MISTAKES = {
    tr("this matches calling chapter 05's layer(x, mask), whose feed-forward uses ReLU: run the layer's parts "
       "yourself with gelu between ffn.linear1 and ffn.linear2"): MLM_RELU,
    tr("this is the Pre-LN order x + sublayer(norm(x)); BERT is Post-LN: x = norm1(x + attention), x = norm2(x + ffn)"):
        MLM_PRE_LN,
    tr("mlm_bias is missing: logits = transformed @ embeddings.token.weight.T + mlm_bias"): MLM_NO_BIAS,
    tr("the MLM transform is missing: logits come from mlm_norm(gelu(mlm_transform(h))), not from h"): MLM_NO_TRANSFORM,
    tr("segment_ids do not reach the embeddings: call self.embeddings(input_ids, segment_ids)"): MLM_NO_SEGMENTS,
}
NSP_MISTAKES = {
    tr("the NSP head should read the [CLS] position (the first of each sequence), not the mean over positions"):
        NSP_MEAN,
    tr("the pooler is dense + tanh: the [CLS] vector goes through the pooler's linear layer, then tanh, and only "
       "then to the NSP head"): NSP_NO_TANH,
}
BERT_DROPOUTS = {
    "embeddings.dropout": tr("BertEmbeddings drops its output"),
    "layers.0.self_attn.dropout": tr("self_attn drops the attention weights (build EncoderLayer(..., dropout))"),
    "layers.0.dropout1": tr("x = norm1(x + dropout1(attention output))"),
    "layers.0.dropout2": tr("x = norm2(x + dropout2(feed-forward output))"),
}


@public_check
def check_BertForPretraining(cls) -> None:
    avoid_library_call(cls, ("scaled_dot_product_attention", "MultiheadAttention", "TransformerEncoderLayer"),
                       tr("build the model from MultiHeadAttention and the chapter 05 pieces; the grader gives zero to "
                          "a solution that calls PyTorch's attention or encoder layers"))
    V, D = 7, 4
    model = cls(V, D, 2, 1, 6, max_len=8)
    params = {k: tuple(v.shape) for k, v in model.named_parameters()}
    for name in ("embeddings.token.weight", "layers.0.self_attn.W_q.weight", "layers.0.ffn.linear1.weight",
                 "layers.0.norm1.weight", "mlm_transform.weight", "mlm_norm.weight", "mlm_bias", "pooler.weight",
                 "nsp_head.weight"):
        if name not in params:
            fail(tr("the model has no parameter {name}; see the docstring for the names of the parts. "
                    "Found: {names} ...", name=name, names=sorted(params)[:6]))
    untied = [n for n, s in params.items() if n != "embeddings.token.weight" and set(s) == {V, D}]
    if untied:
        fail(tr("{name} is a separate output matrix: the MLM decoder is the token table itself, "
                "logits = ... @ self.embeddings.token.weight.T + self.mlm_bias", name=untied[0]))
    for i, layer in enumerate(model.layers):
        for norm in ("norm1", "norm2"):
            eps = getattr(getattr(layer, norm, None), "eps", None)
            if eps is not None and eps != 1e-12:
                fail(tr("layers[{i}].{norm} has eps={eps}: replace chapter 05's norms with LayerNorm(d_model, "
                        "eps=1e-12)", i=i, norm=norm, eps=eps))
    fill(model)
    model.eval()
    with torch.no_grad():
        out = model(MODEL_IDS, MODEL_SEGMENTS, MODEL_MASK)
        if not isinstance(out, tuple) or len(out) != 2:
            fail(tr("forward should return (mlm_logits, nsp_logits), got {type}", type=type(out).__name__))
        mlm_logits, nsp_logits = out
        expect_tensor(mlm_logits, (2, 6, V), "mlm_logits")
        expect_tensor(nsp_logits, (2, 2), "nsp_logits")
        alone_mlm, alone_nsp = model(MODEL_IDS[1:, :5], MODEL_SEGMENTS[1:, :5])
        if not close(alone_mlm, mlm_logits[1:, :5], atol=1e-5):
            fail(tr("the padded row gives other logits than the same row without its padding: turn attention_mask "
                    "(B, T) into a (B, 1, 1, T) bool mask and pass it to every self-attention (it hides padded KEYS)"))
        hint = tr(" (if your gelu or BertEmbeddings fail their checks, fix those first)")
        diagnose(mlm_logits[0], MLM_ROW0, {k + hint: v for k, v in MLM_MISTAKES.items()},
                 tr("mlm_logits of row 0 with fixed weights") + hint)
        diagnose(nsp_logits, NSP, {k + hint: v for k, v in NSP_MISTAKES.items()},
                 tr("nsp_logits with fixed weights") + hint)
        if not close(alone_nsp, nsp_logits[1:], atol=1e-5):
            fail(tr("the NSP logits of the padded row differ from the row without its padding"))
        hidden = model.encode(MODEL_IDS, MODEL_SEGMENTS, MODEL_MASK)
        expect_tensor(hidden, (2, 6, D), "model.encode(...)")
    expect_value_error(model, MODEL_IDS, MODEL_SEGMENTS[:, :4], what=tr("segment_ids of another shape"))
    ran = {name for name, _ in dropout_calls(cls(V, D, 2, 1, 6, max_len=8, dropout=0.1), MODEL_IDS, MODEL_SEGMENTS)}
    for name, site in BERT_DROPOUTS.items():
        if name not in ran:
            fail(tr("in training mode `{name}` never ran: dropout acts at four sites, and {site}. Apply each through "
                    "its nn.Dropout module (the hidden tests check every site)", name=name, site=site))
    passed("BertForPretraining")


# ---------------------------------------------------------------- bert_pretraining_loss

LOSS_MLM = torch.tensor([[[2.0, 0.0, -1.0], [0.5, 0.5, 0.0], [1.0, -1.0, 3.0]],
                         [[0.0, 0.0, 0.0], [-2.0, 1.0, 0.5], [0.3, 0.2, 0.1]]])
LOSS_LABELS = torch.tensor([[0, -100, 2], [-100, -100, 1]])
LOSS_NSP = torch.tensor([[1.0, -1.0], [0.5, 0.25]])
LOSS_NSP_LABELS = torch.tensor([0, 1])
# --- stored numbers: bert_pretraining_loss ---
# (total, mlm, nsp)
LOSS_OUT = (0.948007, 0.471573, 0.476434)
# mistake: MLM loss over every position (the -100 labels clamped to 0)
LOSS_EVERY_POSITION = (1.639092, 1.162658, 0.476434)
# mistake: MLM loss summed over labelled positions but divided by B * T
LOSS_OVER_B_T = (0.71222, 0.235787, 0.476434)
# mistake: total is the average (mlm + nsp) / 2
LOSS_AVERAGE = (0.474004, 0.471573, 0.476434)
# mistake: binary cross-entropy on the second NSP logit
LOSS_BINARY_NSP = (0.916174, 0.471573, 0.444601)
# mistake: NSP labels flipped (1 - labels)
LOSS_NSP_FLIPPED = (1.823007, 0.471573, 1.351434)
# --- end of stored numbers ---
LOSS_MISTAKES = {
    tr("the MLM loss counts every position; only positions whose label is not -100 count "
       "(F.cross_entropy ignores -100 by default: do not replace the -100s)"): LOSS_EVERY_POSITION,
    tr("the MLM loss is divided by B * T; it is the mean over the labelled positions only"): LOSS_OVER_B_T,
    tr("total is the SUM mlm + nsp, not their average"): LOSS_AVERAGE,
    tr("NSP has two classes: use cross-entropy over the 2 logits, not a binary loss on one of them"): LOSS_BINARY_NSP,
    tr("the NSP labels are the class indices as given (0 = b follows a, 1 = b is random); do not flip them"):
        LOSS_NSP_FLIPPED,
}

@public_check
def check_bert_pretraining_loss(fn) -> None:
    out = fn(LOSS_MLM, LOSS_LABELS, LOSS_NSP, LOSS_NSP_LABELS)
    if not isinstance(out, tuple) or len(out) != 3:
        fail(tr("bert_pretraining_loss should return a tuple (total, mlm, nsp), got {type}", type=type(out).__name__))
    for name, value in zip(("total", "mlm", "nsp"), out):
        expect_tensor(value, (), name)
    got = [v.item() for v in out]

    def same(values) -> bool:
        return all(math.isclose(g, w, rel_tol=1e-4, abs_tol=1e-6) for g, w in zip(got, values))

    if not same(LOSS_OUT):
        for hint, wrong in LOSS_MISTAKES.items():
            if same(wrong):
                mistake(hint)
        fail(tr("(total, mlm, nsp) = ({total:.6f}, {mlm:.6f}, {nsp:.6f}); expected ({want_total:.6f}, "
                "{want_mlm:.6f}, {want_nsp:.6f})", total=got[0], mlm=got[1], nsp=got[2], want_total=LOSS_OUT[0],
                want_mlm=LOSS_OUT[1], want_nsp=LOSS_OUT[2]))
    expect_value_error(fn, LOSS_MLM, LOSS_LABELS[:, :2], LOSS_NSP, LOSS_NSP_LABELS,
                       what=tr("mlm_labels of another shape"))
    passed("bert_pretraining_loss")

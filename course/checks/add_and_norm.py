"""Public checks for chapter 05 (residuals, LayerNorm, the feed-forward block, the encoder layer).

Between the `# --- stored numbers` lines are what the reference solution gives on the fixed inputs
defined here, and what the usual mistakes give on the same inputs, which is how a failing check can
name the mistake; `python -m tests.snapshots --write` computes them again in the course repository.
Weights are set with a fixed formula (`fill`), not drawn at random.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course.checks import (
    avoid_library_call,
    close,
    diagnose,
    expect_dropouts,
    expect_tensor,
    expect_value_error,
    fail,
    mistake,
    passed,
    public_check,
    tr,
)

T = torch.tensor

# ---------------------------------------------------------------- fixed inputs
# Row 0 is ordinary; row 1 has a standard deviation of about 1e-3, where eps matters.
X = T([[1.0, 2.0, 4.0, -3.0], [0.001, -0.002, 0.0, 0.0015]])
W = T([1.0, 0.5, -1.0, 2.0])
B = T([0.0, 0.1, 0.2, -0.3])

LAYER_KEYS = [f"self_attn.{w}.{p}" for w in ("W_q", "W_k", "W_v", "W_o") for p in ("weight", "bias")] + [
    f"{m}.{p}" for m in ("ffn.linear1", "ffn.linear2", "norm1", "norm2") for p in ("weight", "bias")]


def fill(module: nn.Module, keys: list[str]) -> None:
    """Set the named parameters to fixed, formula-made values (LayerNorm weights near 1)."""
    state = module.state_dict()
    missing = [k for k in keys if k not in state]
    if missing:
        fail(tr("your module has no parameter {name}; its parameters are {names}. "
                "Use the attribute names of the docstring", name=missing[0], names=sorted(state)))
    with torch.no_grad():
        for k, key in enumerate(keys):
            p = state[key]
            wave = torch.sin(0.9 * torch.arange(p.numel(), dtype=torch.float32) + 0.7 * (k + 1)).view_as(p)
            if "norm" in key and key.endswith("weight"):
                p.copy_(1.0 + 0.5 * wave)
            elif key.endswith("bias"):
                p.copy_(0.2 * wave)
            else:
                p.copy_(1.5 * wave / math.sqrt(p.shape[1]))


def sequence(T_: int = 3, D: int = 4) -> torch.Tensor:
    """A fixed (1, T, D) input."""
    return torch.cos(0.5 * torch.arange(T_ * D, dtype=torch.float32) + 1.0).view(1, T_, D) * 2.0


CAUSAL = torch.ones(3, 3, dtype=torch.bool).tril()


def _float_parameter(module: nn.Module, name: str, shape: tuple[int, ...]) -> None:
    value = getattr(module, name, None)
    if value is None:
        fail(tr("self.{name} is missing", name=name))
    if not isinstance(value, nn.Parameter):
        fail(tr("self.{name} should be an nn.Parameter (wrap the tensor: nn.Parameter(torch.ones(d_model))), "
                "otherwise the optimiser never sees it and .to(device) does not move it", name=name))
    if tuple(value.shape) != shape:
        fail(tr("self.{name} has shape {got}; expected {shape}", name=name, got=tuple(value.shape), shape=shape))


def _match(actual, expected, mistakes: dict, what: str, otherwise: str) -> None:
    """Like diagnose, but with a chapter-specific hint when no known mistake matches."""
    if close(actual, expected):
        return
    expect_tensor(actual, tuple(torch.as_tensor(expected).shape), what)
    for hint, wrong in mistakes.items():
        if close(actual, wrong):
            mistake(hint)
    fail(tr("{what} differs from the expected values. {otherwise}", what=what, otherwise=otherwise))


# ---------------------------------------------------------------- layer_norm

# --- stored numbers: layer_norm ---
LN_OUT = [[0.0, 0.296116, -0.976696, -3.437856], [0.254756, -0.209347, 0.236394, 0.500662]]
# mistake: unbiased variance (torch.var default, divides by D - 1)
LN_UNBIASED = [[0.0, 0.269841, -0.819049, -3.017463], [0.248525, -0.20178, 0.235504, 0.481079]]
# mistake: eps added outside the square root
LN_EPS_OUTSIDE = [[0.0, 0.296115, -0.976692, -3.437846], [0.64792, -0.68676, 0.29256, 1.73632]]
# mistake: std with the default unbiased setting plus eps outside (x.std)
LN_STD_EPS = [[0.0, 0.269841, -0.819046, -3.017456], [0.561672, -0.582031, 0.280239, 1.465256]]
# mistake: forgot weight and bias
LN_NO_AFFINE = [[0.0, 0.392232, 1.176696, -1.568928], [0.254756, -0.618693, -0.036394, 0.400331]]
# mistake: normalises over dim 0 (the batch) instead of the last axis
LN_DIM0 = [[0.99998, 0.599998, -0.799999, -2.299995], [-0.99998, -0.399998, 1.199999, 1.699996]]
LN_OUT_EPS = [[0.0, 0.288982, -0.933894, -3.323716], [0.001237, 0.098497, 0.200177, -0.296111]]
# mistake: normalises over dim 1
LN_DIM0_3D = [[[0.99998, 0.599998, -0.799999, -2.299995], [-0.99998, -0.399998, 1.199999, 1.699996]]]
# --- end of stored numbers ---

@public_check
def check_layer_norm(fn) -> None:
    avoid_library_call(fn, ("layer_norm", "LayerNorm", "native_layer_norm"),
                       tr("compute the mean and the variance yourself: F.layer_norm / nn.LayerNorm score zero here"))
    out = fn(X, W, B)
    expect_tensor(out, (2, 4), "layer_norm(x (2, 4), weight, bias)")
    mistakes = {
        tr("you used the unbiased variance (divide by D - 1, the default of torch.var / x.var / x.std): "
           "LayerNorm divides by D; use ((x - mean) ** 2).mean(-1) or x.var(-1, unbiased=False)"): LN_UNBIASED,
        tr("eps belongs inside the square root, sqrt(var + eps), not after it (std + eps); the two differ "
           "on rows of small variance like row 1"): LN_EPS_OUTSIDE,
        tr("two mistakes: x.std() is unbiased (divide by D, not D - 1) and eps belongs inside the square "
           "root"): LN_STD_EPS,
        tr("you forgot to scale by weight and shift by bias at the end"): LN_NO_AFFINE,
        tr("you normalised over dim 0 (down the batch); LayerNorm normalises each vector over its last axis, "
           "dim=-1, keepdim=True"): LN_DIM0,
    }
    diagnose(out, LN_OUT, mistakes, tr("layer_norm(x, weight, bias) for x (2, 4)"))
    _match(fn(X, W, B, eps=0.5), LN_OUT_EPS, {
        tr("the eps argument is ignored: use the eps you are given, not a fixed 1e-5"): LN_OUT,
    }, "layer_norm(x, weight, bias, eps=0.5)", tr("Add eps to the variance inside the square root."))
    _match(fn(X.view(1, 2, 4), W, B), [LN_OUT], {
        tr("for a (1, 2, 4) input you normalised over dim 1: normalise over the last axis, dim=-1, so that "
           "any number of leading (batch, position) axes works"): LN_DIM0_3D,
    }, tr("layer_norm of the same numbers shaped (1, 2, 4)"), tr("Normalise over dim=-1 with keepdim=True."))
    big = fn(torch.sin(torch.arange(120.0)).view(2, 3, 5, 4), W, B)
    expect_tensor(big, (2, 3, 5, 4), tr("layer_norm of a (2, 3, 5, 4) input"))
    expect_value_error(fn, X, torch.ones(3), B, what=tr("a weight of shape (3,) for D = 4"))
    passed("layer_norm")


# --- stored numbers: LayerNorm ---
LN_PLAIN_EPS = [[0.0, 0.377964, 1.133893, -1.511858], [0.001237, -0.003005, -0.000177, 0.001945]]
# mistake: eps not passed on to layer_norm
LN_PLAIN = [[0.0, 0.392232, 1.176696, -1.568928], [0.254756, -0.618693, -0.036394, 0.400331]]
# --- end of stored numbers ---


@public_check
def check_LayerNorm(cls) -> None:
    avoid_library_call(cls, ("layer_norm", "LayerNorm", "native_layer_norm"),
                       tr("use your own layer_norm inside LayerNorm: F.layer_norm / nn.LayerNorm score zero here"))
    m = cls(4)
    if not isinstance(m, nn.Module):
        fail(tr("LayerNorm should subclass nn.Module (and call super().__init__())"))
    _float_parameter(m, "weight", (4,))
    _float_parameter(m, "bias", (4,))
    if not close(m.weight.detach(), torch.ones(4), atol=0) or not close(m.bias.detach(), torch.zeros(4), atol=0):
        fail(tr("a fresh LayerNorm should only normalise: initialise weight to ones and bias to zeros"))
    names = sorted(name for name, _ in m.named_parameters())
    if names != ["bias", "weight"]:
        fail(tr("LayerNorm should have exactly two parameters, weight and bias; found {names}", names=names))
    with torch.no_grad():
        m.weight.copy_(W)
        m.bias.copy_(B)
    out = m(X)
    _match(out, LN_OUT, {
        tr("the output ignores weight and bias: return layer_norm(x, self.weight, self.bias, self.eps)"): LN_NO_AFFINE,
    }, tr("LayerNorm(4)(x) with weight and bias set"), tr("Does your layer_norm pass its check?"))
    _match(cls(4, eps=0.5)(X), LN_PLAIN_EPS, {tr("LayerNorm(4, eps=0.5) ignores its eps: keep it (self.eps = eps) "
                                                 "and pass it on to layer_norm"): LN_PLAIN},
           "LayerNorm(4, eps=0.5)(x)", tr("Store eps and pass it to layer_norm."))
    out.sum().backward()
    if m.weight.grad is None or m.bias.grad is None:
        fail(tr("no gradient reached weight or bias: use self.weight and self.bias in forward"))
    passed("LayerNorm")


# ---------------------------------------------------------------- PositionwiseFeedForward

FFN_X = T([[[2.0, -1.0, 1.0], [-3.0, 4.0, -0.5]]])  # (1, 2, 3)
FFN_STATE = {"linear1.weight": T([[1.0, 0, 0], [-1.0, 0, 0], [0, 1.0, 0], [0, 0, -2.0]]),
             "linear1.bias": T([0.0, 0.5, -1.0, 0.0]),
             "linear2.weight": T([[1.0, 1.0, 0, 0], [0, -1.0, 1.0, 0], [0, 0, 0, -1.0]]),
             "linear2.bias": T([0.0, -0.5, 0.25])}
# --- stored numbers: PositionwiseFeedForward ---
FFN_OUT = [[[2.0, -0.5, 0.25], [3.5, -1.0, -0.75]]]
# mistake: no activation between the linear layers
FFN_NO_RELU = [[[0.5, -1.0, 2.25], [0.5, -1.0, -0.75]]]
# mistake: ReLU after linear2 instead of between the layers
FFN_RELU_LAST = [[[0.5, 0.0, 2.25], [0.5, 0.0, 0.0]]]
# mistake: a ReLU after linear2 as well
FFN_RELU_TWICE = [[[2.0, 0.0, 0.25], [3.5, 0.0, 0.0]]]
# --- end of stored numbers ---


@public_check
def check_PositionwiseFeedForward(cls) -> None:
    m = cls(3, 4)
    for name, (n_in, n_out) in (("linear1", (3, 4)), ("linear2", (4, 3))):
        layer = getattr(m, name, None)
        if not isinstance(layer, nn.Linear):
            fail(tr("self.{name} should be an nn.Linear, got {type}", name=name, type=type(layer).__name__))
        if (layer.in_features, layer.out_features) != (n_in, n_out):
            fail(tr("self.{name} maps {got_in} -> {got_out}; expected {n_in} -> {n_out} "
                    "(linear1: d_model -> d_ff, linear2: d_ff -> d_model)", name=name, got_in=layer.in_features,
                    got_out=layer.out_features, n_in=n_in, n_out=n_out))
    if not isinstance(getattr(m, "dropout", None), nn.Dropout):
        fail(tr("self.dropout should be nn.Dropout(dropout)"))
    m.load_state_dict(FFN_STATE)
    diagnose(m(FFN_X), FFN_OUT, {
        tr("there is no activation: put a ReLU between linear1 and linear2 (without it the two layers "
           "collapse into one linear map)"): FFN_NO_RELU,
        tr("the ReLU belongs between the two layers, not after linear2 (the block's output may be negative)"):
            FFN_RELU_LAST,
        tr("the block has a ReLU after linear2 as well; only the hidden units pass through ReLU"): FFN_RELU_TWICE,
    }, tr("PositionwiseFeedForward(3, 4)(x) with hand-set weights"))
    m = cls(4, 64, dropout=0.5)
    fill(m, ["linear1.weight", "linear1.bias", "linear2.weight"])
    with torch.no_grad():
        m.linear2.bias.zero_()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        out = m.train()(sequence(5, 4))
    if (out == 0).float().mean() > 0.2:
        fail(tr("in training mode many outputs are exactly 0: dropout belongs on the hidden units, "
                "linear2(dropout(relu(linear1(x)))), not on the block's output"))
    passed("PositionwiseFeedForward")


# ---------------------------------------------------------------- AddNorm

AN_X = T([[[1.0, 2.0, 3.0, 4.0], [0.0, -2.0, 2.0, 1.0]]])  # (1, 2, 4)
AN_SUB = T([[[0.5, -1.0, 0.0, 2.0], [3.0, 0.0, -1.0, 0.5]]])
# --- stored numbers: AddNorm ---
AN_OUT = [[[-0.705649, -0.381125, 0.13585, 2.907497], [1.170326, -0.691691, 0.131157, 0.388427]]]
# mistake: normalises before adding: norm(x) + sublayer_out
AN_NORM_THEN_ADD = [[[-0.841635, -1.123606, -0.247212, 4.383271], [2.83097, -0.660637, -1.983213, 1.214183]]]
# mistake: drops the residual: norm(sublayer_out)
AN_NO_RESIDUAL = [[[0.11547, -0.535083, 0.546409, 2.702209], [1.611555, -0.112047, 1.302643, -0.469637]]]
# mistake: x + norm(sublayer_out)
AN_X_PLUS_NORM = [[[1.11547, 1.464917, 3.546409, 6.702209], [1.611555, -2.112047, 3.302643, 0.530363]]]
# mistake: no LayerNorm: x + sublayer_out
AN_NO_NORM = [[[1.5, 1.0, 3.0, 6.0], [3.0, -2.0, 1.0, 1.5]]]
# mistake: sublayer_out ignored, norm(x); also what a training-mode AddNorm gives for sublayer_out = 0
AN_NO_SUB = [[[-1.341635, -0.123606, -0.247212, 2.383271], [-0.16903, -0.660637, -0.983213, 0.714183]]]
# --- end of stored numbers ---


@public_check
def check_AddNorm(cls) -> None:
    m = cls(4)
    norm = getattr(m, "norm", None)
    if not isinstance(norm, nn.Module) or sorted(n for n, _ in norm.named_parameters()) != ["bias", "weight"]:
        fail(tr("self.norm should be your LayerNorm(d_model), with parameters weight and bias"))
    if not isinstance(getattr(m, "dropout", None), nn.Dropout):
        fail(tr("self.dropout should be nn.Dropout(dropout)"))
    with torch.no_grad():
        norm.weight.copy_(W)
        norm.bias.copy_(B)
    _match(m(AN_X, AN_SUB), AN_OUT, {
        tr("you normalised x before adding: the sum comes first, norm(x + sublayer_out)"): AN_NORM_THEN_ADD,
        tr("the residual is missing: the output must depend on x, norm(x + sublayer_out)"): AN_NO_RESIDUAL,
        tr("you normalised only sublayer_out and added x after: norm(x + sublayer_out)"): AN_X_PLUS_NORM,
        tr("there is no LayerNorm: return self.norm(x + dropout(sublayer_out))"): AN_NO_NORM,
        tr("sublayer_out is ignored: add it to x before normalising"): AN_NO_SUB,
    }, "AddNorm(4)(x, sublayer_out)", tr("Expected self.norm(x + self.dropout(sublayer_out)); "
          "does your LayerNorm pass its check?"))
    expect_value_error(m, AN_X, AN_SUB[:, :1], what=tr("x (1, 2, 4) with sublayer_out (1, 1, 4)"))
    m.dropout.p = 0.5
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        out = m.train()(AN_X, torch.zeros(1, 2, 4))
    _match(out, AN_NO_SUB, {}, tr("training-mode AddNorm(4, dropout=0.5)(x, zeros)"),
           tr("Dropout acts on sublayer_out only: with sublayer_out = 0 the output is norm(x) whatever dropout does. "
              "Apply self.dropout to sublayer_out, not to the sum."))
    passed("AddNorm")


# ---------------------------------------------------------------- EncoderLayer

# --- stored numbers: EncoderLayer ---
POST_OUT = [[[0.490358, -0.143279, 0.431371, -1.783687],
             [-0.017329, -0.967459, 0.25818, 1.6263],
             [-1.130755, 0.248843, 0.212624, 1.353055]]]
POST_MASKED = [[[0.75201, -0.554214, -0.138233, -0.553302],
                [-0.474926, -0.251162, -0.693172, 2.386822],
                [-1.130755, 0.248843, 0.212624, 1.353055]]]
PRE_OUT = [[[0.421735, -0.319815, -0.122327, -1.847492],
            [-2.556438, -1.618994, -1.558575, 0.419265],
            [0.255694, 1.998855, 1.809103, 2.65336]]]
# mistake: Post-LN applies the FFN to the pre-attention x
POST_FFN_ON_INPUT = [[[0.076776, -0.095883, 1.050581, -1.86461],
                      [0.627182, -0.775993, -0.283424, 0.484161],
                      [-0.040662, 0.671771, -0.208276, -1.555362]]]
# mistake: norm1 and norm2 swapped
POST_SWAPPED = [[[0.418939, -0.03241, 0.344645, -1.095415],
                 [-0.764348, -1.128607, 0.144363, 0.815307],
                 [-1.933811, 0.179046, -0.156645, 0.692223]]]
# mistake: norm1 and norm2 swapped
PRE_SWAPPED = [[[0.950871, -0.384161, -0.23874, -1.062696],
                [-2.921663, -1.968595, -1.75696, 0.167078],
                [-0.182525, 1.583663, 1.645995, 2.458063]]]
# mistake: Pre-LN normalises the residual stream: x = norm(x) + sublayer(norm(x))
PRE_NORMED_STREAM = [[[0.209022, -0.347896, 0.355427, -1.489234],
                      [-1.071826, -0.285651, -0.020347, 2.430834],
                      [-1.042203, 0.28951, 0.413911, 1.703773]]]
# mistake: Pre-LN with a LayerNorm after the residual too (both norms on every sublayer)
PRE_BOTH_NORMS = [[[0.611571, -0.19215, 0.185042, -1.579281],
                   [-0.947252, -0.164982, 0.087051, 2.108486],
                   [-1.130984, 0.147995, 0.30244, 1.46143]]]
# --- end of stored numbers ---

def _layer(cls, norm_first: bool):
    m = cls(4, 2, 8, norm_first=norm_first)
    for name in ("self_attn", "ffn", "norm1", "norm2", "dropout1", "dropout2"):
        if not hasattr(m, name):
            fail(tr("EncoderLayer has no attribute `{name}`; the docstring lists self_attn, ffn, norm1, norm2, "
                    "dropout1 and dropout2", name=name))
    fill(m, LAYER_KEYS)
    return m


@public_check
def check_EncoderLayer(cls) -> None:
    avoid_library_call(cls, ("TransformerEncoderLayer", "TransformerEncoder", "MultiheadAttention",
                             "multi_head_attention_forward"),
                       tr("build the layer from MultiHeadAttention, your feed-forward block and your LayerNorms; "
                          "nn.TransformerEncoderLayer / nn.MultiheadAttention score zero here"))
    otherwise = tr("Do LayerNorm and PositionwiseFeedForward pass their checks?")
    x = sequence()
    post = _layer(cls, norm_first=False)
    out = post(x)
    expect_tensor(out, (1, 3, 4), tr("EncoderLayer(4, 2, 8)(x) for x (1, 3, 4)"))
    _match(out, POST_OUT, {
        tr("Post-LN: the feed-forward block must read the output of the attention sub-layer (after norm1), "
           "not the layer's input x"): POST_FFN_ON_INPUT,
        tr("norm1 and norm2 are swapped: norm1 follows the attention sub-layer, norm2 the feed-forward block"):
            POST_SWAPPED,
        tr("with norm_first=False you computed Pre-LN: Post-LN is x = norm1(x + attn(x)), then "
           "x = norm2(x + ffn(x))"): PRE_OUT,
    }, tr("the Post-LN output (norm_first=False)"), otherwise)
    masked = post(x, CAUSAL)
    if close(masked, POST_OUT):
        fail(tr("the mask made no difference: pass it to self_attn(x, x, x, mask)"))
    _match(masked, POST_MASKED, {}, tr("the Post-LN output with a causal mask"), otherwise)

    pre = _layer(cls, norm_first=True)
    _match(pre(x), PRE_OUT, {
        tr("Pre-LN must leave the residual stream unnormalised: x = x + attn(norm1(x)), not "
           "x = norm1(x) + attn(norm1(x))"): PRE_NORMED_STREAM,
        tr("norm1 and norm2 are swapped: norm1 goes in front of attention, norm2 in front of the feed-forward block"):
            PRE_SWAPPED,
        tr("with norm_first=True you computed Post-LN: Pre-LN is x = x + attn(norm1(x)), then "
           "x = x + ffn(norm2(x))"): POST_OUT,
        tr("Pre-LN has no LayerNorm after the residual sums: x = x + attn(norm1(x)), then x = x + ffn(norm2(x))"):
            PRE_BOTH_NORMS,
    }, tr("the Pre-LN output (norm_first=True)"), otherwise)
    expect_dropouts(cls(4, 2, 8, dropout=0.3), 0.3, ("self_attn.dropout", "ffn.dropout", "dropout1", "dropout2"))
    x = sequence()
    for norm_first in (False, True):
        layer = cls(4, 2, 8, dropout=1.0, norm_first=norm_first).train()
        with torch.no_grad():
            out = layer(x)
        want = x if norm_first else F.layer_norm(F.layer_norm(x, (4,)), (4,))
        if not close(out, want, atol=1e-4):
            if norm_first:
                fail(tr("with dropout=1.0 in training mode every sublayer output is dropped, so a Pre-LN layer should "
                        "return x itself: apply dropout1 to the attention output and dropout2 to the feed-forward "
                        "output (not to the residual sum), and call the modules in forward"))
            fail(tr("with dropout=1.0 in training mode every sublayer output is dropped, so a Post-LN layer should "
                    "return norm2(norm1(x)): apply dropout1 to the attention output and dropout2 to the feed-forward "
                    "output (not to the residual sum), and call the modules in forward"))
    passed("EncoderLayer")


# ---------------------------------------------------------------- Encoder

# --- stored numbers: Encoder ---
ENC_POST_OUT = [[[0.295476, -0.246497, 0.471397, -1.014798],
                 [0.367291, -1.284873, -0.204445, 0.809147],
                 [-1.799572, -0.183263, -0.0678, 0.86195]]]
ENC_PRE_OUT = [[[0.102846, -0.040678, 0.989836, -1.943704],
                [-0.776899, -0.206888, -0.232874, 2.349097],
                [-0.906782, 0.031652, -0.250977, 2.112963]]]
ENC_PRE_MASKED = [[[0.724449, -0.138349, -0.582663, -0.855963],
                   [-0.666014, -0.256741, -0.37903, 2.421879],
                   [-0.833303, -0.063463, -0.306999, 2.249309]]]
# mistake: self.norm built but not applied (the catalogue's variant has none, which the parameter count catches)
ENC_PRE_NO_NORM = [[[0.278433, -0.413528, 1.000435, -2.995352],
                    [-2.258258, -0.92903, -1.153719, 2.065408],
                    [0.734767, 2.870008, 2.02114, 4.652661]]]
# mistake: every layer gets the encoder input instead of the previous layer's output
ENC_POST_SAME_INPUT = [[[1.67913, -0.251004, -0.258863, -0.845719],
                        [1.374435, -1.229186, 0.065653, -0.187765],
                        [-1.817934, 0.688362, 0.035578, -0.077135]]]
# mistake: every layer gets the encoder input instead of the previous layer's output
ENC_PRE_SAME_INPUT = [[[0.204805, 0.156981, 0.586027, -2.060682],
                       [-0.576565, -0.44904, -0.226399, 2.444089],
                       [-0.671571, -0.236738, -0.397689, 2.414802]]]
# --- end of stored numbers ---

def _encoder_keys(num_layers: int, norm_first: bool) -> list[str]:
    keys = [f"layers.{i}.{k}" for i in range(num_layers) for k in LAYER_KEYS]
    return keys + (["norm.weight", "norm.bias"] if norm_first else [])


@public_check
def check_Encoder(cls) -> None:
    avoid_library_call(cls, ("TransformerEncoderLayer", "TransformerEncoder"),
                       tr("stack your own EncoderLayers: nn.TransformerEncoder scores zero here"))
    post, pre = cls(2, 4, 2, 8), cls(2, 4, 2, 8, norm_first=True)
    layers = getattr(post, "layers", None)
    if not isinstance(layers, nn.ModuleList) or len(layers) != 2:
        fail(tr("self.layers should be an nn.ModuleList holding num_layers EncoderLayers"))
    if layers[0] is layers[1]:
        fail(tr("the layers are one and the same object, so they share their weights: build a new "
                "EncoderLayer for every position, e.g. nn.ModuleList(EncoderLayer(...) for _ in range(num_layers))"))
    per_layer = sum(p.numel() for p in layers[0].parameters())
    if sum(p.numel() for p in post.parameters()) != 2 * per_layer:
        fail(tr("a Post-LN encoder has no parameters besides its layers: set self.norm = nn.Identity() "
                "when norm_first is False (PyTorch's nn.TransformerEncoder has norm=None there)"))
    if sum(p.numel() for p in pre.parameters()) != 2 * per_layer + 8:
        fail(tr("a Pre-LN encoder needs a final LayerNorm(d_model) as self.norm: its residual stream is never "
                "normalised otherwise"))
    fill(post, _encoder_keys(2, False))
    fill(pre, _encoder_keys(2, True))
    x = sequence()
    _match(post(x), ENC_POST_OUT, {
        tr("every layer received the encoder input: feed each layer the previous layer's output"): ENC_POST_SAME_INPUT,
    }, tr("the Post-LN encoder output"), tr("Does EncoderLayer pass its check?"))
    _match(pre(x), ENC_PRE_OUT, {
        tr("the final LayerNorm is missing: return self.norm(x) after the last layer"): ENC_PRE_NO_NORM,
        tr("every layer received the encoder input: feed each layer the previous layer's output"): ENC_PRE_SAME_INPUT,
    }, tr("the Pre-LN encoder output"), tr("Does EncoderLayer pass its check?"))
    masked = pre(x, CAUSAL)
    if close(masked, ENC_PRE_OUT):
        fail(tr("the mask made no difference: pass it to every layer, layer(x, mask)"))
    _match(masked, ENC_PRE_MASKED, {}, tr("the Pre-LN encoder output with a causal mask"),
           tr("Pass the mask to every layer."))
    expect_value_error(cls, 0, 4, 2, 8, what="num_layers = 0")
    passed("Encoder")

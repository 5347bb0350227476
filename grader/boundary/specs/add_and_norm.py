"""Hidden tests for chapter 05: layer_norm, LayerNorm, PositionwiseFeedForward, AddNorm,
EncoderLayer and Encoder.

Oracles are PyTorch's own routines: F.layer_norm, and nn.TransformerEncoderLayer /
nn.TransformerEncoder (batch_first=True, dropout=0) holding the same, randomised weights.
PyTorch's attention masks mean the opposite of ours (True = blocked), so every mask is
inverted before it is handed over. Correct versions of the pieces an exercise builds on stand
in for the learner's, so a mistake costs points once: this chapter's are written here, chapter
04's MultiHeadAttention is the reference the notebook imports too.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.boundary.spec import (
    CORE,
    ENCODER,
    LAYER_NORM,
    MULTI_HEAD_FUNCTION,
    MULTI_HEAD_MODULE,
    Exercise,
    assert_raises_value_error,
    assert_tensor,
    blocked,
    changed_in_place,  # in-place changes are judged by the in-place rule only
    fix_dropout,
    manual_seed,
    randn,
    seeded,
)
from solutions.multi_head_attention import MultiHeadAttention

# ---------------------------------------------------------------- correct pieces, written here

def layer_norm_stand_in(x, weight, bias, eps=1e-5):
    D = x.shape[-1]
    if tuple(weight.shape) != (D,) or tuple(bias.shape) != (D,):
        raise ValueError(f"weight and bias must have shape ({D},)")
    return F.layer_norm(x, (D,), weight, bias, eps)


class LayerNormStandIn(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return layer_norm_stand_in(x, self.weight, self.bias, self.eps)


class FeedForwardStandIn(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class EncoderLayerStandIn(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForwardStandIn(d_model, d_ff, dropout)
        self.norm1, self.norm2 = LayerNormStandIn(d_model), LayerNormStandIn(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])
            return x + self.dropout2(self.ffn(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))
        return self.norm2(x + self.dropout2(self.ffn(x)))


# ---------------------------------------------------------------- helpers

def assert_float32(actual, shape: tuple, what: str) -> None:
    """Exact type, float32 and shape, before any values are compared."""
    assert_tensor(actual, torch.zeros(shape), atol=math.inf, what=what)


def load(module: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load the documented parameters by name; say which one is missing or misshapen."""
    own = module.state_dict()
    for key, value in state.items():
        if key not in own:
            raise AssertionError(f"the module's state_dict has no `{key}`; its keys are {sorted(own)}")
        if tuple(own[key].shape) != tuple(value.shape):
            raise AssertionError(f"`{key}` has shape {tuple(own[key].shape)}, expected {tuple(value.shape)}")
    module.load_state_dict(state, strict=False)


def small_variance(*shape: int, seed: int) -> torch.Tensor:
    """Rows with standard deviation about 1e-3 (variance 1e-6 < eps = 1e-5): where eps sits matters here.
    Centred near 0, so computing the variance as E[x^2] - E[x]^2 in float32 is still accurate enough."""
    return 1e-3 * randn(*shape, seed=seed)


def torch_layer(d, h, d_ff, norm_first, seed, dropout=0.0) -> nn.TransformerEncoderLayer:
    """PyTorch's encoder layer with every parameter randomised (norm weights too, so norm1/norm2 differ)."""
    layer = nn.TransformerEncoderLayer(d, h, d_ff, dropout=dropout, batch_first=True, norm_first=norm_first)
    randomise(layer, seed)
    return layer


def randomise(module: nn.Module, seed: int) -> None:
    g = seeded(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.5 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))


def our_names(layer: nn.TransformerEncoderLayer, prefix: str = "") -> dict[str, torch.Tensor]:
    """The same weights under this course's names (in_proj is W_q, W_k, W_v stacked)."""
    attn = layer.self_attn
    W = attn.in_proj_weight.detach().chunk(3)
    b = attn.in_proj_bias.detach().chunk(3)
    state = {}
    for i, name in enumerate(("W_q", "W_k", "W_v")):
        state[f"self_attn.{name}.weight"], state[f"self_attn.{name}.bias"] = W[i], b[i]
    state["self_attn.W_o.weight"] = attn.out_proj.weight.detach()
    state["self_attn.W_o.bias"] = attn.out_proj.bias.detach()
    for ours, theirs in (("ffn.linear1", layer.linear1), ("ffn.linear2", layer.linear2),
                         ("norm1", layer.norm1), ("norm2", layer.norm2)):
        state[f"{ours}.weight"], state[f"{ours}.bias"] = theirs.weight.detach(), theirs.bias.detach()
    return {prefix + key: value.clone() for key, value in state.items()}


def torch_encoder(N, d, h, d_ff, norm_first, seed) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, batch_first=True, norm_first=norm_first)
    encoder = nn.TransformerEncoder(layer, N, norm=nn.LayerNorm(d) if norm_first else None,
                                    enable_nested_tensor=False)
    for i, each in enumerate(encoder.layers):  # nn.TransformerEncoder copies one layer N times: undo that
        randomise(each, seed + i)
    if norm_first:
        randomise(encoder.norm, seed + 100)
    return encoder


def encoder_names(encoder: nn.TransformerEncoder) -> dict[str, torch.Tensor]:
    state = {}
    for i, layer in enumerate(encoder.layers):
        state.update(our_names(layer, prefix=f"layers.{i}."))
    if encoder.norm is not None:
        state["norm.weight"] = encoder.norm.weight.detach().clone()
        state["norm.bias"] = encoder.norm.bias.detach().clone()
    return state


def compare_layer(cls, d, h, d_ff, norm_first, seed, x, mask=None, padding=None, what="output"):
    """Build the learner's layer with the oracle's weights and compare one forward pass."""
    oracle = torch_layer(d, h, d_ff, norm_first, seed)
    layer = cls(d, h, d_ff, norm_first=norm_first)
    load(layer, our_names(oracle))
    if padding is not None:  # ours (B, 1, 1, S) True = keep; theirs (B, S) True = padding
        out = layer(x, padding)
        want = oracle(x, src_mask=blocked(~padding.view(x.shape[0], -1), h, x.shape[1]))
    else:
        out = layer(x) if mask is None else layer(x, mask)
        want = oracle(x) if mask is None else oracle(x, src_mask=~mask)
    assert_tensor(out, want.detach(), atol=1e-5, what=what)
    return layer


def some_mask(T: int, seed: int) -> torch.Tensor:
    """A random (T, T) bool mask, True = may attend, with the diagonal always allowed."""
    return (torch.rand(T, T, generator=seeded(seed)) > 0.4) | torch.eye(T, dtype=torch.bool)


def count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# ---------------------------------------------------------------- layer_norm
layer_norm = Exercise("layer_norm", points=3, forbidden=LAYER_NORM)


@layer_norm.check("matches F.layer_norm on a (2, 3, 8) input with random weight and bias", weight=CORE)
def _(fn):
    x, w, b = 2 + 3 * randn(2, 3, 8, seed=501), randn(8, seed=502), randn(8, seed=503)
    assert_tensor(fn(x, w, b), F.layer_norm(x, (8,), w, b, 1e-5), atol=1e-5,
                  what="layer_norm(x, weight, bias) for x (2, 3, 8)")


@layer_norm.check("small D = 4: the biased variance (divide by D, not D - 1)",
                  states=("biased (divide by D) variance",), weight=CORE)
def _(fn):
    x, w, b = randn(2, 5, 4, seed=504), 1 + randn(4, seed=505), randn(4, seed=506)
    assert_tensor(fn(x, w, b), F.layer_norm(x, (4,), w, b, 1e-5), atol=1e-5,
                  what="layer_norm for D = 4")


@layer_norm.check("small-variance input (std 1e-3): eps is added to the variance inside the square root",
                  states=("sqrt(var + eps)",), weight=CORE)
def _(fn):
    x, w, b = small_variance(2, 3, 6, seed=507), torch.ones(6), torch.zeros(6)
    assert_tensor(fn(x, w, b), F.layer_norm(x, (6,), w, b, 1e-5), atol=1e-4,
                  what="layer_norm of rows with std 1e-3")


@layer_norm.check("the eps argument is used (eps = 0.5 and eps = 1e-3)", weight=CORE)
def _(fn):
    x, w, b = randn(2, 4, 6, seed=508), randn(6, seed=509), randn(6, seed=510)
    for eps in (0.5, 1e-3):
        assert_tensor(fn(x, w, b, eps=eps), F.layer_norm(x, (6,), w, b, eps), atol=1e-5,
                      what=f"layer_norm(..., eps={eps})")


@layer_norm.check("normalises over the last axis only: 1-D (D,) and 4-D (2, 3, 4, 5) inputs",
                  states=("over the last axis", "x: (..., D)"), weight=CORE)
def _(fn):
    v, w, b = randn(7, seed=511), randn(7, seed=512), randn(7, seed=513)
    assert_tensor(fn(v, w, b), F.layer_norm(v, (7,), w, b, 1e-5), atol=1e-5, what="layer_norm of a (7,) vector")
    x, w, b = randn(2, 3, 4, 5, seed=514), randn(5, seed=515), randn(5, seed=516)
    assert_tensor(fn(x, w, b), F.layer_norm(x, (5,), w, b, 1e-5), atol=1e-5, what="layer_norm of (2, 3, 4, 5)")


@layer_norm.check("float64 stays float64; gradients for x, weight and bias match F.layer_norm's",
                  states=("float64 stays float64",))
def _(fn):
    args = [randn(3, 5, seed=517).double(), randn(5, seed=518).double(), randn(5, seed=519).double()]
    ours = [a.clone().requires_grad_() for a in args]
    theirs = [a.clone().requires_grad_() for a in args]
    out = fn(*ours)
    want = F.layer_norm(theirs[0], (5,), theirs[1], theirs[2], 1e-5)
    assert_tensor(out, want.detach(), atol=1e-10, what="float64 output")
    upstream = randn(3, 5, seed=520).double()
    (out * upstream).sum().backward()
    (want * upstream).sum().backward()
    for name, a, t in zip(("x", "weight", "bias"), ours, theirs):
        if a.grad is None:
            raise AssertionError(f"no gradient reached {name}: keep the computation in torch (no .detach())")
        assert_tensor(a.grad, t.grad, atol=1e-8, what=f"the gradient of {name}")


@layer_norm.side_check("weight or bias of the wrong shape raises ValueError; x is not modified in place",
                       states=("Do not modify x in place", "not of shape (D,)"))
def _(fn):
    x = randn(2, 6, seed=521)
    before = x.clone()
    fn(x, torch.ones(6), torch.zeros(6))
    if changed_in_place(x, before):
        raise AssertionError("layer_norm changed its input x in place; compute on new tensors")
    assert_raises_value_error(fn, x, torch.ones(5), torch.zeros(6))
    assert_raises_value_error(fn, x, torch.ones(6), torch.zeros(2, 3))


# ---------------------------------------------------------------- LayerNorm
LayerNorm = Exercise("LayerNorm", points=2, forbidden=LAYER_NORM,
                     stand_ins={"layer_norm": layer_norm_stand_in})


@LayerNorm.check("weight (ones) and bias (zeros) are nn.Parameters of shape (D,), and the only parameters",
                 states=("weight: nn.Parameter (D,), initialised to ones", "bias: nn.Parameter (D,), zeros"))
def _(cls):
    m = cls(6)
    params = dict(m.named_parameters())
    if sorted(params) != ["bias", "weight"]:
        raise AssertionError("the parameters should be exactly `weight` and `bias` (nn.Parameter); "
                             f"found {sorted(params)}")
    assert_tensor(params["weight"].detach(), torch.ones(6), atol=0.0, rtol=0.0, what="the initial weight")
    assert_tensor(params["bias"].detach(), torch.zeros(6), atol=0.0, rtol=0.0, what="the initial bias")


@LayerNorm.check("forward matches F.layer_norm after loading a random weight and bias (B, T, D)")
def _(cls):
    m = cls(8)
    w, b = randn(8, seed=531), randn(8, seed=532)
    load(m, {"weight": w, "bias": b})
    x = 1 + 2 * randn(2, 5, 8, seed=533)
    assert_tensor(m(x), F.layer_norm(x, (8,), w, b, 1e-5), atol=1e-5, what="LayerNorm(8)(x) for x (2, 5, 8)")


@LayerNorm.check("the eps given to the constructor is used (LayerNorm(6, eps=0.5))")
def _(cls):
    m = cls(6, eps=0.5)
    x = randn(3, 6, seed=534)
    assert_tensor(m(x), F.layer_norm(x, (6,), eps=0.5), atol=1e-5, what="LayerNorm(6, eps=0.5)(x)")


@LayerNorm.check("the default eps is 1e-5 (rows with std 1e-3 show it)")
def _(cls):
    m = cls(5)
    x = small_variance(4, 5, seed=535)
    assert_tensor(m(x), F.layer_norm(x, (5,), eps=1e-5), atol=1e-4, what="LayerNorm(5)(x), small variance")


@LayerNorm.check("a single vector (D,) works, and gradients reach weight and bias")
def _(cls):
    m = cls(4)
    x = randn(4, seed=536)
    out = m(x)
    assert_tensor(out, F.layer_norm(x, (4,)), atol=1e-5, what="LayerNorm(4) of a (4,) vector")
    (out * torch.arange(1.0, 5.0)).sum().backward()
    for name in ("weight", "bias"):
        if getattr(m, name).grad is None:
            raise AssertionError(f"no gradient reached {name}: it should be an nn.Parameter used in forward")


@LayerNorm.check("module.double() converts weight and bias (they are registered parameters)",
                 states=("module.double()",))
def _(cls):
    m = cls(3).double()
    if m.weight.dtype != torch.float64 or m.bias.dtype != torch.float64:
        raise AssertionError("after .double() weight/bias are still float32: make them nn.Parameters")
    x = randn(2, 3, seed=537).double()
    assert_tensor(m(x), F.layer_norm(x, (3,)), atol=1e-10, what="float64 output")


# ---------------------------------------------------------------- PositionwiseFeedForward
PositionwiseFeedForward = Exercise("PositionwiseFeedForward", points=1)


def ffn_weights(d, d_ff, seed):
    return {"linear1.weight": randn(d_ff, d, seed=seed), "linear1.bias": randn(d_ff, seed=seed + 1),
            "linear2.weight": randn(d, d_ff, seed=seed + 2) / math.sqrt(d_ff),
            "linear2.bias": randn(d, seed=seed + 3)}


def ffn_oracle(x, s):
    return F.linear(F.relu(F.linear(x, s["linear1.weight"], s["linear1.bias"])), s["linear2.weight"], s["linear2.bias"])


@PositionwiseFeedForward.check("linear1 is nn.Linear(D, d_ff) and linear2 is nn.Linear(d_ff, D), both with a bias",
                               states=("linear1: nn.Linear(D, d_ff)", "linear2: nn.Linear(d_ff, D)"))
def _(cls):
    m = cls(6, 10)
    for name, (n_in, n_out) in (("linear1", (6, 10)), ("linear2", (10, 6))):
        layer = getattr(m, name, None)
        if not isinstance(layer, nn.Linear):
            raise AssertionError(f"{name} should be an nn.Linear, got {type(layer).__name__}")
        if (layer.in_features, layer.out_features) != (n_in, n_out) or layer.bias is None:
            raise AssertionError(f"{name} should be nn.Linear({n_in}, {n_out}) with a bias; got "
                                 f"{layer.in_features} -> {layer.out_features}, bias={layer.bias is not None}")


@PositionwiseFeedForward.check("forward is linear2(relu(linear1(x))) with set weights, x (B, T, D)")
def _(cls):
    m = cls(4, 12)
    s = ffn_weights(4, 12, seed=541)
    load(m, s)
    x = randn(2, 5, 4, seed=545)
    assert_tensor(m(x), ffn_oracle(x, s), atol=1e-5, what="PositionwiseFeedForward(4, 12)(x)")


@PositionwiseFeedForward.check("outputs can be negative and hidden units below zero are cut (ReLU between the layers)")
def _(cls):
    m = cls(3, 4)
    s = {"linear1.weight": torch.tensor([[1.0, 0, 0], [-1.0, 0, 0], [0, 1.0, 0], [0, 0, -2.0]]),
         "linear1.bias": torch.tensor([0.0, 0.5, -1.0, 0.0]),
         "linear2.weight": torch.tensor([[1.0, 1.0, 0, 0], [0, -1.0, 1.0, 0], [0, 0, 0, -1.0]]),
         "linear2.bias": torch.tensor([0.0, -0.5, 0.25])}
    load(m, s)
    x = torch.tensor([[[2.0, -1.0, 1.0], [-3.0, 4.0, -0.5]]])
    assert_tensor(m(x), ffn_oracle(x, s), atol=1e-6, what="output for hand-set weights")


@PositionwiseFeedForward.check("position-wise: a token's output does not depend on the other tokens",
                               states=("every position on its own",))
def _(cls):
    m = cls(5, 7)
    load(m, ffn_weights(5, 7, seed=546))
    x = randn(1, 6, 5, seed=550)
    y = x.clone()
    y[:, 1:] = randn(1, 5, 5, seed=551)
    assert_tensor(m(y)[:, 0], m(x)[:, 0].detach(), atol=1e-6, what="the first token's output when the others change")


@PositionwiseFeedForward.check("dropout: nn.Dropout named `dropout`, off in eval mode, "
                               "on the hidden units (not the output) in training mode",
                               states=("on the hidden units",))
def _(cls):
    m = cls(4, 64, dropout=0.5)
    if not isinstance(getattr(m, "dropout", None), nn.Dropout) or m.dropout.p != 0.5:
        raise AssertionError("self.dropout should be nn.Dropout(dropout)")
    s = ffn_weights(4, 64, seed=552)
    s["linear2.bias"] = torch.zeros(4)
    load(m, s)
    x = randn(3, 5, 4, seed=556)
    assert_tensor(m.eval()(x), ffn_oracle(x, s), atol=1e-5, what="eval-mode output with dropout=0.5")
    with torch.random.fork_rng(devices=[]):
        manual_seed(0)
        out = m.train()(x)
    zeros = (out == 0).float().mean().item()
    if zeros > 0.2:
        raise AssertionError(f"in training mode {zeros:.0%} of the outputs are exactly 0: dropout belongs "
                             "on the hidden units, between the ReLU and linear2, not on the output")
    if torch.allclose(out, ffn_oracle(x, s), atol=1e-6):
        raise AssertionError("in training mode dropout=0.5 changed nothing: apply self.dropout to the hidden units")


# ---------------------------------------------------------------- AddNorm
AddNorm = Exercise("AddNorm", points=2, stand_ins={"LayerNorm": LayerNormStandIn})


@AddNorm.check("norm has parameters norm.weight and norm.bias of shape (D,) and dropout is an nn.Dropout",
               states=("norm: your LayerNorm(D)", "dropout: nn.Dropout"))
def _(cls):
    m = cls(6, dropout=0.2)
    params = {k: tuple(v.shape) for k, v in m.named_parameters()}
    if params != {"norm.weight": (6,), "norm.bias": (6,)}:
        raise AssertionError(f"expected the parameters norm.weight (6,) and norm.bias (6,) (self.norm = "
                             f"LayerNorm(d_model)); found {params}")
    if not isinstance(getattr(m, "dropout", None), nn.Dropout) or m.dropout.p != 0.2:
        raise AssertionError("self.dropout should be nn.Dropout(dropout)")


@AddNorm.check("forward(x, sublayer_out) == layer_norm(x + sublayer_out) with a random norm weight and bias")
def _(cls):
    m = cls(8)
    w, b = randn(8, seed=561), randn(8, seed=562)
    load(m, {"norm.weight": w, "norm.bias": b})
    x, sub = 3 * randn(2, 5, 8, seed=563), randn(2, 5, 8, seed=564)
    assert_tensor(m(x, sub), F.layer_norm(x + sub, (8,), w, b), atol=1e-5, what="AddNorm(8)(x, sublayer_out)")


@AddNorm.check("the residual is kept: the output depends on x (not only on sublayer_out)")
def _(cls):
    m = cls(4)
    sub = randn(1, 3, 4, seed=565)
    x = torch.tensor([[[4.0, 0, 0, 0], [0, 0, 0, -4.0], [1.0, 2.0, 3.0, 4.0]]])
    assert_tensor(m(x, sub), F.layer_norm(x + sub, (4,)), atol=1e-5, what="AddNorm(4)(x, sublayer_out)")


@AddNorm.check("each position is normalised: mean 0 and variance 1 over D with the initial norm")
def _(cls):
    m = cls(16)
    out = m(5 + 2 * randn(3, 4, 16, seed=566), randn(3, 4, 16, seed=567))
    assert_float32(out, (3, 4, 16), what="AddNorm output")
    assert_tensor(out.mean(-1), torch.zeros(3, 4), atol=1e-5, what="the mean over D")
    assert_tensor(out.var(-1, unbiased=False), torch.ones(3, 4), atol=1e-3, what="the variance over D")


@AddNorm.check("dropout acts on sublayer_out only: with sublayer_out = 0 training mode gives norm(x); "
               "eval mode turns it off", states=("on sublayer_out only",))
def _(cls):
    m = cls(8, dropout=0.5)
    x, sub = randn(4, 6, 8, seed=568), randn(4, 6, 8, seed=569)
    with torch.random.fork_rng(devices=[]):
        manual_seed(0)
        out = m.train()(x, torch.zeros_like(x))
    assert_tensor(out, F.layer_norm(x, (8,)), atol=1e-5, what="training-mode output for sublayer_out = 0")
    assert_tensor(m.eval()(x, sub), F.layer_norm(x + sub, (8,)), atol=1e-5, what="eval-mode output")
    with torch.random.fork_rng(devices=[]):
        manual_seed(0)
        out = m.train()(x, sub)
    if torch.allclose(out, F.layer_norm(x + sub, (8,)), atol=1e-6):
        raise AssertionError("in training mode dropout=0.5 changed nothing: apply self.dropout to sublayer_out")


@AddNorm.check("unbatched (T, D) input works; x and sublayer_out of different shapes raise ValueError",
               states=("(T, D) inputs work too", "differ in shape"))
def _(cls):
    m = cls(5)
    x, sub = randn(3, 5, seed=570), randn(3, 5, seed=571)
    assert_tensor(m(x, sub), F.layer_norm(x + sub, (5,)), atol=1e-5, what="AddNorm(5) on (T, D) input")
    assert_raises_value_error(m, randn(2, 3, 5, seed=572), randn(2, 4, 5, seed=573))


# ---------------------------------------------------------------- EncoderLayer
LAYER_STAND_INS = {"LayerNorm": LayerNormStandIn, "PositionwiseFeedForward": FeedForwardStandIn,
                   "MultiHeadAttention": MultiHeadAttention}
EncoderLayer = Exercise("EncoderLayer", points=4, forbidden=ENCODER + MULTI_HEAD_MODULE + MULTI_HEAD_FUNCTION,
                        stand_ins=LAYER_STAND_INS)


@EncoderLayer.check("submodules self_attn (W_q, W_k, W_v, W_o), ffn (linear1, linear2), norm1, norm2 "
                    "with the documented shapes",
                    states=("self_attn: MultiHeadAttention", "norm1, norm2: LayerNorm(D)"))
def _(cls):
    m = cls(8, 2, 20)
    want = {k: tuple(v.shape) for k, v in our_names(torch_layer(8, 2, 20, False, seed=580)).items()}
    have = {k: tuple(v.shape) for k, v in m.named_parameters()}
    missing = sorted(set(want) - set(have))
    if missing:
        raise AssertionError(f"missing parameters {missing}; found {sorted(have)}")
    wrong = {k: have[k] for k in want if have[k] != want[k]}
    if wrong:
        raise AssertionError(f"parameters of the wrong shape: {wrong}; expected {({k: want[k] for k in wrong})}")
    if count(m) != sum(math.prod(s) for s in want.values()):
        raise AssertionError(f"{count(m)} parameters, expected {sum(math.prod(s) for s in want.values())}: "
                             f"extra parameters {sorted(set(have) - set(want))}")


# A layer is used with a mask: the value checks run with one as well as without, so a layer that drops
# the mask keeps about a quarter of the points (it kept 3.1 of 4, issue 39).
@EncoderLayer.check("Post-LN (norm_first=False) matches nn.TransformerEncoderLayer with the same weights, "
                    "without a mask and with a (T, T) one", weight=CORE)
def _(cls):
    x = randn(2, 5, 8, seed=582)
    compare_layer(cls, 8, 2, 16, False, seed=581, x=x, what="Post-LN output")
    compare_layer(cls, 8, 2, 16, False, seed=581, x=x, mask=some_mask(5, seed=599),
                  what="Post-LN output with a (T, T) mask")


@EncoderLayer.check("Pre-LN (norm_first=True) matches nn.TransformerEncoderLayer(norm_first=True), "
                    "without a mask and with a (T, T) one", weight=CORE)
def _(cls):
    x = randn(2, 5, 8, seed=584)
    compare_layer(cls, 8, 2, 16, True, seed=583, x=x, what="Pre-LN output")
    compare_layer(cls, 8, 2, 16, True, seed=583, x=x, mask=some_mask(5, seed=600),
                  what="Pre-LN output with a (T, T) mask")


@EncoderLayer.check("a (T, T) bool mask (True = may attend) reaches self-attention, in both settings", weight=CORE)
def _(cls):
    x, mask = randn(2, 6, 8, seed=585), some_mask(6, seed=586)
    for norm_first in (False, True):
        compare_layer(cls, 8, 4, 12, norm_first, seed=587, x=x, mask=mask,
                      what=f"output with a (T, T) mask, norm_first={norm_first}")


@EncoderLayer.check("a (B, 1, 1, T) padding mask (True = a real token) reaches self-attention", weight=CORE)
def _(cls):
    x = randn(2, 5, 8, seed=588)
    keep = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 1, 5)
    for norm_first in (False, True):
        compare_layer(cls, 8, 2, 16, norm_first, seed=589, x=x, padding=keep,
                      what=f"output with a padding mask, norm_first={norm_first}")


@EncoderLayer.check("another size (D=12, H=3, d_ff=7, B=1, T=9) with a (T, T) mask, both settings; x is not "
                    "modified in place", states=("Do not modify x in place",))
def _(cls):
    x = randn(1, 9, 12, seed=590)
    before = x.clone()
    for norm_first in (False, True):
        compare_layer(cls, 12, 3, 7, norm_first, seed=591, x=x, mask=some_mask(9, seed=579),
                      what=f"output with a (T, T) mask, norm_first={norm_first}")
    if changed_in_place(x, before):
        raise AssertionError("the layer changed its input x in place; use x = x + ..., not x += ...")


@EncoderLayer.check("dropout1 and dropout2 are nn.Dropout(dropout); in eval mode dropout is off",
                    states=("dropout1, dropout2: nn.Dropout",))
def _(cls):
    m = cls(8, 2, 16, dropout=0.3, norm_first=True)
    for name in ("dropout1", "dropout2"):
        d = getattr(m, name, None)
        if not isinstance(d, nn.Dropout) or d.p != 0.3:
            raise AssertionError(f"self.{name} should be nn.Dropout(dropout)")
    oracle = torch_layer(8, 2, 16, True, seed=592, dropout=0.3).eval()
    load(m, our_names(oracle))
    x = randn(2, 4, 8, seed=593)
    with torch.no_grad():
        want = oracle(x)
    assert_tensor(m.eval()(x), want, atol=1e-5, what="eval-mode output with dropout=0.3")


@EncoderLayer.check("training mode, dropout=0.25: self_attn and ffn get the dropout, dropout1 and dropout2 act "
                    "on the sublayer outputs (every nn.Dropout swapped for a fixed mask), both settings",
                    states=("MultiHeadAttention(D, H, dropout)", "PositionwiseFeedForward(D, d_ff, dropout)",
                            "nn.Dropout modules", "sublayers' outputs", "training mode", "fixed mask"))
def _(cls):
    x = randn(2, 5, 8, seed=597)
    for norm_first in (False, True):
        m = cls(8, 2, 16, dropout=0.25, norm_first=norm_first)
        p = {name: round(d.p, 6) for name, d in m.named_modules() if isinstance(d, nn.Dropout)}
        for name in ("dropout1", "dropout2", "self_attn.dropout", "ffn.dropout"):
            if p.get(name) != 0.25:
                raise AssertionError(f"`{name}` should be an nn.Dropout with p = dropout = 0.25; "
                                     f"the layer's dropouts are {p}")
        state = our_names(torch_layer(8, 2, 16, norm_first, seed=598))
        load(m, state)
        oracle = EncoderLayerStandIn(8, 2, 16, dropout=0.25, norm_first=norm_first)
        oracle.load_state_dict(state)
        fix_dropout(m).train()
        fix_dropout(oracle).train()
        with torch.no_grad():
            want = oracle(x)
        assert_tensor(m(x), want, atol=1e-5, what=f"training-mode output, norm_first={norm_first}")


@EncoderLayer.check("gradients reach every parameter and x")
def _(cls):
    for norm_first in (False, True):
        m = cls(8, 2, 16, norm_first=norm_first)
        load(m, our_names(torch_layer(8, 2, 16, norm_first, seed=594)))
        x = randn(2, 4, 8, seed=595).requires_grad_()
        (m(x) * randn(2, 4, 8, seed=596)).sum().backward()
        none = [name for name, p in m.named_parameters() if p.grad is None]
        if none or x.grad is None:
            raise AssertionError(f"no gradient reached {none or 'x'} (norm_first={norm_first})")


# ---------------------------------------------------------------- Encoder
Encoder = Exercise("Encoder", points=3, forbidden=ENCODER + MULTI_HEAD_MODULE + MULTI_HEAD_FUNCTION,
                   stand_ins={"EncoderLayer": EncoderLayerStandIn, "LayerNorm": LayerNormStandIn})


def compare_encoder(cls, N, norm_first, seed, x, mask=None, what="output"):
    oracle = torch_encoder(N, 8, 2, 16, norm_first, seed)
    m = cls(N, 8, 2, 16, norm_first=norm_first)
    load(m, encoder_names(oracle))
    out = m(x) if mask is None else m(x, mask)
    want = oracle(x) if mask is None else oracle(x, mask=~mask)
    assert_tensor(out, want.detach(), atol=1e-5, what=what)


@Encoder.check("layers is an nn.ModuleList of num_layers separate layers (no shared weights)",
               states=("layers: nn.ModuleList of EncoderLayer", "its own weights"))
def _(cls):
    m = cls(3, 8, 2, 16)
    layers = getattr(m, "layers", None)
    if not isinstance(layers, nn.ModuleList) or len(layers) != 3:
        raise AssertionError(f"self.layers should be an nn.ModuleList of 3 EncoderLayers, got {type(layers).__name__}")
    if len({id(layer) for layer in layers}) != 3:
        raise AssertionError("the same layer object appears several times in self.layers: create a new "
                             "EncoderLayer for each position in the stack, or the layers share their weights")
    one = count(EncoderLayerStandIn(8, 2, 16))
    if count(m) != 3 * one:
        raise AssertionError(f"a 3-layer Post-LN encoder should have 3 x {one} = {3 * one} parameters, "
                             f"yours has {count(m)}")


@Encoder.check("norm: a LayerNorm(D) when norm_first=True; no parameters when norm_first=False",
               states=("final LayerNorm(D) when norm_first is True", "nn.Identity() when it is False"))
def _(cls):
    pre, post = cls(2, 8, 2, 16, norm_first=True), cls(2, 8, 2, 16, norm_first=False)
    one = count(EncoderLayerStandIn(8, 2, 16))
    params = {k: tuple(v.shape) for k, v in pre.named_parameters() if k.startswith("norm.")}
    if params != {"norm.weight": (8,), "norm.bias": (8,)}:
        raise AssertionError(f"with norm_first=True, self.norm should be LayerNorm(d_model) (norm.weight, "
                             f"norm.bias); found {params}")
    if count(pre) != 2 * one + 16 or count(post) != 2 * one:
        raise AssertionError(f"expected {2 * one + 16} parameters for Pre-LN and {2 * one} for Post-LN, "
                             f"got {count(pre)} and {count(post)}")


# An encoder is used with a mask (padding, at the least): the stacks are compared with one as well as
# without, so a stack that drops the mask keeps about a third of the points, not most of them.
@Encoder.check("Post-LN stack of 3 layers matches nn.TransformerEncoder (each layer with its own weights), "
               "without a mask and with a (T, T) one", weight=CORE)
def _(cls):
    x = randn(2, 5, 8, seed=602)
    compare_encoder(cls, 3, False, seed=601, x=x, what="Post-LN encoder output")
    compare_encoder(cls, 3, False, seed=601, x=x, mask=some_mask(5, seed=603),
                    what="Post-LN encoder output with a (T, T) mask")


@Encoder.check("Pre-LN stack of 2 layers and the final LayerNorm matches nn.TransformerEncoder(norm=LayerNorm), "
               "without a mask and with a (T, T) one", weight=CORE)
def _(cls):
    x = randn(2, 5, 8, seed=612)
    compare_encoder(cls, 2, True, seed=611, x=x, what="Pre-LN encoder output")
    compare_encoder(cls, 2, True, seed=611, x=x, mask=some_mask(5, seed=613),
                    what="Pre-LN encoder output with a (T, T) mask")


@Encoder.check("the mask reaches every layer (both settings)", weight=CORE)
def _(cls):
    x, mask = randn(2, 6, 8, seed=621), some_mask(6, seed=622)
    for norm_first in (False, True):
        compare_encoder(cls, 2, norm_first, seed=623, x=x, mask=mask,
                        what=f"output with a (T, T) mask, norm_first={norm_first}")


@Encoder.check("dropout and norm_first are passed on to every layer",
               states=("the other arguments are passed to each layer",))
def _(cls):
    m = cls(2, 8, 2, 16, dropout=0.25, norm_first=True)
    for i, layer in enumerate(m.layers):
        if getattr(layer, "norm_first", None) is not True:
            raise AssertionError(f"layer {i} was not built with norm_first=True")
        if getattr(getattr(layer, "dropout1", None), "p", None) != 0.25:
            raise AssertionError(f"layer {i} was not built with dropout=0.25")


@Encoder.side_check("num_layers < 1 raises ValueError")
def _(cls):
    assert_raises_value_error(cls, 0, 8, 2, 16)
    assert_raises_value_error(cls, -1, 8, 2, 16)

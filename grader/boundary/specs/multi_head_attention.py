"""Hidden tests for chapter 04: split_heads, merge_heads, MultiHeadAttention, mha_parameter_count.

The layout oracles are written here one entry at a time; MultiHeadAttention is compared with
PyTorch's nn.MultiheadAttention(batch_first=True) holding the same weights, per head
(`average_attn_weights=False`). Its masks mean the opposite of ours (True = blocked), so every
mask is inverted before it is handed over.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.boundary.spec import (
    CORE,
    MULTI_HEAD_ATTENTION,
    Exercise,
    assert_pair,
    assert_raises_value_error,
    assert_tensor,
    load_torch_attention,
    randn,
)
from solutions.self_attention import scaled_dot_product_attention

# ---------------------------------------------------------------- correct pieces, written here

def split_stand_in(x, num_heads):
    if x.dim() != 3 or num_heads < 1 or x.shape[-1] % num_heads:
        raise ValueError(f"cannot split {tuple(x.shape)} into {num_heads} heads")
    B, T, D = x.shape
    return x.reshape(B, T, num_heads, D // num_heads).permute(0, 2, 1, 3)


def merge_stand_in(x):
    if x.dim() != 4:
        raise ValueError(f"expected (B, H, T, Dh), got {tuple(x.shape)}")
    B, H, T, Dh = x.shape
    return x.permute(0, 2, 1, 3).reshape(B, T, H * Dh)


def split_oracle(x, num_heads):
    """out[b, h, t, j] = x[b, t, h*Dh + j], one entry at a time."""
    B, T, D = x.shape
    Dh = D // num_heads
    out = torch.empty(B, num_heads, T, Dh, dtype=x.dtype)
    for b in range(B):
        for h in range(num_heads):
            for t in range(T):
                for j in range(Dh):
                    out[b, h, t, j] = x[b, t, h * Dh + j]
    return out


def merge_oracle(x):
    B, H, T, Dh = x.shape
    out = torch.empty(B, T, H * Dh, dtype=x.dtype)
    for b in range(B):
        for h in range(H):
            for t in range(T):
                for j in range(Dh):
                    out[b, t, h * Dh + j] = x[b, h, t, j]
    return out


def numbered(*shape: int) -> torch.Tensor:
    """0, 1, 2, ... in the given shape: every entry says where it came from."""
    return torch.arange(math.prod(shape), dtype=torch.float32).view(*shape)


# ---------------------------------------------------------------- split_heads

split_heads = Exercise("split_heads", points=2)


@split_heads.check("fixed values: head h of token t holds features h*Dh:(h+1)*Dh of that token",
                   states=("out[b, h, t] == x[b, t, h*Dh:(h+1)*Dh]",))
def _(fn):
    x = numbered(2, 3, 8)  # B=2, T=3, D=8; H=4 gives Dh=2
    assert_tensor(fn(x, 4), split_oracle(x, 4), atol=0, what="split_heads(x, 4)")


@split_heads.check("shape (B, H, T, Dh) with B, H, T, Dh all different")
def _(fn):
    x = randn(2, 5, 12, seed=401)
    out = fn(x, 3)
    assert_tensor(out, split_oracle(x, 3), atol=0, what="split_heads(x (2, 5, 12), 3)")


@split_heads.check("num_heads=1 adds a head axis; num_heads=D gives one feature per head")
def _(fn):
    x = randn(3, 4, 6, seed=402)
    assert_tensor(fn(x, 1), x[:, None], atol=0, what="split_heads(x, 1)")
    assert_tensor(fn(x, 6), x.permute(0, 2, 1)[..., None], atol=0, what="split_heads(x, D)")


@split_heads.check("a non-contiguous input (a transposed tensor) is split correctly", states=("non-contiguous",))
def _(fn):
    x = randn(4, 2, 6, seed=403).transpose(0, 1)  # (B=2, T=4, D=6), not contiguous
    assert_tensor(fn(x, 2), split_oracle(x, 2), atol=0, what="split_heads of a transposed tensor")


@split_heads.check("gradients flow back through the split to x")
def _(fn):
    x = randn(2, 3, 4, seed=404).requires_grad_()
    out = fn(x, 2)
    if type(out) is not torch.Tensor or not out.requires_grad:
        raise AssertionError("the output is cut off from autograd (no .detach() or new tensors)")
    upstream = randn(2, 2, 3, 2, seed=405)
    (out * upstream).sum().backward()
    assert_tensor(x.grad, merge_oracle(upstream), atol=0, what="the gradient of x")


@split_heads.side_check("ValueError when D is not divisible by num_heads (D=6, H=4) or num_heads=0")
def _(fn):
    x = randn(2, 3, 6, seed=406)
    assert_raises_value_error(fn, x, 4)
    assert_raises_value_error(fn, x, 0)


# ---------------------------------------------------------------- merge_heads

merge_heads = Exercise("merge_heads", points=2)


@merge_heads.check("fixed values: out[b, t, h*Dh:(h+1)*Dh] = x[b, h, t]",
                   states=("out[b, t, h*Dh:(h+1)*Dh] == x[b, h, t]",))
def _(fn):
    x = numbered(2, 3, 4, 2)  # B=2, H=3, T=4, Dh=2
    assert_tensor(fn(x), merge_oracle(x), atol=0, what="merge_heads(x (2, 3, 4, 2))")


@merge_heads.check("shape (B, T, H*Dh) with B, H, T, Dh all different")
def _(fn):
    x = randn(3, 2, 5, 4, seed=411)
    assert_tensor(fn(x), merge_oracle(x), atol=0, what="merge_heads(x (3, 2, 5, 4))")


@merge_heads.check("undoes split_heads: merge_heads(split(x, H)) == x for H = 1, 2, 4")
def _(fn):
    x = randn(2, 6, 8, seed=412)
    for h in (1, 2, 4):
        assert_tensor(fn(split_stand_in(x, h)), x, atol=0, what=f"merge_heads(split_heads(x, {h}))")


@merge_heads.check("the transposed output of an attention step (non-contiguous) merges fine",
                   states=("contiguous or not",))
def _(fn):
    x = randn(2, 5, 3, 4, seed=413).transpose(1, 2)  # (B=2, H=3, T=5, Dh=4), not contiguous
    assert_tensor(fn(x), merge_oracle(x), atol=0, what="merge_heads of a non-contiguous tensor")


@merge_heads.check("gradients flow back through the merge")
def _(fn):
    x = randn(2, 2, 3, 2, seed=414).requires_grad_()
    out = fn(x)
    if type(out) is not torch.Tensor or not out.requires_grad:
        raise AssertionError("the output is cut off from autograd (no .detach() or new tensors)")
    upstream = randn(2, 3, 4, seed=415)
    (out * upstream).sum().backward()
    assert_tensor(x.grad, split_oracle(upstream, 2), atol=0, what="the gradient of x")


@merge_heads.side_check("ValueError for an input that is not 4-dimensional")
def _(fn):
    assert_raises_value_error(fn, randn(2, 3, 4, seed=416))


# ---------------------------------------------------------------- MultiHeadAttention

MultiHeadAttention = Exercise("MultiHeadAttention", points=4, forbidden=MULTI_HEAD_ATTENTION, stand_ins={
    "split_heads": split_stand_in, "merge_heads": merge_stand_in,
    "scaled_dot_product_attention": scaled_dot_product_attention})


def build(cls, d_model, num_heads, bias=True, seed=0, dropout=0.0):
    """The learner module and PyTorch's, both holding the same seeded weights."""
    module = cls(d_model, num_heads, dropout=dropout, bias=bias)
    weights = {name: randn(d_model, d_model, seed=seed + i) / math.sqrt(d_model)
               for i, name in enumerate(("W_q", "W_k", "W_v", "W_o"))}
    biases = {name: 0.5 * randn(d_model, seed=seed + 10 + i)
              for i, name in enumerate(("W_q", "W_k", "W_v", "W_o"))}
    with torch.no_grad():
        for name in weights:
            layer = getattr(module, name, None)
            if not isinstance(layer, nn.Linear):
                raise AssertionError(f"{name} should be an nn.Linear, got {type(layer).__name__}")
            layer.weight.copy_(weights[name])
            if bias:
                layer.bias.copy_(biases[name])
    torch_mha = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, bias=bias, batch_first=True)
    state = {f"mha.{name}.weight": w for name, w in weights.items()}
    if bias:
        state.update({f"mha.{name}.bias": b for name, b in biases.items()})
    load_torch_attention(torch_mha, state, "mha")
    return module, torch_mha


def torch_masks(mask, B, H, T, S):
    """Our mask (True = may attend), broadcastable to (B, H, T, S), as PyTorch's attn_mask (True = blocked); a
    key padding mask (B, 1, 1, S) too (grader.boundary.spec.blocked says why not torch's key_padding_mask)."""
    if mask is None:
        return {}
    if mask.dim() == 2:  # (T, S): the same for every sequence and head
        return {"attn_mask": ~mask}
    return {"attn_mask": ~mask.expand(B, H, T, S).reshape(B * H, T, S)}


def compare(module, torch_mha, query, key, value, mask=None, atol=1e-5):
    result = module(query, key, value) if mask is None else module(query, key, value, mask)
    out, weights = assert_pair(result)
    B, T, D = query.shape
    S = key.shape[1]
    want_out, want_weights = torch_mha(query, key, value, need_weights=True, average_attn_weights=False,
                                       **torch_masks(mask, B, torch_mha.num_heads, T, S))
    if type(weights) is torch.Tensor and weights.shape == (B, T, S):
        raise AssertionError(f"weights have shape {(B, T, S)}: return every head's weights, (B, H, T, S), "
                             "not their average")
    assert_tensor(weights, want_weights.detach(), atol=atol, what="weights (B, H, T, S)")
    assert_tensor(out, want_out.detach(), atol=atol, what="output (B, T, D)")
    return out, weights


@MultiHeadAttention.check("W_q, W_k, W_v, W_o are nn.Linear(D, D) with biases; nothing else is learned",
                          states=("W_q, W_k, W_v, W_o: nn.Linear(D, D, bias)",), part="__init__")
def _(cls):
    module = cls(12, 3)
    if not isinstance(module, nn.Module):
        raise AssertionError("MultiHeadAttention should subclass nn.Module")
    for name in ("W_q", "W_k", "W_v", "W_o"):
        layer = getattr(module, name, None)
        if not isinstance(layer, nn.Linear):
            raise AssertionError(f"{name} should be an nn.Linear, got {type(layer).__name__}")
        if (layer.in_features, layer.out_features) != (12, 12) or layer.bias is None:
            raise AssertionError(f"{name} should be nn.Linear(12, 12) with a bias, got "
                                 f"{layer.in_features} -> {layer.out_features}, bias={layer.bias is not None}")
    count = sum(p.numel() for p in module.parameters())
    if count != 4 * 12 * 12 + 4 * 12:
        raise AssertionError(f"MultiHeadAttention(12, 3) has {count} parameters, expected 4*D*D + 4*D = 624")


@MultiHeadAttention.check("self-attention (query = key = value) matches nn.MultiheadAttention, per head",
                          states=("weights (B, H, T, S)", "one attention map per head"), weight=CORE)
def _(cls):
    module, torch_mha = build(cls, 8, 2, seed=420)
    x = randn(2, 5, 8, seed=421)
    compare(module, torch_mha, x, x, x)


@MultiHeadAttention.check("cross-attention: query (B, T, D), different key and value (B, S, D), T != S, "
                          "without a mask and with a (B, 1, 1, S) padding one", weight=CORE)
def _(cls):
    module, torch_mha = build(cls, 12, 3, seed=430)
    query, key, value = randn(2, 3, 12, seed=431), randn(2, 6, 12, seed=432), randn(2, 6, 12, seed=433)
    compare(module, torch_mha, query, key, value)
    padding = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 1, 6)
    compare(module, torch_mha, query, key, value, padding)


# Beyond the one self-attention check, key and value differ everywhere, and the value checks run with a
# mask too: an answer that mixes up key and value, or reverses the mask, keeps about a third at most.
@MultiHeadAttention.check("bias=False: no biases anywhere, and it still matches PyTorch, with a (T, S) mask too",
                          weight=CORE)
def _(cls):
    module, torch_mha = build(cls, 8, 4, bias=False, seed=440)
    for name in ("W_q", "W_k", "W_v", "W_o"):
        if getattr(module, name).bias is not None:
            raise AssertionError(f"{name} has a bias although bias=False")
    query, key, value = randn(3, 4, 8, seed=441), randn(3, 5, 8, seed=442), randn(3, 5, 8, seed=443)
    compare(module, torch_mha, query, key, value)
    compare(module, torch_mha, query, key, value, torch.ones(4, 5, dtype=torch.bool).tril(1))


@MultiHeadAttention.check("masks: (T, S) and (B, 1, 1, S) padding, True = may attend; masked keys get 0",
                          states=("True = may attend", "(B, 1, 1, S) padding mask"), weight=CORE)
def _(cls):
    module, torch_mha = build(cls, 8, 2, seed=450)
    query, key, value = randn(2, 4, 8, seed=451), randn(2, 5, 8, seed=452), randn(2, 5, 8, seed=453)
    causal = torch.ones(4, 5, dtype=torch.bool).tril(1)  # (T, S): query t sees keys 0..t+1
    _, weights = compare(module, torch_mha, query, key, value, causal)
    if not (weights[:, :, ~causal] == 0).all():
        raise AssertionError("keys where the mask is False should get weight exactly 0")
    padding = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 1, 5)
    compare(module, torch_mha, query, key, value, padding)


@MultiHeadAttention.check("a (B, 1, T, S) mask, different for each sequence, broadcasts over the heads", weight=CORE)
def _(cls):
    module, torch_mha = build(cls, 12, 4, seed=460)
    x, value = randn(2, 4, 12, seed=461), randn(2, 4, 12, seed=462)
    mask = torch.tensor([[[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]],
                         [[1, 1, 0, 1], [0, 1, 1, 0], [1, 0, 1, 1], [0, 0, 1, 1]]], dtype=torch.bool)
    compare(module, torch_mha, x, x, value, mask.unsqueeze(1))


@MultiHeadAttention.check("dropout acts on the attention weights in training mode only (returned after dropout)",
                          states=("after dropout",))
def _(cls):
    p = 0.5
    module, torch_mha = build(cls, 8, 2, seed=470, dropout=p)
    query, key, value = randn(2, 6, 8, seed=471), randn(2, 7, 8, seed=472), randn(2, 7, 8, seed=474)
    module.eval()
    torch_mha.eval()
    _, clean = compare(module, torch_mha, query, key, value)  # eval(): no dropout at all
    module.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        out, weights = assert_pair(module(query, key, value))
    assert_tensor(weights, clean.detach(), atol=math.inf, what="weights in train mode")
    dropped = weights.detach() == 0
    if not dropped.any():
        raise AssertionError("with dropout=0.5 in train mode no attention weight was zeroed: "
                             "apply dropout to the weights (not to the output), and return them")
    assert_tensor(weights.detach()[~dropped], clean.detach()[~dropped] / (1 - p), atol=1e-5,
                  what="the weights that survive dropout (scaled by 1/(1-p))")
    # The output must be made from exactly the returned (dropped-out) weights.
    v = split_stand_in(F.linear(value, module.W_v.weight, module.W_v.bias), 2)
    want = F.linear(merge_stand_in(weights.detach() @ v), module.W_o.weight, module.W_o.bias)
    assert_tensor(out, want.detach(), atol=1e-5, what="output in train mode (from the dropped-out weights)")


@MultiHeadAttention.check("gradients reach W_q, W_k, W_v and W_o and match PyTorch's")
def _(cls):
    module, torch_mha = build(cls, 8, 2, seed=480)
    query, key, value = randn(2, 3, 8, seed=481), randn(2, 4, 8, seed=482), randn(2, 4, 8, seed=484)
    out, _ = assert_pair(module(query, key, value))
    upstream = randn(2, 3, 8, seed=483)
    (out * upstream).sum().backward()
    want, _ = torch_mha(query, key, value, need_weights=False)
    (want * upstream).sum().backward()
    Wq, Wk, Wv = torch_mha.in_proj_weight.grad.chunk(3)
    for name, expected in (("W_q", Wq), ("W_k", Wk), ("W_v", Wv), ("W_o", torch_mha.out_proj.weight.grad)):
        grad = getattr(module, name).weight.grad
        if grad is None:
            raise AssertionError(f"no gradient reached {name}.weight")
        assert_tensor(grad, expected, atol=1e-5, what=f"the gradient of {name}.weight")


@MultiHeadAttention.side_check("ValueError when d_model % num_heads != 0, or an input's last size is not d_model")
def _(cls):
    assert_raises_value_error(cls, 10, 4)
    module = cls(8, 2)
    x = randn(2, 3, 8, seed=490)
    assert_raises_value_error(module, x, randn(2, 3, 6, seed=491), randn(2, 3, 6, seed=491))


# ---------------------------------------------------------------- mha_parameter_count

mha_parameter_count = Exercise("mha_parameter_count", points=1,
                               forbidden=("torch.nn.Module.parameters", "torch.nn.Module.named_parameters"))


@mha_parameter_count.check("4*D*D + 4*D with biases, for D = 1, 4, 512, 768")
def _(fn):
    for d, want in ((1, 8), (4, 80), (512, 1050624), (768, 2362368)):
        got = fn(d)
        if got != want or isinstance(got, bool):
            raise AssertionError(f"mha_parameter_count({d}) = {got!r}, expected {want}")


@mha_parameter_count.check("bias=False leaves the four D x D weight matrices: 4*D*D", states=("4*D*D weights",))
def _(fn):
    for d, want in ((4, 64), (768, 2359296)):
        got = fn(d, bias=False)
        if got != want:
            raise AssertionError(f"mha_parameter_count({d}, bias=False) = {got!r}, expected {want}")


@mha_parameter_count.check("returns a plain Python int", states=("an int",))
def _(fn):
    got = fn(64)
    if type(got) is not int:
        raise AssertionError(f"mha_parameter_count should return an int, got {type(got).__name__}")


@mha_parameter_count.side_check("ValueError for d_model < 1")
def _(fn):
    assert_raises_value_error(fn, 0)
    assert_raises_value_error(fn, -8)

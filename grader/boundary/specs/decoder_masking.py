"""Hidden tests for chapter 06: masks, DecoderLayer, the encoder-decoder Transformer, greedy
decoding, label smoothing and the Noam learning-rate schedule.

Oracles are PyTorch's own layers: nn.TransformerEncoderLayer / nn.TransformerDecoderLayer
(batch_first=True, dropout=0) holding the same, randomised weights. PyTorch's masks mean the
opposite of ours (True = blocked), so every mask is inverted before it is handed over. Correct
versions of the pieces an exercise builds on stand in for the learner's, so a mistake costs
points once, in the exercise where it was made: this chapter's are written here, earlier
chapters' are the reference pieces the notebook imports too.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.boundary.spec import (
    CORE,
    LOSSES,
    MULTI_HEAD_ATTENTION,
    TRANSFORMER,
    Exercise,
    assert_raises_value_error,
    assert_tensor,
    blocked,
    changed_in_place,  # in-place changes are judged by the in-place rule only
    fix_dropout,
    load_torch_attention,
    manual_seed,
    randn,
    random_weights,
    seeded,
)
from solutions.add_and_norm import PositionwiseFeedForward
from solutions.multi_head_attention import MultiHeadAttention

# ---------------------------------------------------------------- correct pieces, written here

def causal_stand_in(T, device=None):
    if T < 1:
        raise ValueError("T must be at least 1")
    return torch.tril(torch.ones(T, T, dtype=torch.bool, device=device))


def padding_stand_in(token_ids, pad_id):
    if token_ids.dim() != 2:
        raise ValueError("token_ids should be (B, S)")
    return (token_ids != pad_id)[:, None, None, :]


class DecoderLayerStandIn(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))
        self.cross_weights = None

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0]))
        context, self.cross_weights = self.cross_attn(x, memory, memory, memory_mask)
        x = self.norm2(x + self.dropout2(context))
        return self.norm3(x + self.dropout3(self.ffn(x)))


# ---------------------------------------------------------------- weights and oracles

def _attn_names(prefix):
    return {f"{prefix}.W_{p}.{w}" for p in "qkvo" for w in ("weight", "bias")}


def decoder_layer_names(prefix=""):
    names = _attn_names(prefix + "self_attn") | _attn_names(prefix + "cross_attn")
    names |= {f"{prefix}ffn.linear{i}.{w}" for i in (1, 2) for w in ("weight", "bias")}
    names |= {f"{prefix}norm{i}.{w}" for i in (1, 2, 3) for w in ("weight", "bias")}
    return names


def encoder_layer_names(prefix):
    names = _attn_names(prefix + "self_attn")
    names |= {f"{prefix}ffn.linear{i}.{w}" for i in (1, 2) for w in ("weight", "bias")}
    names |= {f"{prefix}norm{i}.{w}" for i in (1, 2) for w in ("weight", "bias")}
    return names


def transformer_names(num_layers):
    names = {"embedding.embedding.weight"}
    for i in range(num_layers):
        names |= encoder_layer_names(f"encoder.layers.{i}.")
        names |= decoder_layer_names(f"decoder.{i}.")
    return names


def _copy_rest(torch_layer: nn.Module, state: dict, prefix: str, norms: int) -> None:
    with torch.no_grad():
        for i in (1, 2):
            getattr(torch_layer, f"linear{i}").weight.copy_(state[f"{prefix}ffn.linear{i}.weight"])
            getattr(torch_layer, f"linear{i}").bias.copy_(state[f"{prefix}ffn.linear{i}.bias"])
        for i in range(1, norms + 1):
            getattr(torch_layer, f"norm{i}").weight.copy_(state[f"{prefix}norm{i}.weight"])
            getattr(torch_layer, f"norm{i}").bias.copy_(state[f"{prefix}norm{i}.bias"])


def torch_decoder_layer(state: dict, d_model, num_heads, d_ff, prefix="") -> nn.TransformerDecoderLayer:
    layer = nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True)
    load_torch_attention(layer.self_attn, state, prefix + "self_attn")
    load_torch_attention(layer.multihead_attn, state, prefix + "cross_attn")
    _copy_rest(layer, state, prefix, norms=3)
    return layer.eval()


def torch_encoder_layer(state: dict, d_model, num_heads, d_ff, prefix) -> nn.TransformerEncoderLayer:
    layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True)
    load_torch_attention(layer.self_attn, state, prefix + "self_attn")
    _copy_rest(layer, state, prefix, norms=2)
    return layer.eval()


def sinusoid_table(max_len, d_model):
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = position / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model).float()


def oracle_logits(state, src, tgt, d_model, num_heads, d_ff, num_layers, pad_id):
    """The whole encoder-decoder with torch layers; grad stays on so torch takes its ordinary path."""
    W = state["embedding.embedding.weight"]  # (V, D)
    S, T = src.shape[1], tgt.shape[1]
    pe = sinusoid_table(max(S, T), d_model)
    src_pad, tgt_pad = src == pad_id, tgt == pad_id  # True = blocked, torch's convention
    x = W[src] * math.sqrt(d_model) + pe[:S]
    for i in range(num_layers):
        x = torch_encoder_layer(state, d_model, num_heads, d_ff, f"encoder.layers.{i}.")(
            x, src_mask=blocked(src_pad, num_heads, S))
    y = W[tgt] * math.sqrt(d_model) + pe[:T]
    future = ~torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(num_layers):
        y = torch_decoder_layer(state, d_model, num_heads, d_ff, f"decoder.{i}.")(
            y, x, tgt_mask=blocked(tgt_pad, num_heads, T, future), memory_mask=blocked(src_pad, num_heads, T))
    return (y @ W.T).detach()


# ---------------------------------------------------------------- causal_mask
causal_mask = Exercise("causal_mask", points=1)


@causal_mask.check("fixed values for T=4: True on and below the diagonal",
                   states=("(T, T) bool", "on and below the diagonal"))
def _(fn):
    expected = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    assert_tensor(fn(4), expected, atol=0, rtol=0, what="causal_mask(4)")


@causal_mask.check("T=1 and T=9 equal torch.tril of ones, as bool")
def _(fn):
    for T in (1, 9):
        assert_tensor(fn(T), torch.ones(T, T).tril().bool(), atol=0, rtol=0, what=f"causal_mask({T})")


@causal_mask.check("used as an attention mask, query t gets weight only on keys 0..t")
def _(fn):
    mask = fn(6)
    scores = randn(2, 6, 6, seed=601)
    if type(mask) is not torch.Tensor or mask.dtype != torch.bool:
        raise AssertionError("the mask should be a bool tensor")
    weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    assert_tensor(weights.triu(1), torch.zeros(2, 6, 6), atol=0, rtol=0, what="weight on future keys")


@causal_mask.check("the device argument is honoured (device='cpu' and torch.device('cpu'))",
                   states=("device: where to create the mask",))
def _(fn):
    for device in ("cpu", torch.device("cpu")):
        m = fn(3, device=device)
        if type(m) is not torch.Tensor or m.device.type != "cpu":
            raise AssertionError(f"causal_mask(3, device={device!r}) should be on the cpu")
        assert_tensor(m, torch.ones(3, 3).tril().bool(), atol=0, rtol=0, what="causal_mask(3, device=...)")


@causal_mask.side_check("T < 1 raises ValueError")
def _(fn):
    assert_raises_value_error(fn, 0)
    assert_raises_value_error(fn, -2)


# ---------------------------------------------------------------- padding_mask
padding_mask = Exercise("padding_mask", points=1)


@padding_mask.check("fixed values: shape (B, 1, 1, S), True where the token is not padding",
                    states=("(B, 1, 1, S) bool", "True where token_ids != pad_id"))
def _(fn):
    ids = torch.tensor([[5, 3, 0, 0], [7, 0, 0, 0], [4, 4, 4, 4]])
    expected = torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)[:, None, None, :]
    assert_tensor(fn(ids, 0), expected, atol=0, rtol=0, what="padding_mask(ids, pad_id=0)")


@padding_mask.check("another pad_id: pad_id=2, and 0 is then an ordinary token")
def _(fn):
    ids = torch.tensor([[0, 1, 2], [2, 2, 2], [1, 0, 0]])
    expected = (ids != 2)[:, None, None, :]
    assert_tensor(fn(ids, 2), expected, atol=0, rtol=0, what="padding_mask(ids, pad_id=2)")


@padding_mask.check("broadcast onto scores (B, H, T, S) with T != S it hides padded keys for every query")
def _(fn):
    ids = torch.tensor([[3, 4, 5, 0, 0], [6, 0, 0, 0, 0]])  # B=2, S=5
    scores = randn(2, 3, 4, 5, seed=602)  # H=3, T=4
    mask = fn(ids, 0)
    try:
        weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    except RuntimeError as err:
        raise AssertionError(f"the mask does not broadcast to scores (B, H, T, S): {err}") from None
    expected = scores.masked_fill((ids == 0)[:, None, None, :], float("-inf")).softmax(-1)
    assert_tensor(weights, expected, what="attention weights with the padding mask")


@padding_mask.check("does not change token_ids and works for int32 ids", states=("not modified",))
def _(fn):
    ids = torch.tensor([[9, 8, 1, 1]], dtype=torch.int32)
    before = ids.clone()
    assert_tensor(fn(ids, 1), torch.tensor([[[[True, True, False, False]]]]), atol=0, rtol=0,
                  what="padding_mask(int32 ids, 1)")
    if changed_in_place(ids, before):
        raise AssertionError("padding_mask changed token_ids in place")


@padding_mask.side_check("token_ids that are not (B, S) raise ValueError")
def _(fn):
    assert_raises_value_error(fn, torch.tensor([1, 2, 0]), 0)
    assert_raises_value_error(fn, torch.zeros(2, 3, 4, dtype=torch.long), 0)


# ---------------------------------------------------------------- DecoderLayer
DecoderLayer = Exercise("DecoderLayer", points=4, forbidden=TRANSFORMER + MULTI_HEAD_ATTENTION)

D_, H_, FF_ = 16, 4, 24


def loaded_layer(cls, seed, dropout=0.0):
    m = cls(D_, H_, FF_, dropout=dropout)
    state = random_weights(m, decoder_layer_names(), seed)
    return m.eval(), state


def memory_mask_for(lengths, S):
    keep = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]  # (B, S)
    return keep[:, None, None, :]


@DecoderLayer.check("submodules self_attn, cross_attn (W_q, W_k, W_v, W_o), ffn (linear1, linear2), norm1..norm3",
                    states=("self_attn, cross_attn: MultiHeadAttention", "norm1, norm2, norm3: LayerNorm(D)"))
def _(cls):
    m = cls(D_, H_, FF_)
    params = {k: tuple(v.shape) for k, v in m.named_parameters()}
    want = decoder_layer_names()
    if set(params) != want:
        raise AssertionError(f"parameters missing: {sorted(want - set(params))}; "
                             f"unexpected: {sorted(set(params) - want)}")
    if params["ffn.linear1.weight"] != (FF_, D_) or params["cross_attn.W_q.weight"] != (D_, D_):
        raise AssertionError(f"wrong shapes: ffn.linear1.weight {params['ffn.linear1.weight']}, "
                             f"cross_attn.W_q.weight {params['cross_attn.W_q.weight']}")


@DecoderLayer.check("matches nn.TransformerDecoderLayer with the same weights, no masks, T=5 != S=7")
def _(cls):
    m, state = loaded_layer(cls, 610)
    x, memory = randn(2, 5, D_, seed=611), randn(2, 7, D_, seed=612)
    expected = torch_decoder_layer(state, D_, H_, FF_)(x, memory).detach()
    assert_tensor(m(x, memory), expected, atol=1e-5, what="DecoderLayer(x, memory)")


@DecoderLayer.check("with a causal tgt_mask (T, T) and a padding memory_mask (B, 1, 1, S)")
def _(cls):
    m, state = loaded_layer(cls, 620)
    x, memory = randn(3, 6, D_, seed=621), randn(3, 4, D_, seed=622)
    tgt_mask = torch.ones(6, 6, dtype=torch.bool).tril()
    memory_mask = memory_mask_for([4, 2, 1], 4)
    expected = torch_decoder_layer(state, D_, H_, FF_)(
        x, memory, tgt_mask=~tgt_mask, memory_mask=blocked(~memory_mask[:, 0, 0], H_, 6)).detach()
    assert_tensor(m(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask), expected, atol=1e-5,
                  what="DecoderLayer(x, memory, causal tgt_mask, padding memory_mask)")


@DecoderLayer.check("with a causal tgt_mask, output t does not change when later target positions change")
def _(cls):
    m, _ = loaded_layer(cls, 630)
    x, memory = randn(2, 6, D_, seed=631), randn(2, 3, D_, seed=632)
    changed = x.clone()
    changed[:, 3:] = randn(2, 3, D_, seed=633)
    tgt_mask = torch.ones(6, 6, dtype=torch.bool).tril()
    a, b = m(x, memory, tgt_mask=tgt_mask), m(changed, memory, tgt_mask=tgt_mask)
    assert_tensor(b[:, :3], a[:, :3].detach(), atol=1e-5, what="outputs 0..2 after changing positions 3..5")


@DecoderLayer.check("cross_weights holds the cross-attention weights (B, H, T, S), 0 on padded memory positions",
                    states=("cross_weights: the cross-attention weights (B, H, T, S)", "detached"))
def _(cls):
    m, state = loaded_layer(cls, 640)
    x, memory = randn(2, 3, D_, seed=641), randn(2, 5, D_, seed=642)
    tgt_mask = torch.ones(3, 3, dtype=torch.bool).tril()
    memory_mask = memory_mask_for([5, 3], 5)
    m(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
    oracle = torch_decoder_layer(state, D_, H_, FF_)
    h = oracle.norm1(x + oracle.self_attn(x, x, x, attn_mask=~tgt_mask, need_weights=False)[0])
    _, weights = oracle.multihead_attn(h, memory, memory, attn_mask=blocked(~memory_mask[:, 0, 0], H_, 3),
                                       average_attn_weights=False)
    cross = getattr(m, "cross_weights", None)
    if cross is None:
        raise AssertionError("after forward, self.cross_weights should hold the cross-attention weights")
    assert_tensor(cross, weights.detach(), atol=1e-5, what="cross_weights")


@DecoderLayer.check("dropout > 0 in eval mode gives exactly the dropout-free output")
def _(cls):
    m, state = loaded_layer(cls, 650, dropout=0.5)
    x, memory = randn(2, 4, D_, seed=651), randn(2, 6, D_, seed=652)
    expected = torch_decoder_layer(state, D_, H_, FF_)(x, memory).detach()
    assert_tensor(m(x, memory), expected, atol=1e-5, what="eval-mode output with dropout=0.5")


@DecoderLayer.check("training mode, dropout=0.25: both attentions and ffn get the dropout, dropout1..dropout3 act "
                    "on the sublayer outputs (every nn.Dropout swapped for a fixed mask)",
                    states=("MultiHeadAttention(D, H, dropout)", "PositionwiseFeedForward(D, d_ff, dropout)",
                            "nn.Dropout modules", "sublayers' outputs", "training mode", "fixed mask"))
def _(cls):
    m = cls(D_, H_, FF_, dropout=0.25)
    p = {name: round(d.p, 6) for name, d in m.named_modules() if isinstance(d, nn.Dropout)}
    for name in ("dropout1", "dropout2", "dropout3", "self_attn.dropout", "cross_attn.dropout", "ffn.dropout"):
        if p.get(name) != 0.25:
            raise AssertionError(f"`{name}` should be an nn.Dropout with p = dropout = 0.25; the layer's dropouts are "
                                 f"{p}")
    state = random_weights(m, decoder_layer_names(), 657)
    oracle = DecoderLayerStandIn(D_, H_, FF_, dropout=0.25)
    oracle.load_state_dict(state)
    fix_dropout(m).train()
    fix_dropout(oracle).train()
    x, memory = randn(2, 5, D_, seed=658), randn(2, 7, D_, seed=659)
    tgt_mask, memory_mask = torch.ones(5, 5, dtype=torch.bool).tril(), memory_mask_for([7, 4], 7)
    with torch.no_grad():
        want = oracle(x, memory, tgt_mask, memory_mask)
    assert_tensor(m(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask), want, atol=1e-5,
                  what="training-mode output")


@DecoderLayer.side_check("x and memory that disagree in batch size or width raise ValueError")
def _(cls):
    m = cls(D_, H_, FF_)
    assert_raises_value_error(m, randn(2, 4, D_, seed=653), randn(3, 4, D_, seed=654))
    assert_raises_value_error(m, randn(2, 4, D_, seed=655), randn(2, 4, 8, seed=656))


# ---------------------------------------------------------------- Transformer
Transformer = Exercise("Transformer", points=4, forbidden=TRANSFORMER + MULTI_HEAD_ATTENTION, stand_ins={
    "DecoderLayer": DecoderLayerStandIn, "causal_mask": causal_stand_in, "padding_mask": padding_stand_in})

V_, TD_, TH_, TFF_, TN_ = 11, 8, 2, 20, 2  # vocabulary, d_model, heads, d_ff, layers


def loaded_model(cls, seed):
    m = cls(V_, TD_, TH_, TN_, TFF_, dropout=0.0, max_len=32, pad_id=0)
    state = random_weights(m, transformer_names(TN_), seed)
    return m.eval(), state


def oracle(state, src, tgt):
    return oracle_logits(state, src, tgt, TD_, TH_, TFF_, TN_, pad_id=0)


@Transformer.check("parameters are exactly the documented ones: one embedding table, no separate output layer",
                   states=("no separate nn.Linear to the vocabulary",))
def _(cls):
    m = cls(V_, TD_, TH_, TN_, TFF_, max_len=32, pad_id=0)
    params = {k: tuple(v.shape) for k, v in m.named_parameters()}
    want = transformer_names(TN_)
    extra, missing = sorted(set(params) - want), sorted(want - set(params))
    if extra or missing:
        raise AssertionError(f"unexpected parameters {extra[:4]}, missing {missing[:4]} (the output layer "
                             "must reuse embedding.embedding.weight, not add its own weights)")
    if params["embedding.embedding.weight"] != (V_, TD_):
        raise AssertionError(f"embedding.embedding.weight has shape {params['embedding.embedding.weight']}")


@Transformer.check("the shared table starts small: embedding.embedding.weight ~ N(0, 1/D), not nn.Embedding's N(0, 1)",
                   states=("N(0, 1/D)", "std=d_model ** -0.5"))
def _(cls):
    with torch.random.fork_rng(devices=[]):
        manual_seed(0)
        m = cls(400, 16, 2, 1, 24, max_len=8, pad_id=0)
    weight = m.embedding.embedding.weight.detach()
    std, mean = weight.std().item(), weight.mean().item()
    if std > 0.8:
        raise AssertionError(f"with d_model=16 the table's entries should have mean 0 and standard deviation "
                             f"1/sqrt(16) = 0.25; yours have std {std:.3f}, nn.Embedding's default N(0, 1) "
                             "start: re-initialise it with nn.init.normal_(..., std=d_model ** -0.5)")
    if not (0.9 * 16 ** -0.5 < std < 1.1 * 16 ** -0.5 and abs(mean) < 0.05):
        raise AssertionError(f"with d_model=16 the table's entries should have mean 0 and standard deviation "
                             f"1/sqrt(16) = 0.25; yours have mean {mean:.3f} and std {std:.3f}")


@Transformer.check("dropout reaches positions, the encoder and every decoder layer; eval mode turns it off",
                   states=("PositionalEncoding(D, max_len, dropout)", "Encoder(N, D, H, d_ff, dropout)",
                           "DecoderLayer(D, H, d_ff, dropout)", "in eval mode"))
def _(cls):
    m = cls(V_, TD_, TH_, TN_, TFF_, dropout=0.3, max_len=32, pad_id=0)
    p = {name: round(d.p, 6) for name, d in m.named_modules() if isinstance(d, nn.Dropout)}
    wrong = {name: value for name, value in p.items() if value != 0.3}
    needed = ["positions.dropout"] + [f"encoder.layers.{i}.dropout1" for i in range(TN_)] + \
             [f"decoder.{i}.dropout1" for i in range(TN_)]
    if wrong or any(name not in p for name in needed):
        raise AssertionError(f"every nn.Dropout of the model should have p = dropout = 0.3 (positions, encoder, "
                             f"every decoder layer); found {wrong or sorted(set(needed) - set(p))}")
    state = random_weights(m, transformer_names(TN_), 695)
    m.eval()
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])
    tgt = torch.tensor([[1, 5, 4], [1, 9, 8]])
    assert_tensor(m(src, tgt), oracle(state, src, tgt), atol=1e-4, what="eval-mode logits with dropout=0.3")


# The logits and the masks are the model's core (weight CORE); the causal mask enters every value check,
# so a decoder that sees the future keeps about a third of the points (it kept 2.5 of 4, issue 39).
@Transformer.check("forward(src (B, S), tgt (B, T)) matches torch layers with the same weights (no padding, S != T)",
                   weight=CORE)
def _(cls):
    m, state = loaded_model(cls, 660)
    src = torch.tensor([[3, 4, 5, 6, 7, 8], [9, 10, 3, 3, 1, 2]])
    tgt = torch.tensor([[1, 8, 7, 6], [1, 2, 1, 3]])
    assert_tensor(m(src, tgt), oracle(state, src, tgt), atol=1e-4, what="Transformer(src, tgt) logits")


@Transformer.check("padded sources and targets: logits at the real target positions match torch layers",
                   weight=CORE)
def _(cls):
    m, state = loaded_model(cls, 670)
    src = torch.tensor([[3, 4, 5, 0, 0], [6, 7, 8, 9, 10], [5, 0, 0, 0, 0]])
    tgt = torch.tensor([[1, 5, 4, 3, 0, 0], [1, 10, 9, 8, 7, 6], [1, 5, 0, 0, 0, 0]])
    real = tgt != 0
    out = m(src, tgt)
    assert_tensor(out[real], oracle(state, src, tgt)[real], atol=1e-4, what="logits at real target positions")


@Transformer.check("tied weights: the logits use embedding.embedding.weight, so every row of it gets a gradient")
def _(cls):
    m, _ = loaded_model(cls, 680)
    src, tgt = torch.tensor([[3, 4, 5]]), torch.tensor([[1, 5, 4]])
    m.zero_grad()
    m(src, tgt).sum().backward()
    grad = m.embedding.embedding.weight.grad
    unused = [v for v in range(V_) if v not in (0, 1, 3, 4, 5)]
    if grad is None or (grad[unused].abs().sum(-1) == 0).any():
        raise AssertionError("rows of tokens that occur in neither src nor tgt got no gradient: the output "
                             "layer should be the embedding table itself (logits = h @ W.T)")


@Transformer.check("causal: changing later target tokens leaves the logits of earlier positions unchanged",
                   weight=CORE)
def _(cls):
    m, _ = loaded_model(cls, 690)
    src = torch.tensor([[3, 4, 5, 6], [7, 8, 9, 10]])
    tgt = torch.tensor([[1, 6, 5, 4, 3], [1, 10, 9, 8, 7]])
    changed = tgt.clone()
    changed[:, 3:] = torch.tensor([[9, 9], [3, 4]])
    a, b = m(src, tgt), m(src, changed)
    assert_tensor(b[:, :3], a[:, :3].detach(), atol=1e-5, what="logits 0..2 after changing target tokens 3..4")


@Transformer.check("source padding: a padded source row gives the same logits as the unpadded row alone, and "
                   "both match torch layers", weight=CORE)
def _(cls):
    m, state = loaded_model(cls, 700)
    src = torch.tensor([[3, 4, 5, 0, 0, 0], [6, 7, 8, 9, 10, 3]])
    tgt = torch.tensor([[1, 5, 4], [1, 3, 10]])
    batch = m(src, tgt)
    alone = m(src[:1, :3], tgt[:1])
    assert_tensor(batch[:1], alone.detach(), atol=1e-5, what="logits of the padded row vs the row without padding")
    assert_tensor(batch, oracle(state, src, tgt), atol=1e-4, what="logits with a padded source")


@Transformer.check("target padding: appending pad tokens to tgt leaves the earlier logits unchanged")
def _(cls):
    m, _ = loaded_model(cls, 710)
    src = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]])
    tgt = torch.tensor([[1, 6, 5], [1, 8, 7]])
    longer = torch.cat([tgt, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    assert_tensor(m(src, longer)[:, :3], m(src, tgt).detach(), atol=1e-5, what="logits with extra target padding")


@Transformer.check("encode(src) -> (B, S, D) and decode(tgt, memory, src) -> the same logits as forward",
                   states=("encode(src (B, S)) -> memory (B, S, D)",
                           "decode(tgt (B, T), memory (B, S, D), src (B, S))"))
def _(cls):
    m, _ = loaded_model(cls, 720)
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])
    tgt = torch.tensor([[1, 5, 4], [1, 9, 8]])
    memory = m.encode(src)
    assert_tensor(memory, torch.zeros(2, 4, TD_), atol=math.inf, what="encode(src)")
    assert_tensor(m.decode(tgt, memory, src), m(src, tgt).detach(), atol=1e-6, what="decode(tgt, encode(src), src)")


@Transformer.side_check("bad arguments raise ValueError (1-D src, batch sizes that differ, num_layers=0)")
def _(cls):
    m = cls(V_, TD_, TH_, TN_, TFF_, max_len=32, pad_id=0)
    assert_raises_value_error(m, torch.tensor([3, 4, 5]), torch.tensor([[1, 5]]))
    assert_raises_value_error(m, torch.tensor([[3, 4], [5, 6]]), torch.tensor([[1, 5]]))
    assert_raises_value_error(cls, V_, TD_, TH_, 0, TFF_)


# ---------------------------------------------------------------- greedy_decode
greedy_decode = Exercise("greedy_decode", points=3)


class ChainModel(nn.Module):
    """A fake model, a real nn.Module (model.eval() works): the next token after token v in row b
    is nxt[b][v]. Earlier positions' logits point somewhere else, so only logits[:, -1] gives the
    right answer. Counts its calls and records whether gradients were enabled while decoding."""

    def __init__(self, nxt, V=8):
        super().__init__()
        self.nxt, self.V = torch.tensor(nxt), V
        self.scale = nn.Parameter(torch.ones(()))  # makes the memory require grad unless no_grad is on
        self.encode_calls = self.decode_calls = 0
        self.grad_enabled = set()
        self.modes = set()  # "train" or "eval", as seen by each call

    def encode(self, src):
        self.encode_calls += 1
        self.grad_enabled.add(torch.is_grad_enabled())
        self.modes.add("train" if self.training else "eval")
        return src.float()[..., None] * 0.5 * self.scale  # (B, S, 1)

    def decode(self, tgt, memory, src):
        self.decode_calls += 1
        self.grad_enabled.add(torch.is_grad_enabled())
        self.modes.add("train" if self.training else "eval")
        if memory.shape[:2] != src.shape:
            raise AssertionError("decode should get the memory that encode(src) returned")
        B, t = tgt.shape
        logits = torch.zeros(B, t, self.V)
        want = self.nxt[torch.arange(B)[:, None], tgt]  # (B, t) the next token after each position
        logits.scatter_(2, ((want + 1) % self.V)[..., None], 3.0)  # earlier positions: a decoy
        logits[:, -1] = 0.0
        logits[torch.arange(B), -1, want[:, -1]] = 5.0
        return logits


def chain_expected(nxt, start, end, max_len):
    rows = []
    for row in nxt:
        out, tok = [start], start
        while len(out) < max_len and tok != end:
            tok = row[tok]
            out.append(tok)
        rows.append(out)
    L = max(len(r) for r in rows)
    return torch.tensor([r + [end] * (L - len(r)) for r in rows])


# Row b's chain from the start token 1: row 0 ends after 2 tokens, row 1 after 4, row 2 after 3.
# After the end token 2 each chain would go on (to 6, 4, 5): a finished row must keep end_id instead.
CHAINS = [[0, 4, 6, 0, 2, 0, 0, 0],   # 1 -> 4 -> 2
          [0, 5, 4, 7, 0, 3, 0, 2],   # 1 -> 5 -> 3 -> 7 -> 2
          [0, 6, 5, 0, 0, 2, 5, 0]]   # 1 -> 6 -> 5 -> 2


@greedy_decode.check("the output starts with start_id and follows the argmax of the LAST position (one row)",
                     states=("logits[:, -1]", "column 0 is start_id"))
def _(fn):
    model = ChainModel([CHAINS[1]])
    out = fn(model, torch.tensor([[3, 4]]), 10, 1, 2)
    assert_tensor(out, torch.tensor([[1, 5, 3, 7, 2]]), atol=0, rtol=0, what="greedy_decode(...)")


@greedy_decode.check("a batch: rows that finish early keep end_id; stops once every row has produced end_id",
                     states=("every later entry of that row is end_id", "as soon as every row is finished"))
def _(fn):
    model = ChainModel(CHAINS)
    out = fn(model, torch.tensor([[3, 4, 5], [5, 6, 0], [7, 0, 0]]), 12, 1, 2)
    assert_tensor(out, chain_expected(CHAINS, 1, 2, 12), atol=0, rtol=0, what="greedy_decode on a batch of 3")


@greedy_decode.check("never longer than max_len (start token included); max_len=1 gives the start column",
                     states=("L <= max_len", "start token included"))
def _(fn):
    loop = [[0, 3, 0, 4, 3, 0, 0, 0]]  # 1 -> 3 -> 4 -> 3 -> 4 ... never ends
    out = fn(ChainModel(loop), torch.tensor([[3]]), 6, 1, 2)
    assert_tensor(out, torch.tensor([[1, 3, 4, 3, 4, 3]]), atol=0, rtol=0, what="greedy_decode with max_len=6")
    out = fn(ChainModel(loop), torch.tensor([[3], [4]]), 1, 1, 2)
    assert_tensor(out, torch.tensor([[1], [1]]), atol=0, rtol=0, what="greedy_decode with max_len=1")


@greedy_decode.check("encode is called once; decode once per generated token",
                     states=("called once", "called once per new token"))
def _(fn):
    model = ChainModel(CHAINS)
    out = fn(model, torch.tensor([[3, 4, 5], [5, 6, 0], [7, 0, 0]]), 12, 1, 2)
    if model.encode_calls != 1:
        raise AssertionError(f"encode was called {model.encode_calls} times; encode the source once")
    generated = out.shape[1] - 1 if type(out) is torch.Tensor else -1
    if model.decode_calls != generated:
        raise AssertionError(f"decode was called {model.decode_calls} times for {generated} generated tokens")


@greedy_decode.check("runs under torch.no_grad: no gradients are tracked while encoding or decoding",
                     states=("torch.no_grad",))
def _(fn):
    model = ChainModel(CHAINS)
    fn(model, torch.tensor([[3, 4, 5], [5, 6, 0], [7, 0, 0]]), 12, 1, 2)
    if model.grad_enabled != {False}:
        raise AssertionError("gradients were enabled while the model ran: wrap the loop in `with torch.no_grad():` "
                             "(generation never trains, and tracking gradients costs memory at every step)")


@greedy_decode.check("a model in eval mode decodes in eval mode and is left in eval mode (never switched to training "
                     "mode)",
                     states=("never switch it to training mode",
                             "the model decodes in eval mode and is left in eval mode"))
def _(fn):
    model = ChainModel(CHAINS).eval()
    fn(model, torch.tensor([[3, 4, 5], [5, 6, 0], [7, 0, 0]]), 12, 1, 2)
    if not model.modes:
        raise AssertionError("greedy_decode never called the model's encode or decode")
    if "train" in model.modes:
        raise AssertionError("the model, handed over in eval mode, ran encode/decode in training mode: decoding "
                             "never switches the model to training mode (dropout would then make every step random)")
    if model.training:
        raise AssertionError("the model, handed over in eval mode, was left in training mode: decoding never "
                             "switches the model to training mode (dropout would then make every step random)")


@greedy_decode.check("other start and end ids (start 3, end 0)")
def _(fn):
    chain = [[5, 0, 0, 4, 6, 0, 7, 0]]  # 3 -> 4 -> 6 -> 7 -> 0
    out = fn(ChainModel(chain), torch.tensor([[5, 5]]), 9, 3, 0)
    assert_tensor(out, torch.tensor([[3, 4, 6, 7, 0]]), atol=0, rtol=0, what="greedy_decode(start_id=3, end_id=0)")


@greedy_decode.side_check("max_len < 1 or a src that is not (B, S) raises ValueError")
def _(fn):
    assert_raises_value_error(fn, ChainModel(CHAINS[:1]), torch.tensor([[3]]), 0, 1, 2)
    assert_raises_value_error(fn, ChainModel(CHAINS[:1]), torch.tensor([3, 4]), 5, 1, 2)


# ---------------------------------------------------------------- label_smoothing_distribution
label_smoothing_distribution = Exercise("label_smoothing_distribution", points=2)


def smoothed_oracle(targets, C, eps):
    q = torch.full((len(targets), C), eps / (C - 1))
    for n, t in enumerate(targets.tolist()):
        q[n, t] = 1 - eps
    return q


@label_smoothing_distribution.check("fixed values: C=4, smoothing=0.3 gives 0.7 on the target and 0.1 elsewhere")
def _(fn):
    expected = torch.tensor([[0.1, 0.1, 0.7, 0.1], [0.7, 0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 0.7]])
    assert_tensor(fn(torch.tensor([2, 0, 3]), 4, 0.3), expected, what="label_smoothing_distribution([2, 0, 3], 4, 0.3)")


@label_smoothing_distribution.check("C=7, smoothing=0.1: smoothing / (C - 1) off the target, rows sum to 1",
                                    states=("smoothing / (C - 1)",))
def _(fn):
    targets = torch.randint(0, 7, (20,), generator=seeded(730))
    out = fn(targets, 7, 0.1)
    assert_tensor(out, smoothed_oracle(targets, 7, 0.1), what="label_smoothing_distribution(targets, 7, 0.1)")
    assert_tensor(out.sum(-1), torch.ones(20), atol=1e-6, what="row sums")


@label_smoothing_distribution.check("smoothing=0 gives one-hot rows; two classes work")
def _(fn):
    targets = torch.tensor([1, 0, 4, 4])
    assert_tensor(fn(targets, 5, 0.0), F.one_hot(targets, 5).float(), what="label_smoothing_distribution(t, 5, 0.0)")
    assert_tensor(fn(torch.tensor([1, 0]), 2, 0.25), torch.tensor([[0.25, 0.75], [0.75, 0.25]]),
                  what="label_smoothing_distribution([1, 0], 2, 0.25)")


@label_smoothing_distribution.side_check("smoothing < 0 or >= 1 and num_classes < 2 raise ValueError")
def _(fn):
    t = torch.tensor([0, 1])
    assert_raises_value_error(fn, t, 3, -0.1)
    assert_raises_value_error(fn, t, 3, 1.0)
    assert_raises_value_error(fn, torch.tensor([0]), 1, 0.1)


@label_smoothing_distribution.side_check("a target outside [0, C) raises ValueError")
def _(fn):
    assert_raises_value_error(fn, torch.tensor([0, 3]), 3, 0.1)
    assert_raises_value_error(fn, torch.tensor([-100, 1]), 3, 0.1)


# ---------------------------------------------------------------- label_smoothed_loss
label_smoothed_loss = Exercise("label_smoothed_loss", points=3, forbidden=LOSSES,
                               stand_ins={"label_smoothing_distribution": lambda t, C, eps: smoothed_oracle(t, C, eps)})


def kl_oracle(logits, targets, eps, ignore_index=-100):
    """Mean over kept rows of sum_c q log q - q log p, in float64, one row at a time."""
    logits = logits.double()
    total, n = 0.0, 0
    for row, t in zip(logits, targets.tolist()):
        if t == ignore_index:
            continue
        C = row.shape[0]
        log_p = row - torch.logsumexp(row, 0)
        for c in range(C):
            q = 1 - eps if c == t else eps / (C - 1)
            if q > 0:
                total += q * (math.log(q) - log_p[c].item())
        n += 1
    return torch.tensor(total / n, dtype=torch.float32)


@label_smoothed_loss.check("fixed value: logits [[2, 0, -1], [0, 1, 0]], targets [0, 2], smoothing 0.2")
def _(fn):
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    targets = torch.tensor([0, 2])
    assert_tensor(fn(logits, targets, 0.2), kl_oracle(logits, targets, 0.2), atol=1e-5, what="label_smoothed_loss")


@label_smoothed_loss.check("smoothing=0 equals F.cross_entropy (N=6, C=5)")
def _(fn):
    logits = 2 * randn(6, 5, seed=740)
    targets = torch.tensor([0, 4, 2, 2, 1, 3])
    assert_tensor(fn(logits, targets, 0.0), F.cross_entropy(logits, targets), atol=1e-5,
                  what="label_smoothed_loss(..., smoothing=0)")


@label_smoothed_loss.check("KL from an independent formula; equals torch's label_smoothing=eps*C/(C-1) minus the "
                           "entropy of q")
def _(fn):
    logits = 3 * randn(8, 6, seed=741)
    targets = torch.randint(0, 6, (8,), generator=seeded(742))
    out = fn(logits, targets, 0.1)
    assert_tensor(out, kl_oracle(logits, targets, 0.1), atol=1e-5, what="label_smoothed_loss(..., 0.1)")
    q = smoothed_oracle(targets, 6, 0.1)
    entropy = -(q * q.log()).sum(-1).mean()
    via_torch = F.cross_entropy(logits, targets, label_smoothing=0.1 * 6 / 5) - entropy
    assert_tensor(out, via_torch, atol=1e-5, what="label_smoothed_loss vs cross_entropy - entropy")


@label_smoothed_loss.check("rows whose target is ignore_index count neither in the sum nor in the mean",
                           states=("the mean over the kept rows", "ignore_index"))
def _(fn):
    logits = randn(7, 4, seed=743)
    targets = torch.tensor([1, -100, 3, -100, -100, 0, 2])
    assert_tensor(fn(logits, targets, 0.1), kl_oracle(logits, targets, 0.1), atol=1e-5,
                  what="loss with ignored rows")
    targets = torch.tensor([1, 0, 3, 0, 0, 2, 2])
    assert_tensor(fn(logits, targets, 0.1, ignore_index=0), kl_oracle(logits, targets, 0.1, 0), atol=1e-5,
                  what="loss with ignore_index=0")


@label_smoothed_loss.check("logits around 1e4 give a finite, correct loss", states=("log_softmax",))
def _(fn):
    logits = 1e4 + randn(3, 5, seed=744)
    logits[1, 2] = -1e4
    targets = torch.tensor([4, 2, 0])
    out = fn(logits, targets, 0.1)
    if type(out) is torch.Tensor and not torch.isfinite(out).all():
        raise AssertionError("large logits gave inf or nan: use log_softmax (log-sum-exp with the max subtracted)")
    assert_tensor(out, kl_oracle(logits, targets, 0.1), atol=1e-3, rtol=1e-4, what="loss for large logits")


@label_smoothed_loss.check("the gradient with respect to the logits is (softmax - q) / n on the kept rows, 0 elsewhere")
def _(fn):
    logits = randn(5, 4, seed=745).requires_grad_()
    targets = torch.tensor([2, -100, 0, 3, 1])
    fn(logits, targets, 0.2).backward()
    keep = targets != -100
    expected = torch.zeros(5, 4)
    expected[keep] = (logits.detach()[keep].softmax(-1) - smoothed_oracle(targets[keep], 4, 0.2)) / keep.sum()
    if logits.grad is None:
        raise AssertionError("no gradient reached the logits")
    assert_tensor(logits.grad, expected, atol=1e-6, what="d loss / d logits")


@label_smoothed_loss.side_check("bad smoothing or shapes raise ValueError")
def _(fn):
    logits, targets = randn(3, 4, seed=746), torch.tensor([0, 1, 2])
    assert_raises_value_error(fn, logits, targets, 1.0)
    assert_raises_value_error(fn, logits, targets, -0.2)
    assert_raises_value_error(fn, logits, torch.tensor([0, 1]), 0.1)


# ---------------------------------------------------------------- noam_learning_rate
noam_learning_rate = Exercise("noam_learning_rate", points=2)


def noam_oracle(step, d, w, factor=1.0):
    return factor * d ** -0.5 * min(step ** -0.5, step * w ** -1.5)


def assert_number(actual, expected, what, rel=1e-6):
    try:
        value = float(actual)
    except (TypeError, ValueError):
        raise AssertionError(f"{what} should be a number, got {type(actual).__name__}") from None
    if not math.isclose(value, expected, rel_tol=rel, abs_tol=1e-12):
        raise AssertionError(f"{what} = {value:.6g}, expected {expected:.6g}")


@noam_learning_rate.check("fixed values at d_model=512, warmup 4000: steps 1, 4000 (the peak, ~6.99e-4) and 10000")
def _(fn):
    for step in (1, 4000, 10000):
        assert_number(fn(step, 512, 4000), noam_oracle(step, 512, 4000), f"noam_learning_rate({step}, 512, 4000)")


@noam_learning_rate.check("linear warm-up (lr(2) = 2 lr(1)), then 1/sqrt(step) decay (lr(4w) = lr(w) / 2)")
def _(fn):
    assert_number(fn(2, 64, 100) / fn(1, 64, 100), 2.0, "lr(2) / lr(1)")
    assert_number(fn(50, 64, 100) / fn(25, 64, 100), 2.0, "lr(50) / lr(25)")
    assert_number(fn(400, 64, 100) / fn(100, 64, 100), 0.5, "lr(400) / lr(100)")


@noam_learning_rate.check("the rate rises until step == warmup_steps and falls after it (warmup 250, steps 1..600)")
def _(fn):
    steps = [1, 60, 120, 180, *range(240, 261), 320, 400, 500, 600]  # every step near the peak
    rates = [float(fn(s, 128, 250)) for s in steps]
    best = steps[max(range(len(steps)), key=rates.__getitem__)]
    if best != 250:
        raise AssertionError(f"the rate peaks at step {best}, expected at warmup_steps=250")
    for (s, a), (t, b) in zip(zip(steps, rates), zip(steps[1:], rates[1:])):
        if (a >= b) if t <= 250 else (a <= b):
            raise AssertionError(f"the rate should rise until step 250 and fall after it; from step {s} to step {t} "
                                 f"it goes from {a:.6g} to {b:.6g}")
    assert_number(rates[steps.index(250)], noam_oracle(250, 128, 250), "noam_learning_rate(250, 128, 250)")


@noam_learning_rate.check("factor multiplies the whole schedule")
def _(fn):
    for step in (3, 30, 3000):
        assert_number(fn(step, 256, 30, factor=2.5), noam_oracle(step, 256, 30, 2.5),
                      f"noam_learning_rate({step}, 256, 30, factor=2.5)")


@noam_learning_rate.side_check("step < 1 raises ValueError (the schedule counts steps from 1)",
                               states=("counted from 1",))
def _(fn):
    assert_raises_value_error(fn, 0, 512, 4000)
    assert_raises_value_error(fn, -3, 512, 4000)


@noam_learning_rate.side_check("warmup_steps < 1 or d_model < 1 raises ValueError")
def _(fn):
    assert_raises_value_error(fn, 10, 512, 0)
    assert_raises_value_error(fn, 10, 0, 4000)

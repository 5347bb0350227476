"""Public checks for chapter 06 (masks, the decoder, the full Transformer, decoding, label
smoothing, Noam). Between the `# --- stored numbers` lines are what the reference solution gives on
the fixed inputs here, and what the usual mistakes give, which is how a failing check names the
mistake; `python -m tests.snapshots --write` computes them again in the course repository.
"""
from __future__ import annotations

import math

import torch
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
    name_wave,
    passed,
    public_check,
    tr,
)


def _bool(mask, what: str) -> None:
    if type(mask) is torch.Tensor and mask.dtype != torch.bool:
        fail(tr("{what} should be a bool tensor (True = may attend), got dtype {dtype}; "
                "a 0/1 float mask is not what masked_fill(~mask, -inf) expects", what=what, dtype=mask.dtype))


def _set_params(module: torch.nn.Module) -> None:
    """Fixed, deterministic weights chosen by each parameter's name (creation order does not matter)."""
    for name, p in sorted(module.named_parameters()):
        vals = name_wave(name, p.shape)
        with torch.no_grad():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * vals)
            elif p.dim() == 2:
                p.copy_(vals / math.sqrt(p.shape[1]))
            else:
                p.copy_(0.1 * vals)


# ---------------------------------------------------------------- causal_mask

@public_check
def check_causal_mask(fn) -> None:
    m = fn(4)
    expect_tensor(m, (4, 4), "causal_mask(4)")
    _bool(m, "causal_mask(4)")
    ones = torch.ones(4, 4, dtype=torch.bool)
    if torch.equal(m, ones.triu()):
        fail(tr("your mask is transposed: True above the diagonal lets query t see the FUTURE keys s > t. "
                "Row t (the query) may attend to columns s <= t: use the lower triangle (tril)"))
    if torch.equal(m, ones.tril(-1)):
        fail(tr("the diagonal must be True: a token may attend to itself (and row 0 would otherwise "
                "have no key at all, a softmax over nothing). Use tril(), not tril(-1)"))
    if torch.equal(m, ~ones.tril()) or torch.equal(m, ~ones.tril(-1)):
        fail(tr("the polarity is reversed: True means 'may attend', so the past and present are True"))
    if not torch.equal(m, ones.tril()):
        fail(tr("causal_mask(4) should be True on and below the diagonal; got {mask}", mask=m.int().tolist()))
    if not torch.equal(fn(1), torch.ones(1, 1, dtype=torch.bool)):
        fail(tr("causal_mask(1) should be [[True]]"))
    if fn(3, device="cpu").device.type != "cpu":
        fail(tr("causal_mask(3, device='cpu') should be on the cpu: pass device=device when you create it"))
    expect_value_error(fn, 0, what="causal_mask(0)")
    passed("causal_mask")


# ---------------------------------------------------------------- padding_mask

@public_check
def check_padding_mask(fn) -> None:
    ids = torch.tensor([[5, 3, 0, 0], [7, 0, 0, 0]])
    m = fn(ids, 0)
    keep = torch.tensor([[True, True, False, False], [True, False, False, False]])
    if type(m) is torch.Tensor and tuple(m.shape) == (2, 1, 4, 1):
        fail(tr("your mask has shape (B, 1, S, 1): it masks QUERY rows. Padding must be hidden as a KEY, "
                "so the mask needs shape (B, 1, 1, S): it broadcasts over the heads and over the queries"))
    if type(m) is torch.Tensor and tuple(m.shape) == (2, 4):
        fail(tr("add the two size-1 axes: the mask should have shape (B, 1, 1, S) so that it broadcasts "
                "against the scores (B, H, T, S)"))
    expect_tensor(m, (2, 1, 1, 4), tr("padding_mask(ids, 0) for ids of shape (2, 4)"))
    _bool(m, tr("the padding mask"))
    if torch.equal(m[:, 0, 0], ~keep):
        fail(tr("the polarity is reversed: True marks the REAL tokens (may attend), False the padding"))
    if not torch.equal(m[:, 0, 0], keep):
        fail(tr("padding_mask should be True where token_ids != pad_id; got {mask}", mask=m[:, 0, 0].tolist()))
    other = fn(torch.tensor([[0, 2, 2]]), 2)
    if not (type(other) is torch.Tensor and other.shape == (1, 1, 1, 3)
            and other.reshape(-1).tolist() == [True, False, False]):
        fail(tr("with pad_id=2 the mask should hide the 2s (and keep 0, an ordinary token then): compare with pad_id"))
    expect_value_error(fn, torch.tensor([1, 2, 0]), 0, what=tr("1-dimensional token_ids"))
    passed("padding_mask")


# ---------------------------------------------------------------- DecoderLayer

DEC_X = torch.sin(torch.arange(12.0)).reshape(1, 3, 4)  # B=1, T=3, D=4
DEC_MEMORY = torch.cos(torch.arange(16.0) * 0.5).reshape(1, 4, 4)  # S=4
DEC_TGT_MASK = torch.ones(3, 3, dtype=torch.bool).tril()
DEC_MEMORY_MASK = torch.tensor([True, True, True, False]).reshape(1, 1, 1, 4)  # the last source token is padding

# --- stored numbers: DecoderLayer ---
DEC_OUT = [[[-0.224145, 0.986572, 0.222747, -1.332861],
            [-0.875398, -0.869971, 0.537175, 1.130663],
            [0.775797, 0.487349, -0.281693, -1.365057]]]
# mistake: no residual connection around cross-attention
DEC_NO_CROSS_RESIDUAL = [[[0.096654, 0.800116, 0.220833, -1.484474],
                          [-0.211257, 0.851269, 0.412581, -1.399266],
                          [0.197337, 0.743443, 0.196287, -1.508576]]]
# mistake: Pre-LN order (norm before each sublayer) instead of the paper's Post-LN
DEC_PRE_LN = [[[0.143675, 0.992054, 0.931742, 0.041513],
               [-1.012608, -0.840642, 0.221521, 0.210173],
               [0.881286, 0.410392, -0.220257, -1.344253]]]
# mistake: norm2 and norm3 swapped
DEC_NORMS_SWAPPED = [[[-0.098514, 1.449112, 0.502326, -1.627636],
                      [-0.921168, -0.838857, 0.824152, 1.576593],
                      [1.194152, 0.725507, -0.155735, -1.68283]]]
# mistake: memory_mask never used
DEC_NO_MEMORY_MASK = [[[-0.219239, 0.990469, 0.212589, -1.331887],
                       [-0.840294, -0.89723, 0.507515, 1.153107],
                       [0.824569, 0.448077, -0.320229, -1.335166]]]
# mistake: tgt_mask never used
DEC_NO_TGT_MASK = [[[-0.940293, 0.653422, 0.877551, -0.854319],
                    [-0.753555, -0.94581, 0.397243, 1.227117],
                    [0.775797, 0.487349, -0.281693, -1.365057]]]
DEC_CROSS = [[[0.450707, 0.233706, 0.315587, 0.0],
              [0.178834, 0.517353, 0.303813, 0.0],
              [0.5365, 0.183924, 0.279576, 0.0]],
             [[0.407343, 0.288001, 0.304656, 0.0],
              [0.153417, 0.572668, 0.273915, 0.0],
              [0.492407, 0.233212, 0.274381, 0.0]]]
# --- end of stored numbers ---
DEC_MISTAKES = {
    tr("the cross-attention sublayer has no residual connection: x = norm2(x + cross_attn(x, memory, memory, ...))"):
        DEC_NO_CROSS_RESIDUAL,
    tr("this is the Pre-LN order (x + sublayer(norm(x))); the 2017 decoder is Post-LN: x = norm(x + sublayer(x))"):
        DEC_PRE_LN,
    tr("norm2 and norm3 are swapped: norm1 follows self-attention, norm2 cross-attention, norm3 the feed-forward "
       "block"):
        DEC_NORMS_SWAPPED,
    tr("memory_mask is not used: pass it as the mask of the cross-attention, so no target position "
       "attends to source padding"): DEC_NO_MEMORY_MASK,
    tr("tgt_mask is not used: pass it as the mask of the self-attention (otherwise a target position sees the future)"):
        DEC_NO_TGT_MASK,
}


@public_check
def check_DecoderLayer(cls) -> None:
    avoid_library_call(cls, ("scaled_dot_product_attention", "MultiheadAttention", "TransformerDecoderLayer",
                             "multi_head_attention_forward"),
                       tr("build the layer from your own pieces (MultiHeadAttention from chapter 04); the grader gives "
                          "zero to a solution that calls PyTorch's attention or decoder layers"))
    layer = cls(4, 2, 6)
    for name in ("self_attn", "cross_attn", "ffn", "norm1", "norm2", "norm3"):
        if not hasattr(layer, name):
            fail(tr("the layer has no attribute `{name}`; the documented submodules are self_attn, cross_attn "
                    "(MultiHeadAttention), ffn (PositionwiseFeedForward) and norm1, norm2, norm3 (LayerNorm)",
                    name=name))
    _set_params(layer)
    layer.eval()
    try:
        out = layer(DEC_X, DEC_MEMORY, DEC_TGT_MASK, DEC_MEMORY_MASK)
    except RuntimeError as err:
        fail(tr("forward(x (1, 3, 4), memory (1, 4, 4), tgt_mask (3, 3), memory_mask (1, 1, 1, 4)) raised "
                "`{err}`. In cross-attention the QUERIES come from x and the keys and values from memory, "
                "and its mask is memory_mask; tgt_mask (T, T) belongs to the self-attention", err=err))
    if type(out) is tuple:
        fail(tr("forward should return the output tensor (B, T, D) only, not a tuple"))
    if type(out) is torch.Tensor and tuple(out.shape) == (1, 4, 4):
        fail(tr("the output has the length of memory: in cross-attention the queries come from the decoder "
                "(x) and the keys and values from memory: cross_attn(x, memory, memory, memory_mask)"))
    diagnose(out, DEC_OUT, DEC_MISTAKES, tr("DecoderLayer(x, memory, tgt_mask, memory_mask) with fixed weights"))
    cross = getattr(layer, "cross_weights", None)
    if cross is None:
        fail(tr("store the cross-attention weights in self.cross_weights (the notebook plots them)"))
    expect_tensor(cross, (1, 2, 3, 4), "self.cross_weights")
    diagnose(cross, [DEC_CROSS], {}, "self.cross_weights")
    expect_dropouts(cls(4, 2, 6, dropout=0.3), 0.3, ("self_attn.dropout", "cross_attn.dropout", "ffn.dropout",
                                                    "dropout1", "dropout2", "dropout3"))
    dropped = cls(4, 2, 6, dropout=1.0).train()
    with torch.no_grad():
        out = dropped(DEC_X, DEC_MEMORY, DEC_TGT_MASK, DEC_MEMORY_MASK)
    if not close(out, F.layer_norm(F.layer_norm(F.layer_norm(DEC_X, (4,)), (4,)), (4,)), atol=1e-4):
        fail(tr("with dropout=1.0 in training mode every sublayer output is dropped, so the layer should return "
                "norm3(norm2(norm1(x))): apply dropout1, dropout2, dropout3 to the three sublayer outputs (not to the "
                "residual sums), and call the modules in forward"))
    passed("DecoderLayer")


# ---------------------------------------------------------------- Transformer

TR_SRC = torch.tensor([[3, 4, 5, 0], [6, 5, 4, 3]])  # pad_id 0: row 0 has one padding token
TR_TGT = torch.tensor([[1, 5, 4, 3], [1, 3, 4, 5]])
# --- stored numbers: Transformer ---
TR_ROW0 = [[0.071125, 0.502966, 0.020067, -0.499293, -0.110633, 0.479236, 0.197525],
           [0.010927, 0.729869, 0.121407, -0.707812, -0.249794, 0.662523, 0.369919],
           [-0.08437, 0.786465, 0.226968, -0.745278, -0.36215, 0.679617, 0.485375],
           [0.035813, -0.685841, -0.160164, 0.656755, 0.27929, -0.606118, -0.389188]]
# mistake: embeddings looked up without the sqrt(d_model) scale
TR_ROW0_UNSCALED = [[0.085535, 0.351802, -0.02175, -0.355723, -0.042773, 0.34797, 0.105865],
                    [-0.001514, 0.719566, 0.131981, -0.695596, -0.258152, 0.648792, 0.375788],
                    [-0.139972, 0.552327, 0.240121, -0.508779, -0.332405, 0.44851, 0.413727],
                    [0.01592, -0.611464, -0.126785, 0.588433, 0.233519, -0.546095, -0.332533]]
# --- end of stored numbers ---
TR_MISTAKES = {
    tr("the embeddings are not scaled: use self.embedding (a TokenEmbedding, which multiplies by sqrt(d_model)) "
       "for the source and the target, not the raw nn.Embedding inside it"): TR_ROW0_UNSCALED,
}


@public_check
def check_Transformer(cls) -> None:
    big = cls(400, 16, 2, 1, 24, max_len=8, pad_id=0)
    table = getattr(getattr(big, "embedding", None), "embedding", None)
    if isinstance(table, torch.nn.Embedding):
        std = table.weight.std().item()
        if std > 0.8:
            fail(tr("the shared table still has nn.Embedding's default N(0, 1) start (std {std:.2f}): it is also the "
                    "output layer, so start it small, nn.init.normal_(self.embedding.embedding.weight, "
                    "std=d_model ** -0.5); "
                    "with the default start the training below stalls", std=std))
        if not 0.2 < std < 0.3:
            fail(tr("with d_model=16 the table should start with standard deviation 1/sqrt(16) = 0.25, got {std:.3f}",
                    std=std))
    expect_dropouts(cls(7, 4, 2, 1, 6, dropout=0.3, max_len=16, pad_id=0), 0.3,
                    ("positions.dropout", "encoder.layers.0.dropout1", "decoder.0.dropout1"))
    V, D = 7, 4
    model = cls(V, D, 2, 1, 6, max_len=16, pad_id=0).eval()
    params = dict(model.named_parameters())
    if "embedding.embedding.weight" not in params:
        fail(tr("the shared table should be self.embedding = TokenEmbedding(vocab_size, d_model), whose "
                "weight is embedding.embedding.weight; parameters found: {names} ...", names=sorted(params)[:5]))
    untied = [n for n, p in params.items() if n != "embedding.embedding.weight" and {V, D} == set(p.shape)]
    if untied:
        fail(tr("{name} is a separate output layer: tie it to the embedding instead, "
                "logits = h @ self.embedding.embedding.weight.T (no new parameters)", name=untied[0]))
    for name in ("positions", "encoder", "decoder"):
        if not hasattr(model, name):
            fail(tr("the model has no attribute `{name}` (see the docstring for the documented parts)", name=name))
    _set_params(model)
    with torch.no_grad():
        logits = model(TR_SRC, TR_TGT)
        expect_tensor(logits, (2, 4, V), tr("model(src (2, 4), tgt (2, 4)) with vocab_size 7"))
        changed = TR_TGT.clone()
        changed[:, 2:] = torch.tensor([[6, 6], [6, 6]])
        if not close(model(TR_SRC, changed)[:, :2], logits[:, :2], atol=1e-5):
            fail(tr("changing target tokens 2 and 3 changed the logits at positions 0 and 1: the decoder "
                    "sees the future. Give its self-attention tgt_mask = causal_mask(T) (combined with "
                    "the target padding mask, if you use one)"))
        alone = model(TR_SRC[:1, :3], TR_TGT[:1])
        if not close(alone, logits[:1], atol=1e-5):
            fail(tr("the padded source row [3, 4, 5, <pad>] gives different logits from [3, 4, 5] alone: hide "
                    "source padding with padding_mask(src, pad_id), in the encoder AND as memory_mask in every "
                    "decoder layer"))
        diagnose(logits[0], TR_ROW0, TR_MISTAKES, tr("the logits of row 0 with fixed weights"))
        memory = model.encode(TR_SRC)
        expect_tensor(memory, (2, 4, D), "model.encode(src)")
        if not close(model.decode(TR_TGT, memory, TR_SRC), logits, atol=1e-5):
            fail(tr("decode(tgt, encode(src), src) should give the same logits as forward(src, tgt)"))
    expect_value_error(model, torch.tensor([3, 4]), torch.tensor([[1, 3]]), what=tr("a 1-dimensional src"))
    passed("Transformer")


# ---------------------------------------------------------------- greedy_decode

class _ChainModel(torch.nn.Module):
    """A stand-in model (an nn.Module, so model.eval() works): after token v, row b's next token is
    nxt[b][v]. Earlier positions point elsewhere, so only the last position's logits give the right
    next token."""

    def __init__(self, nxt, V=8):
        super().__init__()
        self.nxt, self.V = torch.tensor(nxt), V
        self.encode_calls = self.decode_calls = 0
        self.trained = False  # did any call run in training mode?

    def encode(self, src):
        self.encode_calls += 1
        self.trained |= self.training
        return src.float()[..., None]

    def decode(self, tgt, memory, src):
        self.decode_calls += 1
        self.trained |= self.training
        B, t = tgt.shape
        want = self.nxt[torch.arange(B)[:, None], tgt]  # (B, t)
        logits = torch.zeros(B, t, self.V)
        logits.scatter_(2, ((want + 3) % self.V)[..., None], 1.0)
        logits[:, -1] = 0.0
        logits[torch.arange(B), -1, want[:, -1]] = 1.0
        return logits


# start 1, end 2: row 0 is 1 -> 4 -> 2 (then would go on to 6), row 1 is 1 -> 5 -> 3 -> 7 -> 2
_CHAINS = [[0, 4, 6, 0, 2, 0, 0, 0], [0, 5, 4, 7, 0, 3, 0, 2]]
_SOURCE = torch.tensor([[3, 4], [5, 6]])
# --- stored numbers: greedy_decode ---
_EXPECTED = [[1, 4, 2, 2, 2], [1, 5, 3, 7, 2]]
# --- end of stored numbers ---


@public_check
def check_greedy_decode(fn) -> None:
    model = _ChainModel(_CHAINS).eval()
    out = fn(model, _SOURCE, 10, 1, 2)
    if type(out) is not torch.Tensor or out.dim() != 2 or out.shape[0] != 2:
        fail(tr("greedy_decode should return a (B, L) tensor of ids; got {type} {shape}", type=type(out).__name__,
                shape=tuple(out.shape) if type(out) is torch.Tensor else ""))
    rows = out.tolist()
    if rows == _EXPECTED:
        if model.trained or model.training:
            fail(tr("the model, handed over in eval mode, was switched to training mode: never call model.train() "
                    "while decoding (dropout would make every step random)"))
        if model.encode_calls != 1:
            fail(tr("model.encode was called {encode_calls} times: encode the source once, "
                    "before the loop, and reuse the memory at every step", encode_calls=model.encode_calls))
        if fn(_ChainModel(_CHAINS), torch.tensor([[3], [4]]), 3, 1, 2).tolist() != [r[:3] for r in _EXPECTED]:
            fail(tr("with max_len=3 the output should stop at 3 columns (the start token counts)"))
        expect_value_error(fn, model, torch.tensor([[3]]), 0, 1, 2, what="max_len=0")
        passed("greedy_decode")
        return
    if rows[0][0] != 1:
        fail(tr("every output row must begin with start_id (column 0): the decoder needs it as its first input, "
                "and the output includes it"))
    if rows[1][:5] == _EXPECTED[1] and rows[0][:3] == _EXPECTED[0][:3]:
        if len(rows[0]) > 5:
            fail(tr("generation did not stop: stop as soon as every row has produced end_id (here after 5 "
                    "columns, not max_len = 10)"))
        fail(tr("row 0 went on after producing end_id: once a row has produced end_id, write end_id in its "
                "later columns (the row is finished)"))
    fail(tr("expected {expected}, got {rows}. Take the next token from the logits of the LAST position "
            "(logits[:, -1].argmax(-1)) and append it to the sequence before the next decode call",
            expected=_EXPECTED, rows=rows))


# ---------------------------------------------------------------- label smoothing

SMOOTHING_TARGETS = torch.tensor([2, 0])
# --- stored numbers: label_smoothing_distribution ---
SMOOTHED = [[0.066667, 0.066667, 0.8, 0.066667], [0.8, 0.066667, 0.066667, 0.066667]]
# mistake: smoothing / C on every class (torch's convention)
SMOOTHED_OVER_C = [[0.05, 0.05, 0.85, 0.05], [0.85, 0.05, 0.05, 0.05]]
# mistake: adds 1 - smoothing to the target instead of setting it
SMOOTHED_TARGET_INCREASED = [[0.066667, 0.066667, 0.866667, 0.066667], [0.866667, 0.066667, 0.066667, 0.066667]]
# mistake: target and the other classes swapped
SMOOTHED_SWAPPED = [[0.8, 0.8, 0.066667, 0.8], [0.066667, 0.8, 0.8, 0.8]]
# --- end of stored numbers ---


@public_check
def check_label_smoothing_distribution(fn) -> None:
    out = fn(SMOOTHING_TARGETS, 4, 0.2)
    expect_tensor(out, (2, 4), "label_smoothing_distribution([2, 0], 4, 0.2)")
    diagnose(out, SMOOTHED, {
        tr("you spread smoothing / C over every class (that is torch's label_smoothing convention); "
           "here the wrong classes share smoothing / (C - 1) and the target gets exactly 1 - smoothing"):
            SMOOTHED_OVER_C,
        tr("the target entry should be SET to 1 - smoothing, not increased by it (rows must sum to 1)"):
            SMOOTHED_TARGET_INCREASED,
        tr("the target class gets 1 - smoothing and the others smoothing / (C - 1); you swapped them"):
            SMOOTHED_SWAPPED,
    }, "label_smoothing_distribution([2, 0], 4, 0.2)")
    if not close(fn(torch.tensor([1]), 3, 0.0), [[0.0, 1.0, 0.0]]):
        fail(tr("smoothing = 0 should give the one-hot row"))
    expect_value_error(fn, torch.tensor([0]), 3, 1.0, what="smoothing = 1")
    expect_value_error(fn, torch.tensor([0]), 3, -0.1, what="smoothing < 0")
    expect_value_error(fn, torch.tensor([0]), 1, 0.1, what="num_classes = 1")
    passed("label_smoothing_distribution")


LOSS_LOGITS = torch.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
LOSS_TARGETS = torch.tensor([0, -100, 2])  # the middle row is ignored
# --- stored numbers: label_smoothed_loss ---
SMOOTHED_LOSS = 0.245197
# mistake: averages over the ignored rows too
SMOOTHED_LOSS_ALL_ROWS = 0.163465
# mistake: cross-entropy with the smoothed target (no entropy term), not the KL
SMOOTHED_LOSS_NO_ENTROPY = 0.884229
# --- end of stored numbers ---


@public_check
def check_label_smoothed_loss(fn) -> None:
    avoid_library_call(fn, ("cross_entropy", "kl_div", "CrossEntropyLoss", "KLDivLoss"),
                       tr("write the loss yourself from log_softmax and your label_smoothing_distribution "
                          "(the grader gives zero to a solution that calls F.cross_entropy or F.kl_div)"))
    out = fn(LOSS_LOGITS, LOSS_TARGETS, 0.2)
    expect_tensor(out, (), "label_smoothed_loss(logits (3, 3), targets, 0.2)")
    diagnose(out, SMOOTHED_LOSS, {
        tr("you averaged over all N rows; the ignored rows count neither in the sum nor in the mean "
           "(divide by the number of kept rows)"): SMOOTHED_LOSS_ALL_ROWS,
        tr("this is the cross-entropy -sum q log p; the KL divergence also has the + sum q log q term "
           "(0 log 0 counts as 0: torch.xlogy(q, q) handles it)"): SMOOTHED_LOSS_NO_ENTROPY,
    }, "label_smoothed_loss(logits, [0, -100, 2], 0.2)")
    plain = torch.nn.functional.cross_entropy(LOSS_LOGITS, torch.tensor([0, 1, 2]))
    if not close(fn(LOSS_LOGITS, torch.tensor([0, 1, 2]), 0.0), plain):
        fail(tr("with smoothing = 0 the loss should equal the ordinary cross-entropy; take 0 * log 0 as 0"))
    big = fn(LOSS_LOGITS * 1e4, torch.tensor([0, 1, 2]), 0.1)
    if type(big) is torch.Tensor and not torch.isfinite(big):
        fail(tr("logits around 1e4 give inf or nan: use log_softmax (it subtracts the max) instead of log(softmax)"))
    expect_value_error(fn, LOSS_LOGITS, torch.tensor([0, 1, 2]), 1.0, what="smoothing = 1")
    passed("label_smoothed_loss")


# ---------------------------------------------------------------- noam_learning_rate

# noam_learning_rate(step, 512, 4000) at the steps the check looks at, and one step either side.
NOAM_STEPS = (1, 2, 3999, 4000, 4001)
# --- stored numbers: noam_learning_rate ---
NOAM_512_4000 = {1: 1.746928e-07, 2: 3.493856e-07, 3999: 0.0006985966, 4000: 0.0006987712, 4001: 0.0006986839}
# mistake: max instead of min of the two branches
NOAM_MAX_STEP_1 = 0.04419417
# mistake: warm-up branch step * warmup**-0.5 (wrong exponent)
NOAM_WARMUP_EXPONENT_STEP_1 = 0.0006987712
# --- end of stored numbers ---
OFF_BY_ONE = (tr("steps count from 1: use `step` exactly as given (step 1 is the first step), "
                 "without adding or subtracting one"))


@public_check
def check_noam_learning_rate(fn) -> None:
    peak, first = float(fn(4000, 512, 4000)), float(fn(1, 512, 4000))
    if math.isclose(first, NOAM_MAX_STEP_1, rel_tol=1e-4):
        mistake(tr("at step 1 the rate should be tiny (warm-up); you took the max of the two branches, take the min"))
    if math.isclose(first, NOAM_WARMUP_EXPONENT_STEP_1, rel_tol=1e-4):
        mistake(tr("the warm-up branch is step * warmup_steps**-1.5 (so the two branches meet at step = warmup_steps); "
                "you used the exponent -0.5"))
    if not math.isclose(first, NOAM_512_4000[1], rel_tol=1e-5):
        hint = tr(": you computed the rate of step 2; {off_by_one}", off_by_one=OFF_BY_ONE) if math.isclose(
            first, NOAM_512_4000[2], rel_tol=1e-5) else ""
        fail(tr("noam_learning_rate(1, 512, 4000) should be 512**-0.5 * 4000**-1.5 = {rate:.6e}, "
                "got {first:.6e}{hint}", rate=NOAM_512_4000[1], first=first, hint=hint))
    if not math.isclose(peak, NOAM_512_4000[4000], rel_tol=1e-5):
        shifted = [s for s in (3999, 4001) if math.isclose(peak, NOAM_512_4000[s], rel_tol=1e-5)]
        hint = ""
        if shifted:
            hint = tr(": that is the rate of step {step}; {off_by_one}", step=shifted[0], off_by_one=OFF_BY_ONE)
        fail(tr("the peak noam_learning_rate(4000, 512, 4000) should be {rate:.6e}, "
                "got {peak:.6e}{hint}", rate=NOAM_512_4000[4000], peak=peak, hint=hint))
    if not math.isclose(float(fn(16000, 512, 4000, factor=2.0)), 2 * 0.5 * peak, rel_tol=1e-4):
        fail(tr("after warm-up the rate falls as step**-0.5 (4x the steps, half the rate), times factor"))
    expect_value_error(fn, 0, 512, 4000, what=tr("step = 0 (steps count from 1)"))
    passed("noam_learning_rate")

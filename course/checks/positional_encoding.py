"""Public checks for chapter 03 (positional encoding).

Between the `# --- stored numbers` lines are what the reference solution gives on the fixed inputs
here, and what the usual mistakes give on the same inputs, which is how a failing check can name the
mistake; `python -m tests.snapshots --write` computes them again in the course repository.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from course.checks import (
    close,
    diagnose,
    expect_tensor,
    expect_value_error,
    fail,
    mistake,
    passed,
    public_check,
    tr,
)

TABLE_SHAPE = (3, 6)  # sinusoidal_positional_encoding(3, 6)
# --- stored numbers: sinusoidal_positional_encoding ---
TABLE_3x6 = [[0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
             [0.841471, 0.540302, 0.046399, 0.998923, 0.002154, 0.999998],
             [0.909297, -0.416147, 0.092698, 0.995694, 0.004309, 0.999991]]
# mistake: sin and cos swapped
TABLE_SWAPPED = [[1.0, 0.0, 1.0, 0.0, 1.0, 0.0],
                 [0.540302, 0.841471, 0.998923, 0.046399, 0.999998, 0.002154],
                 [-0.416147, 0.909297, 0.995694, 0.092698, 0.999991, 0.004309]]
# mistake: sin half then cos half (concatenated, not interleaved)
TABLE_CONCATENATED = [[0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
                      [0.841471, 0.046399, 0.002154, 0.540302, 0.998923, 0.999998],
                      [0.909297, 0.092698, 0.004309, -0.416147, 0.995694, 0.999991]]
# mistake: exponent 2j/d with j the column index (seed bug)
TABLE_COLUMN_EXPONENT = [[0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
                         [0.841471, 0.998923, 0.002154, 1.0, 5e-06, 1.0],
                         [0.909297, 0.995694, 0.004309, 1.0, 9e-06, 1.0]]
# mistake: exponent j/d per column (cos column gets its own frequency)
TABLE_J_OVER_D = [[0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
                  [0.841471, 0.976882, 0.046399, 0.99995, 0.002154, 1.0],
                  [0.909297, 0.908596, 0.092698, 0.9998, 0.004309, 1.0]]
# mistake: pair index i without the factor 2: 10000**(i/d)
TABLE_NO_FACTOR_2 = [[0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
                     [0.841471, 0.540302, 0.213781, 0.976882, 0.046399, 0.998923],
                     [0.909297, -0.416147, 0.417677, 0.908596, 0.092698, 0.995694]]
# mistake: positions start at 1
TABLE_FROM_1 = [[0.841471, 0.540302, 0.046399, 0.998923, 0.002154, 0.999998],
                [0.909297, -0.416147, 0.092698, 0.995694, 0.004309, 0.999991],
                [0.14112, -0.989992, 0.138798, 0.990321, 0.006463, 0.999979]]
# mistake: base 1000 instead of 10000
TABLE_BASE_1000 = [[0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
                   [0.841471, 0.540302, 0.099833, 0.995004, 0.01, 0.99995],
                   [0.909297, -0.416147, 0.198669, 0.980067, 0.019999, 0.9998]]
# mistake: positions divided by max_len
TABLE_OVER_MAX_LEN = [[0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
                      [0.327195, 0.944957, 0.015471, 0.99988, 0.000718, 1.0],
                      [0.61837, 0.785887, 0.030939, 0.999521, 0.001436, 0.999999]]
# --- end of stored numbers ---

TABLE_MISTAKES = {
    tr("sin and cos are swapped: the even columns 2i hold sin and the odd columns 2i+1 hold cos "
       "(row 0 must be [0, 1, 0, 1, ...])"): TABLE_SWAPPED,
    tr("the sin columns come first and the cos columns after (concatenated); interleave them: "
       "column 2i is the sin and column 2i+1 the cos of the same angle (P[:, 0::2], P[:, 1::2])"): TABLE_CONCATENATED,
    tr("each cos column has a different frequency from the sin column beside it: you computed the "
       "exponent 2j/d from the column index j; it is 2i/d with i the PAIR index, shared by columns 2i and 2i+1"):
        TABLE_COLUMN_EXPONENT,
    tr("each cos column has a different frequency from the sin column beside it: you used the exponent "
       "j/d per column j; columns 2i and 2i+1 share the exponent 2i/d"): TABLE_J_OVER_D,
    tr("the exponent is 2i/d with i the pair index: you used i/d and forgot the factor 2, so the "
       "frequencies fall off too slowly"): TABLE_NO_FACTOR_2,
    tr("positions start at 0, not 1: row 0 must be [0, 1, 0, 1, ...] (sin 0 = 0, cos 0 = 1)"): TABLE_FROM_1,
    tr("the base is 10000, not 1000"): TABLE_BASE_1000,
    tr("use the raw position p, not p / max_len: a row must not change when the table gets longer"): TABLE_OVER_MAX_LEN,
}

ROTATION_ARGS = (1, 4)  # relative_position_matrix(1, 4)
# --- stored numbers: relative_position_matrix ---
ROTATION_1x4 = [[0.540302, 0.841471, 0.0, 0.0],
                [-0.841471, 0.540302, 0.0, 0.0],
                [0.0, 0.0, 0.99995, 0.01],
                [0.0, 0.0, -0.01, 0.99995]]
# mistake: transposed blocks (rotates by -offset)
ROTATION_TRANSPOSED = [[0.540302, -0.841471, 0.0, 0.0],
                       [0.841471, 0.540302, 0.0, 0.0],
                       [0.0, 0.0, 0.99995, -0.01],
                       [0.0, 0.0, 0.01, 0.99995]]
# mistake: wrong frequency per block (10000**(i/d))
ROTATION_I_OVER_D = [[0.540302, 0.841471, 0.0, 0.0],
                     [-0.841471, 0.540302, 0.0, 0.0],
                     [0.0, 0.0, 0.995004, 0.099833],
                     [0.0, 0.0, -0.099833, 0.995004]]
# mistake: angle = offset in every block (frequency forgotten)
ROTATION_SAME_ANGLE = [[0.540302, 0.841471, 0.0, 0.0],
                       [-0.841471, 0.540302, 0.0, 0.0],
                       [0.0, 0.0, 0.540302, 0.841471],
                       [0.0, 0.0, -0.841471, 0.540302]]
# mistake: sin and cos swapped in the block
ROTATION_SWAPPED = [[0.841471, 0.540302, 0.0, 0.0],
                    [0.540302, -0.841471, 0.0, 0.0],
                    [0.0, 0.0, 0.01, 0.99995],
                    [0.0, 0.0, 0.99995, -0.01]]
# --- end of stored numbers ---

ROTATION_MISTAKES = {
    tr("your blocks are transposed: [[cos a, -sin a], [sin a, cos a]] moves the table BACK by the offset. "
       "Write sin(p + k) and cos(p + k) with the angle-addition formulas and read the matrix off"): ROTATION_TRANSPOSED,
    tr("block i must turn by offset * 10000**(-2i/d), the frequency of pair i; you used 10000**(-i/d)"):
        ROTATION_I_OVER_D,
    tr("every block turns by the same angle: block i must turn by offset times the frequency of pair i, "
       "10000**(-2i/d)"): ROTATION_SAME_ANGLE,
    tr("sin and cos are swapped inside the blocks: the diagonal of each block holds cos a"): ROTATION_SWAPPED,
}


def _float32(x, what: str) -> None:
    if x.dtype != torch.float32:
        fail(tr("{what} should be float32, got {dtype} (build it with float32 tensors)", what=what, dtype=x.dtype))


@public_check
def check_sinusoidal_positional_encoding(fn) -> None:
    P = fn(*TABLE_SHAPE)
    expect_tensor(P, (3, 6), "sinusoidal_positional_encoding(3, 6)")
    _float32(P, tr("the table"))
    diagnose(P, TABLE_3x6, TABLE_MISTAKES, "sinusoidal_positional_encoding(3, 6)")
    long = fn(50, 8)
    expect_tensor(long, (50, 8), "sinusoidal_positional_encoding(50, 8)")
    if not close((long * long).sum(-1), torch.full((50,), 4.0), atol=1e-3):
        fail(tr("every row should have squared norm d_model / 2 (each (sin, cos) pair has length 1)"))
    expect_value_error(fn, 10, 7, what=tr("an odd d_model"))
    expect_value_error(fn, 10, 0, what="d_model = 0")
    passed("sinusoidal_positional_encoding")


@public_check
def check_relative_position_matrix(fn) -> None:
    M = fn(*ROTATION_ARGS)
    expect_tensor(M, (4, 4), "relative_position_matrix(1, 4)")
    _float32(M, tr("the matrix"))
    off_blocks = M.detach().clone()
    off_blocks[0:2, 0:2] = 0
    off_blocks[2:4, 2:4] = 0
    if off_blocks.abs().max() > 1e-6:
        fail(tr("M should be block diagonal: only the 2x2 blocks on the diagonal (rows and columns 2i, 2i+1) "
                "are non-zero, because each (sin, cos) pair moves on its own"))
    diagnose(M, ROTATION_1x4, ROTATION_MISTAKES, "relative_position_matrix(1, 4)")
    M3 = fn(3, 8)
    if not close(M3 @ M3.T, torch.eye(8), atol=1e-4):
        fail(tr("M @ M.T should be the identity: each block is a rotation"))
    expect_value_error(fn, 1, 5, what=tr("an odd d_model"))
    passed("relative_position_matrix")


@public_check
def check_PositionalEncoding(cls) -> None:
    m = cls(6, max_len=10)
    if isinstance(getattr(m, "pe", None), nn.Parameter) or any(True for _ in m.parameters()):
        fail(tr("the sinusoidal table is fixed: store it with self.register_buffer('pe', table), "
                "not as an nn.Parameter (the optimiser must not change it)"))
    if "pe" not in dict(m.named_buffers()):
        fail(tr("register the table as a buffer named `pe`: self.register_buffer('pe', table). "
                "A plain attribute is neither saved in the state_dict nor moved by .to(device)"))
    expect_tensor(m.pe, (10, 6), "pe")
    if not close(m.pe[:3], TABLE_3x6):
        fail(tr("`pe` should be sinusoidal_positional_encoding(max_len, d_model); check that exercise first"))
    x = torch.zeros(2, 3, 6)
    try:
        out = m(x)
    except RuntimeError as err:
        fail(tr("forward(x) for x of shape (2, 3, 6) raised `{err}`: a sequence of T = 3 tokens takes rows 0, 1, 2 "
                "of the table, not all max_len = 10 of them", err=err))
    expect_tensor(out, (2, 3, 6), tr("the output for x of shape (2, 3, 6)"))
    if not close(out, torch.tensor(TABLE_3x6).expand(2, 3, 6)):
        fail(tr("forward(zeros (2, 3, 6)) should give rows 0, 1, 2 of the table for each sequence: token t gets "
                "row t"))
    expect_value_error(m, torch.zeros(1, 11, 6), what=tr("a sequence longer than max_len"))
    m = cls(6, max_len=10, dropout=0.5)
    total = 1 + m.pe[:4].expand(2, 4, 6)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        out = m.train()(torch.ones(2, 4, 6))
    kept = out != 0
    if kept.all() or not close(out[kept], 2 * total[kept]):
        fail(tr("in training mode dropout acts on the sum: each entry should be 0 or (x + pe) / (1 - p); "
                "apply self.dropout to the sum, not to x alone"))
    if not close(m.eval()(torch.ones(2, 4, 6)), total):
        fail(tr("in eval mode dropout does nothing: the output should be exactly x plus the table's rows 0..T-1"))
    passed("PositionalEncoding")


@public_check
def check_TokenEmbedding(cls) -> None:
    m = cls(5, 16)
    if not isinstance(getattr(m, "embedding", None), nn.Embedding):
        fail(tr("store the table as self.embedding = nn.Embedding(vocab_size, d_model)"))
    with torch.no_grad():
        m.embedding.weight.copy_(torch.arange(1.0, 81.0).reshape(5, 16))
    ids = torch.tensor([[1, 4], [0, 1]])
    out = m(ids)
    expect_tensor(out, (2, 2, 16), tr("the output for ids of shape (2, 2)"))
    _float32(out, tr("the output"))
    ratio = (out / m.embedding.weight[ids]).mean().item()
    if math.isclose(ratio, 4.0, rel_tol=1e-4):
        passed("TokenEmbedding")
        return
    hints = {1.0: tr("you forgot to multiply by sqrt(d_model)"),
             16.0: tr("multiply by sqrt(d_model), not by d_model"),
             0.25: tr("multiply by sqrt(d_model); you divided by it")}
    for value, hint in hints.items():
        if math.isclose(ratio, value, rel_tol=1e-4):
            mistake(hint)
    fail(tr("with d_model = 16 the looked-up rows should be scaled by 4; yours are scaled by {ratio:.4g}", ratio=ratio))


LEARNED_TABLE = torch.arange(20.0).reshape(5, 4)
LEARNED_X = torch.full((2, 3, 4), 100.0)
# --- stored numbers: LearnedPositionalEmbedding ---
LEARNED = [[[100.0, 101.0, 102.0, 103.0], [104.0, 105.0, 106.0, 107.0], [108.0, 109.0, 110.0, 111.0]],
           [[100.0, 101.0, 102.0, 103.0], [104.0, 105.0, 106.0, 107.0], [108.0, 109.0, 110.0, 111.0]]]
# mistake: returns E[:T] without adding x
LEARNED_NO_X = [[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]],
                [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]]]
# mistake: rows E[1..T] of a table of max_len rows (the catalogue's positions-from-1 keeps max_len + 1 rows)
LEARNED_FROM_1 = [[[104.0, 105.0, 106.0, 107.0], [108.0, 109.0, 110.0, 111.0], [112.0, 113.0, 114.0, 115.0]],
                  [[104.0, 105.0, 106.0, 107.0], [108.0, 109.0, 110.0, 111.0], [112.0, 113.0, 114.0, 115.0]]]
# mistake: returns x without the position rows
LEARNED_JUST_X = [[[100.0, 100.0, 100.0, 100.0], [100.0, 100.0, 100.0, 100.0], [100.0, 100.0, 100.0, 100.0]],
                  [[100.0, 100.0, 100.0, 100.0], [100.0, 100.0, 100.0, 100.0], [100.0, 100.0, 100.0, 100.0]]]
# --- end of stored numbers ---


@public_check
def check_LearnedPositionalEmbedding(cls) -> None:
    m = cls(5, 4)
    params = dict(m.named_parameters())
    if "embedding.weight" not in params:
        fail(tr("store the table as self.embedding = nn.Embedding(max_len, d_model); parameters: {params}",
                params=sorted(params)))
    if tuple(params["embedding.weight"].shape) != (5, 4):
        fail(tr("embedding.weight should have shape (max_len, d_model) = (5, 4), "
                "got {shape}", shape=tuple(params['embedding.weight'].shape)))
    if not params["embedding.weight"].requires_grad:
        fail(tr("the position table is learned: embedding.weight must be trainable (requires_grad=True)"))
    with torch.no_grad():
        m.embedding.weight.copy_(LEARNED_TABLE)
    diagnose(m(LEARNED_X), LEARNED, {
        tr("you returned the position rows without adding x"): LEARNED_NO_X,
        tr("positions start at 0: add rows E[0], ..., E[T-1]"): LEARNED_FROM_1,
        tr("the output is just x: add to token t the position row E[t]"): LEARNED_JUST_X,
    }, tr("forward(x) with x = 100 everywhere and E = arange(20).reshape(5, 4)"))
    expect_value_error(m, torch.zeros(1, 6, 4), what=tr("a sequence longer than max_len"))
    passed("LearnedPositionalEmbedding")

"""Hidden tests for chapter 03: positional encoding.

The oracle table is written here independently, one entry at a time in float64, from the
formula P[p, 2i] = sin(p / 10000**(2i/D)), P[p, 2i+1] = cos(p / 10000**(2i/D)).
"""
import math

import torch
import torch.nn as nn

from grader.boundary.spec import CORE, Exercise, assert_raises_value_error, assert_tensor, randn


def oracle_table(max_len: int, d_model: int) -> torch.Tensor:
    P = torch.zeros(max_len, d_model, dtype=torch.float64)
    for p in range(max_len):
        for i in range(d_model // 2):
            angle = p / 10000.0 ** (2 * i / d_model)
            P[p, 2 * i] = math.sin(angle)
            P[p, 2 * i + 1] = math.cos(angle)
    return P.float()


def table_stand_in(max_len: int, d_model: int) -> torch.Tensor:
    """A correct, fast sinusoidal table that PositionalEncoding uses while it is graded."""
    if max_len < 1 or d_model < 2 or d_model % 2:
        raise ValueError(f"need max_len >= 1 and an even d_model >= 2, got {max_len}, {d_model}")
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    angle = position / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model).float()


def oracle_rotation(offset: int, d_model: int) -> torch.Tensor:
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        a = offset / 10000.0 ** (2 * i / d_model)
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = math.cos(a), math.sin(a)
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = -math.sin(a), math.cos(a)
    return M.float()


def assert_float32(actual, shape: tuple, what: str) -> None:
    """Exact type, float32 and shape, before any values are compared."""
    assert_tensor(actual, torch.zeros(shape), atol=math.inf, what=what)


def load_weight(module: nn.Module, key: str, weight: torch.Tensor) -> None:
    """Set one documented parameter through load_state_dict (extra buffers of the learner are fine)."""
    state = module.state_dict()
    if key not in state:
        raise AssertionError(f"the module's state_dict has no `{key}`; keys are {sorted(state)}")
    if tuple(state[key].shape) != tuple(weight.shape):
        raise AssertionError(f"`{key}` has shape {tuple(state[key].shape)}, expected {tuple(weight.shape)}")
    module.load_state_dict({key: weight}, strict=False)


# ---------------------------------------------------------------- sinusoidal_positional_encoding
sinusoidal_positional_encoding = Exercise("sinusoidal_positional_encoding", points=3)


@sinusoidal_positional_encoding.check("fixed values of a small table (max_len=4, d_model=6): interleaved sin, cos",
                                      states=("interleaved", "sin comes first"), weight=CORE)
def _(fn):
    assert_tensor(fn(4, 6), oracle_table(4, 6), atol=1e-6, what="sinusoidal_positional_encoding(4, 6)")


@sinusoidal_positional_encoding.check("a larger table (max_len=128, d_model=32) follows the formula", weight=CORE)
def _(fn):
    assert_tensor(fn(128, 32), oracle_table(128, 32), atol=1e-4,
                  what="sinusoidal_positional_encoding(128, 32)")


@sinusoidal_positional_encoding.check("every row has squared norm d_model / 2 "
                                      "(each pair is a point on the unit circle)")
def _(fn):
    P = fn(50, 10)
    assert_tensor((P * P).sum(-1), torch.full((50,), 5.0), atol=1e-4, what="squared row norms")


@sinusoidal_positional_encoding.check("P[t] . P[t + k] depends on the distance k only, not on t")
def _(fn):
    P = fn(70, 16)
    G = P @ P.T  # (70, 70)
    for k in range(0, 21):
        along = torch.diagonal(G, offset=k)  # G[t, t + k] for every t
        assert_tensor(along, torch.full_like(along, float(G[0, k])), atol=1e-3,
                      what=f"P[t] . P[t + {k}] over t")


@sinusoidal_positional_encoding.check("the table does not depend on max_len: rows of a longer table equal the shorter "
                                      "one")
def _(fn):
    short, long = fn(5, 8), fn(40, 8)
    assert_tensor(long[:5], short, atol=1e-6, what="first 5 rows of sinusoidal_positional_encoding(40, 8)")


@sinusoidal_positional_encoding.side_check("odd d_model raises ValueError")
def _(fn):
    assert_raises_value_error(fn, 10, 7)
    assert_raises_value_error(fn, 3, 1)


@sinusoidal_positional_encoding.side_check("non-positive sizes raise ValueError")
def _(fn):
    assert_raises_value_error(fn, 10, 0)
    assert_raises_value_error(fn, 0, 8)
    assert_raises_value_error(fn, -3, 8)


# ---------------------------------------------------------------- relative_position_matrix
relative_position_matrix = Exercise("relative_position_matrix", points=3)


@relative_position_matrix.check("fixed values for offset=1, d_model=4")
def _(fn):
    assert_tensor(fn(1, 4), oracle_rotation(1, 4), atol=1e-6, what="relative_position_matrix(1, 4)")


@relative_position_matrix.check("M @ P[p] == P[p + offset] for many positions and offsets (d_model=16)")
def _(fn):
    P = oracle_table(60, 16)
    for offset in (1, 5, -3, 0, 17):
        M = fn(offset, 16)
        assert_tensor(M, oracle_rotation(offset, 16), atol=1e-4, what=f"relative_position_matrix({offset}, 16)")
        rows = [p for p in range(60) if 0 <= p + offset < 60]
        moved = P[rows] @ M.T  # each row p becomes (M @ P[p])
        assert_tensor(moved, P[[p + offset for p in rows]], atol=1e-4,
                      what=f"M @ P[p] with offset {offset}")


@relative_position_matrix.check("block diagonal: every entry outside the 2x2 diagonal blocks is zero",
                                states=("block diagonal", "float32"))
def _(fn):
    M = fn(7, 12)
    assert_float32(M, (12, 12), what="relative_position_matrix(7, 12)")
    block = torch.block_diag(*[torch.ones(2, 2)] * 6).bool()
    outside = M[~block]
    assert_tensor(outside, torch.zeros_like(outside), atol=0.0, rtol=0.0, what="entries outside the blocks")


@relative_position_matrix.check("orthogonal: M @ M.T is the identity (a rotation keeps lengths)")
def _(fn):
    M = fn(7, 12)
    assert_tensor(M @ M.T, torch.eye(12), atol=1e-5, what="M @ M.T")


@relative_position_matrix.check("shifting by a then by b equals shifting by a + b; offset 0 is the identity")
def _(fn):
    assert_tensor(fn(3, 10) @ fn(4, 10), oracle_rotation(7, 10), atol=1e-5, what="M(3) @ M(4)")
    assert_tensor(fn(0, 10), torch.eye(10), atol=1e-7, what="relative_position_matrix(0, 10)")


@relative_position_matrix.check("a negative offset undoes a positive one: M(-k) == M(k).T", states=("negative too",))
def _(fn):
    assert_tensor(fn(-6, 8), oracle_rotation(-6, 8), atol=1e-5, what="relative_position_matrix(-6, 8)")
    assert_tensor(fn(-6, 8), fn(6, 8).T, atol=1e-6, what="M(-6) vs M(6).T")


@relative_position_matrix.side_check("odd or non-positive d_model raises ValueError")
def _(fn):
    assert_raises_value_error(fn, 1, 5)
    assert_raises_value_error(fn, 1, 0)


# ---------------------------------------------------------------- PositionalEncoding
PositionalEncoding = Exercise("PositionalEncoding", points=2,
                              stand_ins={"sinusoidal_positional_encoding": table_stand_in})


@PositionalEncoding.check("`pe` is a buffer of shape (max_len, D) saved in the state_dict, and there are no parameters",
                          states=("registered as a buffer", "saved in the state_dict", "not a trained parameter"))
def _(cls):
    m = cls(8, max_len=20)
    buffers = dict(m.named_buffers())
    if "pe" not in buffers:
        raise AssertionError("`pe` should be registered with self.register_buffer('pe', table); "
                             f"buffers found: {sorted(buffers)}")
    if "pe" not in m.state_dict():
        raise AssertionError("`pe` should be saved in the state_dict (a persistent buffer)")
    params = [name for name, _ in m.named_parameters()]
    if params:
        raise AssertionError(f"the fixed table must not be a trainable parameter; parameters found: {params}")
    assert_float32(m.pe, (20, 8), what="pe")


@PositionalEncoding.check("`pe` holds sinusoidal_positional_encoding(max_len, d_model)")
def _(cls):
    m = cls(8, max_len=20)
    assert_tensor(m.pe, oracle_table(20, 8), atol=1e-5, what="pe")


@PositionalEncoding.check("forward adds pe[:T] to every sequence of the batch (T < max_len, dropout=0)")
def _(cls):
    m = cls(8, max_len=20)
    pe = m.pe.detach().clone()
    x = randn(3, 5, 8, seed=31)
    assert_tensor(m(x), x + pe[:5], atol=1e-6, what="PositionalEncoding(8, max_len=20)(x) for x (3, 5, 8)")


@PositionalEncoding.check("T == max_len works; T > max_len raises ValueError")
def _(cls):
    m = cls(6, max_len=7)
    pe = m.pe.detach().clone()
    x = randn(2, 7, 6, seed=32)
    assert_tensor(m(x), x + pe, atol=1e-6, what="output for T == max_len")
    assert_raises_value_error(m, randn(2, 8, 6, seed=33))


@PositionalEncoding.check("with dropout > 0 in eval mode the output is exactly x + pe[:T]")
def _(cls):
    m = cls(8, max_len=16, dropout=0.5).eval()
    pe = m.pe.detach().clone()
    x = randn(2, 9, 8, seed=34)
    assert_tensor(m(x), x + pe[:9], atol=1e-6, what="eval-mode output")


@PositionalEncoding.check("in training mode dropout acts on the sum: each entry is 0 or (x + pe) / (1 - p)")
def _(cls):
    m = cls(8, max_len=16, dropout=0.5).train()
    pe = m.pe.detach().clone()
    x = randn(4, 10, 8, seed=35)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        out = m(x)
    assert_float32(out, (4, 10, 8), what="training-mode output")
    full = (x + pe[:10]) / 0.5
    zeros = out == 0
    if not 0.3 < zeros.float().mean().item() < 0.7:
        raise AssertionError(f"with dropout=0.5 about half the entries should be zeroed; "
                             f"{zeros.float().mean().item():.0%} were")
    assert_tensor(out[~zeros], full[~zeros], atol=1e-5, what="the entries dropout kept")


@PositionalEncoding.check("module.double() converts pe with the module (it is a buffer, not a plain attribute)",
                          states=("registered as a buffer",))
def _(cls):
    m = cls(4, max_len=10).double()
    if m.pe.dtype != torch.float64:
        raise AssertionError("after module.double() `pe` is still float32: register it as a buffer")
    x = randn(1, 3, 4, seed=36).double()
    assert_tensor(m(x), x + m.pe[:3].detach(), atol=1e-12, what="float64 output")


# ---------------------------------------------------------------- TokenEmbedding
TokenEmbedding = Exercise("TokenEmbedding", points=1)


@TokenEmbedding.check("`embedding` is an nn.Embedding(vocab_size, d_model) with a trainable weight",
                      states=("embedding: an nn.Embedding(V, D)",))
def _(cls):
    m = cls(11, 6)
    if not isinstance(getattr(m, "embedding", None), nn.Embedding):
        raise AssertionError("the table should be `self.embedding = nn.Embedding(vocab_size, d_model)`")
    params = dict(m.named_parameters())
    if "embedding.weight" not in params or tuple(params["embedding.weight"].shape) != (11, 6):
        raise AssertionError(f"expected a parameter embedding.weight of shape (11, 6); found {sorted(params)}")


@TokenEmbedding.check("forward is weight[ids] * sqrt(d_model) (d_model=16, the factor is 4)")
def _(cls):
    m = cls(9, 16)
    W = randn(9, 16, seed=41)
    load_weight(m, "embedding.weight", W)
    ids = torch.tensor([[1, 2, 8], [0, 2, 5]])
    assert_tensor(m(ids), W[ids] * 4.0, atol=1e-5, what="TokenEmbedding(9, 16)(ids) for ids (2, 3)")


@TokenEmbedding.check("d_model that is not a perfect square (d_model=10): the factor is sqrt(10)")
def _(cls):
    m = cls(5, 10)
    W = randn(5, 10, seed=42)
    load_weight(m, "embedding.weight", W)
    ids = torch.tensor([[4, 0, 0, 3]])
    assert_tensor(m(ids), W[ids] * math.sqrt(10), atol=1e-5, what="TokenEmbedding(5, 10)(ids)")


@TokenEmbedding.check("accepts int32 ids as well as int64 and returns float32 (B, T, D)")
def _(cls):
    m = cls(7, 4)
    W = randn(7, 4, seed=43)
    load_weight(m, "embedding.weight", W)
    ids = torch.tensor([[6, 1], [2, 2], [0, 3]], dtype=torch.int32)
    assert_tensor(m(ids), W[ids.long()] * 2.0, atol=1e-5, what="output for int32 ids")


@TokenEmbedding.check("the gradient reaches the table, scaled by sqrt(d_model)", states=("embedding(ids) * sqrt(D)",))
def _(cls):
    m = cls(6, 9)
    load_weight(m, "embedding.weight", randn(6, 9, seed=44))
    ids = torch.tensor([[1, 1, 4]])
    m(ids).sum().backward()
    grad = m.embedding.weight.grad
    expected = torch.zeros(6, 9)
    expected[1], expected[4] = 2 * 3.0, 3.0
    assert_tensor(grad, expected, atol=1e-5, what="embedding.weight.grad")


# ---------------------------------------------------------------- LearnedPositionalEmbedding
LearnedPositionalEmbedding = Exercise("LearnedPositionalEmbedding", points=2)


@LearnedPositionalEmbedding.check("`embedding.weight` is a trainable parameter of shape (max_len, D)",
                                  states=("embedding: an nn.Embedding(max_len, D)",))
def _(cls):
    m = cls(10, 6)
    params = dict(m.named_parameters())
    if "embedding.weight" not in params:
        raise AssertionError("the position table should be `self.embedding = nn.Embedding(max_len, d_model)`; "
                             f"parameters found: {sorted(params)}")
    if tuple(params["embedding.weight"].shape) != (10, 6):
        raise AssertionError(f"embedding.weight has shape {tuple(params['embedding.weight'].shape)}, expected (10, 6)")
    if not params["embedding.weight"].requires_grad:
        raise AssertionError("embedding.weight should be trainable (requires_grad=True)")


@LearnedPositionalEmbedding.check("forward returns x + E[:T] for every sequence of the batch")
def _(cls):
    m = cls(10, 6)
    E = randn(10, 6, seed=51)
    load_weight(m, "embedding.weight", E)
    x = randn(3, 4, 6, seed=52)
    assert_tensor(m(x), x + E[:4], atol=1e-6, what="LearnedPositionalEmbedding(10, 6)(x) for x (3, 4, 6)")


@LearnedPositionalEmbedding.check("T == max_len uses every row; T > max_len raises ValueError")
def _(cls):
    m = cls(5, 4)
    E = randn(5, 4, seed=53)
    load_weight(m, "embedding.weight", E)
    x = randn(2, 5, 4, seed=54)
    assert_tensor(m(x), x + E, atol=1e-6, what="output for T == max_len")
    assert_raises_value_error(m, randn(2, 6, 4, seed=55))


@LearnedPositionalEmbedding.check("gradients reach exactly the rows of the positions used")
def _(cls):
    m = cls(8, 3)
    load_weight(m, "embedding.weight", randn(8, 3, seed=56))
    m(randn(2, 5, 3, seed=57)).sum().backward()
    expected = torch.zeros(8, 3)
    expected[:5] = 2.0  # each of the 5 positions is used once per sequence, 2 sequences
    assert_tensor(m.embedding.weight.grad, expected, atol=1e-6, what="embedding.weight.grad")


@LearnedPositionalEmbedding.check("the gradient with respect to x passes through unchanged (B=1)")
def _(cls):
    m = cls(6, 4)
    load_weight(m, "embedding.weight", randn(6, 4, seed=58))
    x = randn(1, 3, 4, seed=59).requires_grad_()
    out = m(x)
    assert_tensor(out, x.detach() + m.embedding.weight.detach()[:3], atol=1e-6, what="output for B=1")
    out.sum().backward()
    assert_tensor(x.grad, torch.ones(1, 3, 4), atol=0.0, rtol=0.0, what="x.grad")

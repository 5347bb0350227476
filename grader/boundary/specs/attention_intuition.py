"""Hidden tests for chapter 01: attention before Transformers."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.boundary.spec import Exercise, assert_pair, assert_raises_value_error, assert_tensor, randn, seeded

SQRT_2PI = math.sqrt(2 * math.pi)

# ---------------------------------------------------------------------------------------------
gaussian_kernel = Exercise("gaussian_kernel", points=1,
                           forbidden=("torch.distributions.Normal", "torch.distributions.normal.Normal"))


@gaussian_kernel.check("standard normal density at fixed points")
def _(fn):
    u = torch.tensor([0.0, 1.0, -2.0, 0.5])
    expected = torch.tensor([0.3989422804, 0.2419707245, 0.0539909665, 0.3520653268])
    assert_tensor(fn(u), expected, atol=1e-6)


@gaussian_kernel.check("integrates to 1 (the 1/sqrt(2 pi) factor is there)")
def _(fn):
    u = torch.linspace(-8, 8, 4001)
    area = torch.trapezoid(fn(u), u).item()
    assert abs(area - 1) < 1e-4, f"the kernel integrates to {area:.4f}, not 1"


@gaussian_kernel.check("symmetric: K(u) == K(-u)")
def _(fn):
    u = randn(50, seed=11) * 3
    assert_tensor(fn(-u), fn(u).detach(), atol=1e-7, what="K(-u)")


@gaussian_kernel.check("keeps the shape of a batched input and matches the normal density", states=("same shape",))
def _(fn):
    u = randn(2, 3, 4, seed=12) * 2
    expected = torch.distributions.Normal(0.0, 1.0).log_prob(u).exp()
    assert_tensor(fn(u), expected, atol=1e-6)


@gaussian_kernel.check("far in the tails it is 0, not NaN")
def _(fn):
    u = torch.tensor([-60.0, 60.0, 1e4])
    assert_tensor(fn(u), torch.zeros(3), atol=1e-30)


# ---------------------------------------------------------------------------------------------
nadaraya_watson = Exercise("nadaraya_watson", points=3)


def nw_oracle(x_query, x_train, y_train, bandwidth):
    weights = F.softmax(-(((x_query[:, None] - x_train[None, :]) / bandwidth) ** 2) / 2, dim=-1)
    return weights @ y_train, weights


@nadaraya_watson.check("(y_hat (Q,), weights (Q, N)) match the softmax of -((x - x_i)/h)**2/2, Q != N")
def _(fn):
    x_query, x_train, y_train = randn(7, seed=21), randn(5, seed=22), randn(5, seed=23)
    y_hat, weights = assert_pair(fn(x_query, x_train, y_train, 0.7))
    y_ref, w_ref = nw_oracle(x_query, x_train, y_train, 0.7)
    assert_tensor(weights, w_ref, atol=1e-6, what="weights")
    assert_tensor(y_hat, y_ref, atol=1e-5, what="y_hat")


@nadaraya_watson.check("each row of weights sums to 1 over the training points (not over the queries)",
                       states=("sums to 1 over the N training points",))
def _(fn):
    x_query = torch.rand(3, generator=seeded(24)) * 5  # Q = 3
    x_train = torch.rand(8, generator=seeded(25)) * 5  # N = 8
    y_train = randn(8, seed=26)
    _, weights = assert_pair(fn(x_query, x_train, y_train, 0.5))
    assert_tensor(weights.sum(dim=-1), torch.ones(3), atol=1e-5, what="row sums of weights")
    assert bool((weights >= 0).all()), "weights must be non-negative"


@nadaraya_watson.check("the bandwidth divides the difference (fixed values at h = 0.5)")
def _(fn):
    # Scores 0 and -((0 - 1) / 0.5)**2 / 2 = -2, so the weights are [1, e^-2] / (1 + e^-2).
    w0 = 1 / (1 + math.exp(-2))
    y_hat, weights = assert_pair(fn(torch.tensor([0.0]), torch.tensor([0.0, 1.0]), torch.tensor([1.0, 3.0]), 0.5))
    assert_tensor(weights, torch.tensor([[w0, 1 - w0]]), atol=1e-6, what="weights")
    assert_tensor(y_hat, torch.tensor([w0 + 3 * (1 - w0)]), atol=1e-5, what="y_hat")


@nadaraya_watson.check("a huge bandwidth gives average pooling: every prediction is mean(y)")
def _(fn):
    x_query, x_train, y_train = torch.linspace(0, 5, 6), torch.rand(10, generator=seeded(27)) * 5, randn(10, seed=28)
    y_hat, weights = assert_pair(fn(x_query, x_train, y_train, 1e5))
    assert_tensor(weights, torch.full((6, 10), 0.1), atol=1e-6, what="weights")
    assert_tensor(y_hat, y_train.mean().expand(6), atol=1e-5, what="y_hat")


@nadaraya_watson.check("predictions lie within [min y, max y]")
def _(fn):
    x_train = torch.sort(torch.rand(40, generator=seeded(29)) * 5).values
    y_train = 2 * torch.sin(x_train) + x_train + 0.5 * randn(40, seed=30)
    y_hat, _ = assert_pair(fn(torch.arange(-1, 6, 0.1), x_train, y_train, 0.3))
    assert bool(torch.isfinite(y_hat).all()), "y_hat has NaN or inf"
    assert y_hat.min() >= y_train.min() - 1e-5 and y_hat.max() <= y_train.max() + 1e-5, \
        "a weighted average of the y_train values must lie between their min and max"


@nadaraya_watson.check("far-away queries with a small bandwidth stay finite (nearest point's y)",
                       states=("as a softmax of the scores", "underflows"))
def _(fn):
    x_train, y_train = torch.arange(5.0), torch.tensor([4.0, -1.0, 2.0, 0.5, 3.0])
    y_hat, weights = assert_pair(fn(torch.tensor([-10.0, 20.0]), x_train, y_train, 0.1))
    assert bool(torch.isfinite(weights).all()), \
        "weights are NaN: exp of scores around -1e4 underflows to 0/0; use a (max-shifted) softmax"
    assert_tensor(y_hat, torch.tensor([4.0, 3.0]), atol=1e-5, what="y_hat")


@nadaraya_watson.side_check("a bandwidth <= 0 raises ValueError")
def _(fn):
    x = torch.arange(3.0)
    assert_raises_value_error(fn, x, x, x, 0.0)
    assert_raises_value_error(fn, x, x, x, -1.0)


@nadaraya_watson.check("a 0-dim tensor bandwidth works and passes gradients back to it",
                       states=("0-dim tensor", "can be learned"))
def _(fn):
    x_query, x_train, y_train = randn(4, seed=31), randn(6, seed=32), randn(6, seed=33)
    h = torch.tensor(0.8, requires_grad=True)
    y_hat, _ = assert_pair(fn(x_query, x_train, y_train, h))
    y_ref, _ = nw_oracle(x_query, x_train, y_train, 0.8)
    assert_tensor(y_hat, y_ref, atol=1e-5, what="y_hat")
    if not y_hat.requires_grad:
        raise AssertionError("y_hat does not depend on the bandwidth tensor (was it turned into a float?)")
    y_hat.sum().backward()
    h_ref = torch.tensor(0.8, requires_grad=True)
    nw_oracle(x_query, x_train, y_train, h_ref)[0].sum().backward()
    assert h.grad is not None and abs(h.grad.item() - h_ref.grad.item()) < 1e-4, \
        f"gradient w.r.t. the bandwidth is {h.grad}, expected {h_ref.grad.item():.5f}"


# ---------------------------------------------------------------------------------------------
dot_product_score = Exercise("dot_product_score", points=1)


@dot_product_score.check("unbatched (T, d) x (S, d) -> (T, S), T != S")
def _(fn):
    q, k = randn(3, 5, seed=41), randn(4, 5, seed=42)
    assert_tensor(fn(q, k), torch.matmul(q, k.T), atol=1e-5)


@dot_product_score.check("batched (B, H, T, d) x (B, H, S, d) -> (B, H, T, S)", states=("(..., T, d)",))
def _(fn):
    q, k = randn(2, 3, 4, 5, seed=43), randn(2, 3, 6, 5, seed=44)
    assert_tensor(fn(q, k), torch.matmul(q, k.transpose(-1, -2)), atol=1e-5)


@dot_product_score.check("d = 1 at fixed values")
def _(fn):
    q, k = torch.tensor([[1.0], [2.0]]), torch.tensor([[3.0], [-1.0], [0.5]])
    assert_tensor(fn(q, k), torch.tensor([[3.0, -1.0, 0.5], [6.0, -2.0, 1.0]]))


@dot_product_score.side_check("different feature sizes raise ValueError")
def _(fn):
    assert_raises_value_error(fn, randn(3, 4, seed=45), randn(3, 5, seed=46))


# ---------------------------------------------------------------------------------------------
scaled_dot_product_score = Exercise("scaled_dot_product_score", points=1)


@scaled_dot_product_score.check("unbatched: divided by sqrt(d) (d = 9, T = 2, S = 5)")
def _(fn):
    q, k = randn(2, 9, seed=51), randn(5, 9, seed=52)
    assert_tensor(fn(q, k), torch.matmul(q, k.T) / 3, atol=1e-5)


@scaled_dot_product_score.check("batched (B, T, d) x (B, S, d), d = 16", states=("(..., T, d)",))
def _(fn):
    q, k = randn(2, 3, 16, seed=53), randn(2, 4, 16, seed=54)
    assert_tensor(fn(q, k), torch.matmul(q, k.transpose(-1, -2)) / 4, atol=1e-5)


@scaled_dot_product_score.check("fixed values at d = 4")
def _(fn):
    q, k = torch.ones(1, 4), torch.tensor([[1.0, 1.0, 1.0, 1.0], [2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, -3.0]])
    assert_tensor(fn(q, k), torch.tensor([[2.0, 1.0, -1.5]]))


@scaled_dot_product_score.side_check("different feature sizes raise ValueError")
def _(fn):
    assert_raises_value_error(fn, randn(2, 3, seed=55), randn(2, 4, seed=56))


# ---------------------------------------------------------------------------------------------
GeneralScore = Exercise("GeneralScore", points=2)


def bilinear_oracle(W, q, k):
    """score[..., t, s] = q_t W k_s through F.bilinear, every (t, s) pair expanded."""
    T, S = q.shape[-2], k.shape[-2]
    # torch.broadcast_shapes would check its shapes with torch's symbolic shapes (a first import of sympy)
    lead = (torch.zeros(q.shape[:-2]) + torch.zeros(k.shape[:-2])).shape
    qe = q.unsqueeze(-2).expand(*lead, T, S, q.shape[-1])
    ke = k.unsqueeze(-3).expand(*lead, T, S, k.shape[-1])
    return F.bilinear(qe, ke, W.unsqueeze(0)).squeeze(-1)


def general_with(cls, dq, dk, seed):
    module = cls(dq, dk)
    W = randn(dq, dk, seed=seed)
    try:
        module.load_state_dict({"W": W}, strict=True)
    except RuntimeError as err:
        raise AssertionError(f"load_state_dict({{'W': (query_dim, key_dim)}}) failed: {str(err).splitlines()[0]} "
                             f"(keys: {sorted(module.state_dict())})") from None
    return module, W


@GeneralScore.check("W is the only parameter, an nn.Parameter of shape (query_dim, key_dim): no bias",
                    states=("W: nn.Parameter", "(query_dim, key_dim)", "no bias"), part="__init__")
def _(cls):
    module = cls(4, 3)
    assert isinstance(module, nn.Module), "GeneralScore should be an nn.Module"
    params = {name: tuple(p.shape) for name, p in module.named_parameters()}
    assert params == {"W": (4, 3)}, \
        f"the parameters should be exactly W of shape (query_dim, key_dim) = (4, 3); found {params}"
    general_with(cls, 4, 3, seed=101)


@GeneralScore.check("unbatched scores with a set W, query_dim != key_dim, T != S (compared with F.bilinear)")
def _(cls):
    module, W = general_with(cls, 4, 2, seed=102)
    q, k = randn(3, 4, seed=103), randn(5, 2, seed=104)
    assert_tensor(module(q, k), bilinear_oracle(W, q, k), atol=1e-5)


@GeneralScore.check("batched (B, H, T, query_dim) x (B, H, S, key_dim) -> (B, H, T, S)")
def _(cls):
    module, W = general_with(cls, 3, 5, seed=105)
    q, k = randn(2, 3, 4, 3, seed=106), randn(2, 3, 6, 5, seed=107)
    assert_tensor(module(q, k), bilinear_oracle(W, q, k), atol=1e-5)


@GeneralScore.check("square W that is not symmetric: q W k, not q W^T k (fixed values)", states=("q_t W k_s",))
def _(cls):
    module, _ = general_with(cls, 2, 2, seed=108)
    module.load_state_dict({"W": torch.tensor([[1.0, 2.0], [0.0, 3.0]])})
    q, k = torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]])
    # q W = [1, 5], dotted with each key: 1, 5, -3 (q W^T would give 3, 3, 3)
    assert_tensor(module(q, k), torch.tensor([[1.0, 5.0, -3.0]]))


@GeneralScore.check("no 1/sqrt(d) scaling: with W the identity the scores are the plain dot products",
                    states=("no 1/sqrt(d) scaling",))
def _(cls):
    module, _ = general_with(cls, 16, 16, seed=109)
    module.load_state_dict({"W": torch.eye(16)})
    q, k = randn(2, 3, 16, seed=110), randn(2, 4, 16, seed=111)
    assert_tensor(module(q, k), q @ k.transpose(-1, -2), atol=1e-5)


@GeneralScore.check("the scores are differentiable w.r.t. W")
def _(cls):
    module, W = general_with(cls, 3, 2, seed=112)
    q, k = randn(4, 3, seed=113), randn(5, 2, seed=114)
    upstream = randn(4, 5, seed=115)
    (module(q, k) * upstream).sum().backward()
    if module.W.grad is None:
        raise AssertionError("no gradient reaches W")
    assert_tensor(module.W.grad, q.T @ upstream @ k, atol=1e-5, what="the gradient of W")


@GeneralScore.side_check("q or k with the wrong feature size raises ValueError", states=("ValueError",))
def _(cls):
    module = cls(3, 2)
    assert_raises_value_error(module, randn(2, 2, seed=116), randn(3, 2, seed=117))
    assert_raises_value_error(module, randn(2, 3, seed=118), randn(3, 3, seed=119))


# ---------------------------------------------------------------------------------------------
AdditiveScore = Exercise("AdditiveScore", points=3)


def additive_oracle(Wq, Wk, v, q, k):
    """score[..., t, s] = v . tanh(Wq q_t + Wk k_s), one (t, s) pair at a time."""
    T, S = q.shape[-2], k.shape[-2]
    out = torch.empty(*q.shape[:-2], T, S)
    for t in range(T):
        for s in range(S):
            hidden = torch.tanh(q[..., t, :] @ Wq.T + k[..., s, :] @ Wk.T)  # (..., h)
            out[..., t, s] = hidden @ v[0]
    return out


def additive_with(cls, dq, dk, h, seed):
    module = cls(dq, dk, h)
    Wq, Wk, v = randn(h, dq, seed=seed), randn(h, dk, seed=seed + 1), randn(1, h, seed=seed + 2)
    with torch.no_grad():
        module.W_q.weight.copy_(Wq)
        module.W_k.weight.copy_(Wk)
        module.v.weight.copy_(v)
    return module, (Wq, Wk, v)


@AdditiveScore.check("W_q, W_k, v are nn.Linear without bias, of the right shapes",
                     states=("nn.Linear without bias", "W_q: query_dim -> hidden_dim"), part="__init__")
def _(cls):
    module = cls(4, 2, 6)
    assert isinstance(module, nn.Module), "AdditiveScore should be an nn.Module"
    for name, shape in (("W_q", (6, 4)), ("W_k", (6, 2)), ("v", (1, 6))):
        layer = getattr(module, name, None)
        assert isinstance(layer, nn.Linear), f"{name} should be an nn.Linear"
        assert tuple(layer.weight.shape) == shape, \
            f"{name}.weight has shape {tuple(layer.weight.shape)}, expected {shape}"
        assert layer.bias is None, f"{name} should have no bias (bias=False)"


@AdditiveScore.check("its state dict holds exactly W_q.weight, W_k.weight, v.weight", states=("W_q", "W_k", "v:"),
                     part="__init__")
def _(cls):
    module = cls(3, 5, 4)
    state = {"W_q.weight": randn(4, 3, seed=61), "W_k.weight": randn(4, 5, seed=62), "v.weight": randn(1, 4, seed=63)}
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise AssertionError(f"load_state_dict failed: {str(err).splitlines()[0]} "
                             f"(keys: {sorted(module.state_dict())})") from None


@AdditiveScore.check("unbatched scores with set weights, query_dim != key_dim, T != S")
def _(cls):
    module, weights = additive_with(cls, 4, 2, 6, seed=64)
    q, k = randn(3, 4, seed=67), randn(5, 2, seed=68)
    assert_tensor(module(q, k), additive_oracle(*weights, q, k), atol=1e-5)


@AdditiveScore.check("batched (B, T, query_dim) x (B, S, key_dim) -> (B, T, S)")
def _(cls):
    module, weights = additive_with(cls, 3, 5, 8, seed=69)
    q, k = randn(2, 4, 3, seed=72), randn(2, 6, 5, seed=73)
    assert_tensor(module(q, k), additive_oracle(*weights, q, k), atol=1e-5)


@AdditiveScore.check("T = 1 and S = 1 with batch 1 keep every axis: (1, 1, 1)")
def _(cls):
    module, weights = additive_with(cls, 2, 3, 4, seed=74)
    q, k = randn(1, 1, 2, seed=77), randn(1, 1, 3, seed=78)
    assert_tensor(module(q, k), additive_oracle(*weights, q, k), atol=1e-5)


@AdditiveScore.check("scores are differentiable w.r.t. W_q, W_k and v")
def _(cls):
    module, _ = additive_with(cls, 3, 3, 5, seed=79)
    module(randn(4, 3, seed=82), randn(2, 3, seed=83)).sum().backward()
    for name in ("W_q", "W_k", "v"):
        grad = getattr(module, name).weight.grad
        assert grad is not None and grad.abs().sum() > 0, f"no gradient reaches {name}.weight"


@AdditiveScore.side_check("q or k with the wrong feature size raises ValueError")
def _(cls):
    module = cls(3, 2, 4)
    assert_raises_value_error(module, randn(2, 2, seed=84), randn(3, 2, seed=85))
    assert_raises_value_error(module, randn(2, 3, seed=86), randn(3, 3, seed=87))


# ---------------------------------------------------------------------------------------------
attention_pool = Exercise("attention_pool", points=2,
                          forbidden=("torch.nn.functional.scaled_dot_product_attention",))


def check_pool(fn, scores, values):
    """The learner's pooling against F.softmax over keys followed by weights @ values."""
    output, weights = assert_pair(fn(scores, values))
    w_ref = F.softmax(scores, dim=-1)
    assert_tensor(weights, w_ref, atol=1e-6, what="weights")
    assert_tensor(output, w_ref @ values, atol=1e-5, what="output")


@attention_pool.check("unbatched: softmax over keys, then weights @ values (T != S, dv != S)")
def _(fn):
    check_pool(fn, randn(3, 5, seed=91), randn(5, 2, seed=92))


@attention_pool.check("batched (B, H, T, S) scores with (B, H, S, dv) values")
def _(fn):
    check_pool(fn, randn(2, 4, 3, 6, seed=93), randn(2, 4, 6, 7, seed=94))


@attention_pool.check("weights are non-negative and sum to 1 over the last axis (the keys)",
                      states=("sums to 1 over the S keys",))
def _(fn):
    _, weights = assert_pair(fn(randn(2, 4, 7, seed=95) * 3, randn(2, 7, 3, seed=96)))
    assert_tensor(weights.sum(dim=-1), torch.ones(2, 4), atol=1e-5, what="row sums of weights")
    assert bool((weights >= 0).all()), "weights must be non-negative"


@attention_pool.check("scores around 1e4 stay finite and correct", states=("finite for scores around 1e4",))
def _(fn):
    check_pool(fn, torch.tensor([[1e4, 1e4 - 1.0, 0.0], [-1e4, 2e4, 2e4]]), randn(3, 4, seed=97))


@attention_pool.check("equal scores give average pooling of the values")
def _(fn):
    values = torch.tensor([[1.0, 0.0], [3.0, 2.0], [5.0, -2.0], [-1.0, 4.0]])
    output, weights = assert_pair(fn(torch.full((2, 4), 0.3), values))
    assert_tensor(weights, torch.full((2, 4), 0.25), what="weights")
    assert_tensor(output, torch.tensor([[2.0, 1.0], [2.0, 1.0]]), atol=1e-5, what="output")


@attention_pool.side_check("scores and values with different S raise ValueError")
def _(fn):
    assert_raises_value_error(fn, randn(2, 3, seed=98), randn(4, 2, seed=99))

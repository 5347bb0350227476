"""Public checks for chapter 01. Between the `# --- stored numbers` lines are what the reference
solution gives on the fixed inputs here, and what common mistakes give on the same inputs (which is
how a failing check names the mistake); `python -m tests.snapshots --write` computes them again in the
course repository."""
from __future__ import annotations

import torch
import torch.nn as nn

from course.checks import (
    avoid_library_call,
    close,
    diagnose,
    expect_pair,
    expect_tensor,
    expect_value_error,
    fail,
    mistake,
    passed,
    public_check,
    tr,
)

T = torch.tensor


# --- gaussian_kernel ---------------------------------------------------------------------------
U = T([0.0, 1.0, -2.0, 0.5])
# --- stored numbers: gaussian_kernel ---
KERNEL = [0.398942, 0.241971, 0.053991, 0.352065]
# mistake: unnormalised density
KERNEL_UNNORMALISED = [1.0, 0.606531, 0.135335, 0.882497]
# mistake: forgot the /2 in the exponent
KERNEL_NO_HALF = [0.398942, 0.146763, 0.007307, 0.310697]
# mistake: divides by 2*pi instead of sqrt(2*pi)
KERNEL_BY_2PI = [0.159155, 0.096532, 0.021539, 0.140454]
# mistake: divides by sqrt(pi) instead of sqrt(2*pi)
KERNEL_BY_SQRT_PI = [0.56419, 0.342198, 0.076355, 0.497896]
# --- end of stored numbers ---


@public_check
def check_gaussian_kernel(gaussian_kernel) -> None:
    avoid_library_call(gaussian_kernel, ("distributions",),
                       tr("write the density yourself: torch.distributions scores zero here"))
    u = U.clone()
    out = gaussian_kernel(u)
    expect_tensor(out, (4,), "gaussian_kernel(u)")
    if not close(gaussian_kernel(-u), out.detach(), atol=1e-6):
        fail(tr("K(-u) != K(u): the kernel must be symmetric. Did you forget to square u?"))
    diagnose(out, KERNEL, {
        tr("the values are exp(-u**2/2) without the 1/sqrt(2*pi) factor, so the kernel does not integrate to 1"):
            KERNEL_UNNORMALISED,
        tr("the exponent should be -u**2 / 2, not -u**2"): KERNEL_NO_HALF,
        tr("divide by sqrt(2*pi), not by 2*pi"): KERNEL_BY_2PI,
        tr("divide by sqrt(2*pi), not by sqrt(pi)"): KERNEL_BY_SQRT_PI,
    }, what="gaussian_kernel([0, 1, -2, 0.5])", atol=1e-5)
    expect_tensor(gaussian_kernel(torch.zeros(2, 3)), (2, 3), tr("gaussian_kernel of a (2, 3) input"))
    passed("gaussian_kernel")


# --- nadaraya_watson ---------------------------------------------------------------------------
X_TRAIN, Y_TRAIN = T([0.0, 1.0, 2.0, 3.0]), T([1.0, 3.0, 2.0, 5.0])
X_QUERY = T([0.5, 2.5, 2.0])  # Q = 3 queries, N = 4 training points
# --- stored numbers: nadaraya_watson ---
# mistake: raw kernel values as weights (not normalised)
NW_RAW_KERNEL = [[0.241971, 0.241971, 0.004432, 1e-06],
                 [1e-06, 0.004432, 0.241971, 0.241971],
                 [0.000134, 0.053991, 0.398942, 0.053991]]
NW_WEIGHTS = [[0.495461, 0.495461, 0.009075, 3e-06],
              [3e-06, 0.009075, 0.495461, 0.495461],
              [0.000264, 0.106479, 0.786778, 0.106479]]
# mistake: bandwidth squared
NW_BANDWIDTH_SQUARED = [[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5], [0.0, 0.000335, 0.99933, 0.000335]]
# mistake: difference multiplied by the bandwidth (d2l's learnable w)
NW_TIMES_BANDWIDTH = [[0.307582, 0.307582, 0.239545, 0.145291],
                      [0.145291, 0.239545, 0.307582, 0.307582],
                      [0.179898, 0.26175, 0.296602, 0.26175]]
# mistake: score -u**2 without the / 2
NW_NO_HALF = [[0.499916, 0.499916, 0.000168, 0.0],
              [0.0, 0.000168, 0.499916, 0.499916],
              [0.0, 0.017668, 0.964663, 0.017668]]
# mistake: score -|u| / 2 (a Laplace kernel)
NW_LAPLACE = [[0.399486, 0.399486, 0.146963, 0.054065],
              [0.054065, 0.146963, 0.399486, 0.399486],
              [0.072329, 0.196612, 0.534447, 0.196612]]
NW_Y_HAT = [2.000009, 3.495455, 2.425651]
# mistake: y_hat is the mean of y_train
NW_PLAIN_MEAN = [2.75, 2.75, 2.75]
# --- end of stored numbers ---


@public_check
def check_nadaraya_watson(nadaraya_watson) -> None:
    x_train, y_train, x_query = X_TRAIN, Y_TRAIN, X_QUERY
    y_hat, weights = expect_pair(nadaraya_watson(x_query, x_train, y_train, 0.5), "nadaraya_watson")
    if type(weights) is torch.Tensor and tuple(weights.shape) == (4, 3):
        fail(tr("weights have shape (N, Q) = (4, 3); they should be (Q, N) = (3, 4): one row per query"))
    expect_tensor(weights, (3, 4), "weights")
    expect_tensor(y_hat, (3,), "y_hat")
    if not close(weights.sum(dim=1), torch.ones(3)):
        if close(weights.sum(dim=0), torch.ones(4)):
            fail(tr("your weights sum to 1 over the queries (dim=0), not over the training points (dim=1)"))
        if close(weights, NW_RAW_KERNEL):
            mistake(tr("these are raw kernel values: normalise each row (softmax over the training points)"))
        fail(tr("each row of weights should sum to 1 over the training points; row sums are "
                "{sums}", sums=weights.sum(dim=1).tolist()))
    diagnose(weights, NW_WEIGHTS, {
        tr("you divided the difference by bandwidth**2; divide it by the bandwidth, then square"): NW_BANDWIDTH_SQUARED,
        tr("you multiplied the difference by the bandwidth; divide it instead"): NW_TIMES_BANDWIDTH,
        tr("the score should be -u**2 / 2; you left out the / 2"): NW_NO_HALF,
        tr("square the scaled difference; |u| gives a Laplace kernel, not a Gaussian"): NW_LAPLACE,
    }, what="weights")
    diagnose(y_hat, NW_Y_HAT, {
        tr("y_hat is the plain mean of y_train; it should be weights @ y_train"): NW_PLAIN_MEAN,
    }, what="y_hat = weights @ y_train")
    expect_value_error(nadaraya_watson, x_query, x_train, y_train, 0.0, what="bandwidth = 0")
    expect_value_error(nadaraya_watson, x_query, x_train, y_train, -1.0, what=tr("a negative bandwidth"))
    _, far = expect_pair(nadaraya_watson(T([-10.0]), x_train, y_train, 0.1), "nadaraya_watson")
    if not bool(torch.isfinite(far).all()):
        fail(tr("a query far from every training point gives NaN weights: kernel / kernel.sum() underflows "
                "to 0 / 0. Compute the weights as a softmax of the scores (it subtracts the max)"))
    h = torch.tensor(0.5, requires_grad=True)
    y_h, _ = expect_pair(nadaraya_watson(x_query, x_train, y_train, h), "nadaraya_watson")
    if not (type(y_h) is torch.Tensor and y_h.requires_grad):
        fail(tr("with a tensor bandwidth, y_hat should depend on it (keep it a tensor; do not call float() on it), "
                "so that the bandwidth can be learned later in this notebook"))
    passed("nadaraya_watson")


# --- score functions ---------------------------------------------------------------------------
_Q = T([[1.0, 0.0, 2.0], [-1.0, 0.5, 1.0]])  # (T=2, d=3)
_K = T([[1.0, 1.0, 0.0], [0.0, 2.0, -1.0], [3.0, 0.0, 1.0], [-2.0, 1.0, 0.5]])  # (S=4, d=3)
# --- stored numbers: dot_product_score ---
DOT = [[1.0, -2.0, 5.0, -1.0], [-0.5, 0.0, -2.0, 3.0]]
# mistake: divides by sqrt(d) (the next exercise)
DOT_SCALED = [[0.57735, -1.154701, 2.886751, -0.57735], [-0.288675, 0.0, -1.154701, 1.732051]]
# --- end of stored numbers ---


def _check_batched(fn, q, k, expected, name):
    qb, kb = torch.stack([q, 2 * q]), torch.stack([k, -k])  # (B=2, T, d), (B=2, S, d)
    try:
        out = fn(qb, kb)
    except Exception as err:  # noqa: BLE001 - turn the crash into a hint
        fail(tr("{name} works on (T, d) inputs but fails on batched (B, T, d) ones ({type}: {err}). "
                "Let every leading axis broadcast: transpose only the last two axes of k "
                "(k.transpose(-2, -1), not k.T), or use '...' in an einsum",
                name=name, type=type(err).__name__, err=err))
    diagnose(out, torch.stack([expected, -2 * expected]), {}, what=tr("{name} on a batch of 2", name=name))


@public_check
def check_dot_product_score(dot_product_score) -> None:
    out = dot_product_score(_Q, _K)
    if type(out) is torch.Tensor and tuple(out.shape) == (4, 2):
        fail(tr("the scores have shape (S, T); they should be (T, S): one row per query (q @ k^T, not k @ q^T)"))
    diagnose(out, DOT, {tr("you divided by sqrt(d); that is the next exercise"): DOT_SCALED},
             what="dot_product_score(q, k)")
    _check_batched(dot_product_score, _Q, _K, T(DOT), "dot_product_score")
    expect_value_error(dot_product_score, _Q, _K[:, :2], what=tr("q and k with different feature sizes"))
    passed("dot_product_score")


_Q4 = T([[1.0, 2.0, 0.0, -1.0], [0.5, -1.0, 3.0, 1.0]])  # (T=2, d=4)
_K4 = T([[1.0, 0.0, 1.0, 2.0], [-1.0, 1.0, 0.0, 1.0], [2.0, 2.0, -1.0, 0.0]])  # (S=3, d=4)
# --- stored numbers: scaled_dot_product_score ---
SCALED = [[-0.5, 0.0, 3.0], [2.75, -0.25, -2.0]]
# mistake: forgot to scale
SCALED_UNSCALED = [[-1.0, 0.0, 6.0], [5.5, -0.5, -4.0]]
# mistake: divides by d instead of sqrt(d)
SCALED_BY_D = [[-0.25, 0.0, 1.5], [1.375, -0.125, -1.0]]
# mistake: divides by sqrt(S), the number of keys
SCALED_BY_SQRT_S = [[-0.57735, 0.0, 3.464102], [3.175426, -0.288675, -2.309401]]
# mistake: divides by sqrt(T), the number of queries
SCALED_BY_SQRT_T = [[-0.707107, 0.0, 4.242641], [3.889087, -0.353553, -2.828427]]
# --- end of stored numbers ---


@public_check
def check_scaled_dot_product_score(scaled_dot_product_score) -> None:
    q, k = _Q4, _K4
    out = scaled_dot_product_score(q, k)
    if type(out) is torch.Tensor and tuple(out.shape) == (3, 2):
        fail(tr("the scores have shape (S, T); they should be (T, S)"))
    diagnose(out, SCALED, {
        tr("you forgot to divide by sqrt(d)"): SCALED_UNSCALED,
        tr("divide by sqrt(d), not by d"): SCALED_BY_D,
        tr("divide by sqrt(d), the feature size, not sqrt(S), the number of keys"): SCALED_BY_SQRT_S,
        tr("divide by sqrt(d), the feature size, not sqrt(T), the number of queries"): SCALED_BY_SQRT_T,
    }, what=tr("scaled_dot_product_score(q, k) with d = 4"))
    _check_batched(scaled_dot_product_score, q, k, T(SCALED), "scaled_dot_product_score")
    expect_value_error(scaled_dot_product_score, q, k[:, :3], what=tr("q and k with different feature sizes"))
    passed("scaled_dot_product_score")


GENERAL_W = T([[0.5, -1.0], [1.0, 0.5], [-0.5, 2.0]])
GENERAL_Q = T([[1.0, 2.0, -1.0], [0.5, -1.0, 2.0]])  # (T=2, query_dim=3)
GENERAL_K = T([[1.0, 0.0], [-1.0, 2.0], [0.5, 1.5]])  # (S=3, key_dim=2)
# --- stored numbers: GeneralScore ---
GENERAL = [[3.0, -7.0, -1.5], [-1.75, 7.75, 3.625]]
# mistake: scaled by sqrt(query_dim)
GENERAL_BY_SQRT_QUERY_DIM = [[1.732051, -4.041452, -0.866025], [-1.010363, 4.474465, 2.092895]]
# mistake: scaled by sqrt(d) like the Transformer's dot product
GENERAL_BY_SQRT_KEY_DIM = [[2.12132, -4.949748, -1.06066], [-1.237437, 5.480078, 2.563262]]
# --- end of stored numbers ---


@public_check
def check_GeneralScore(GeneralScore) -> None:
    module = GeneralScore(3, 2)  # query_dim=3, key_dim=2
    params = {name: tuple(p.shape) for name, p in module.named_parameters()}
    if "W" in params and params["W"] == (2, 3):
        fail(tr("W has shape (key_dim, query_dim) = (2, 3); store it as (query_dim, key_dim) = (3, 2), "
                "so that q @ W maps a query into key space"))
    if params != {"W": (3, 2)}:
        if len(params) > 1:
            fail(tr("the only parameter should be self.W = nn.Parameter(...) of shape (query_dim, key_dim) = (3, 2); "
                    "found {params} (no bias: the general score is q W k and nothing else)", params=params))
        fail(tr("the only parameter should be self.W = nn.Parameter(...) of shape (query_dim, key_dim) = (3, 2); "
                "found {params}", params=params or tr("none")))
    with torch.no_grad():
        module.W.copy_(GENERAL_W)
    q, k = GENERAL_Q, GENERAL_K
    try:
        out = module(q, k)
    except RuntimeError as err:
        fail(tr("GeneralScore(3, 2) failed on q (2, 3) and k (3, 2): {err}. W is (query_dim, key_dim): "
                "q @ W is (..., T, key_dim), which you then dot with every key (@ k.transpose(-2, -1))", err=err))
    if type(out) is torch.Tensor and tuple(out.shape) == (3, 2):
        fail(tr("the scores have shape (S, T); they should be (T, S): one row per query"))
    diagnose(out, GENERAL, {
        tr("you divided by sqrt(query_dim); the general score has no scaling (W can learn any scale)"):
            GENERAL_BY_SQRT_QUERY_DIM,
        tr("you divided by sqrt(key_dim); the general score has no scaling (W can learn any scale)"):
            GENERAL_BY_SQRT_KEY_DIM,
    }, what=tr("GeneralScore scores with a set W"))
    _check_batched(module, q, k, T(GENERAL), "GeneralScore")
    expect_value_error(module, k, k, what=tr("a query with the wrong feature size"))
    passed("GeneralScore")


ADDITIVE_WEIGHTS = {"W_q": T([[0.5, -0.3, 0.2], [0.1, 0.4, -0.6], [-0.2, 0.3, 0.3], [0.7, 0.0, -0.1]]),
                    "W_k": T([[0.3, -0.5], [-0.4, 0.2], [0.6, 0.1], [0.0, -0.7]]),
                    "v": T([[1.0, -2.0, 0.5, 1.5]])}
ADDITIVE_Q, ADDITIVE_K = T([[1.0, 2.0, -1.0], [0.0, -1.0, 2.0]]), T([[1.0, 0.0], [-2.0, 1.0], [0.5, 3.0]])  # T=2, S=3
# --- stored numbers: AdditiveScore ---
ADDITIVE = [[-0.302759, -3.089875, -3.831733], [2.751735, -0.712315, -0.016356]]
# mistake: relu instead of tanh
ADDITIVE_RELU = [[-0.65, -4.85, -3.45], [1.45, 0.0, 0.45]]
# mistake: no tanh between the sum and v
ADDITIVE_NO_TANH = [[-0.65, -6.75, -7.05], [5.15, -0.95, -1.25]]
# mistake: tanh applied after v
ADDITIVE_TANH_AFTER_V = [[-0.57167, -0.999997, -0.999999], [0.999933, -0.739783, -0.848284]]
# --- end of stored numbers ---


@public_check
def check_AdditiveScore(AdditiveScore) -> None:
    module = AdditiveScore(3, 2, 4)  # query_dim=3, key_dim=2, hidden_dim=4
    for name, shape in (("W_q", (4, 3)), ("W_k", (4, 2)), ("v", (1, 4))):
        layer = getattr(module, name, None)
        if not isinstance(layer, nn.Linear):
            fail(tr("self.{name} should be an nn.Linear", name=name))
        if tuple(layer.weight.shape) != shape:
            fail(tr("self.{name}.weight has shape {got}, expected {shape} "
                    "(nn.Linear(in_features, out_features) stores a weight of shape (out, in))",
                    name=name, got=tuple(layer.weight.shape), shape=shape))
        if layer.bias is not None:
            fail(tr("self.{name} should have no bias: pass bias=False", name=name))
    with torch.no_grad():
        for name, weight in ADDITIVE_WEIGHTS.items():
            getattr(module, name).weight.copy_(weight)
    q, k = ADDITIVE_Q, ADDITIVE_K
    out = module(q, k)
    if type(out) is torch.Tensor and tuple(out.shape) == (3, 2):
        fail(tr("the scores have shape (S, T); they should be (T, S): unsqueeze W_q(q) at -2 and W_k(k) at -3"))
    diagnose(out, ADDITIVE, {
        tr("the nonlinearity should be tanh, not relu"): ADDITIVE_RELU,
        tr("you forgot the tanh between the sum and v"): ADDITIVE_NO_TANH,
        tr("apply tanh before v (v(tanh(...))), not after it"): ADDITIVE_TANH_AFTER_V,
    }, what=tr("AdditiveScore scores"))
    one = module(q[None, :1], k[None, :1])  # (B=1, T=1, S=1)
    if type(one) is not torch.Tensor or tuple(one.shape) != (1, 1, 1):
        fail(tr("with B = T = S = 1 the scores should have shape (1, 1, 1), got {got}: "
                "squeeze only the last axis (squeeze(-1)), not every size-1 axis",
                got=tuple(one.shape) if type(one) is torch.Tensor else type(one).__name__))
    expect_value_error(module, k, k, what=tr("a query with the wrong feature size"))
    passed("AdditiveScore")


# --- attention_pool ----------------------------------------------------------------------------
POOL_SCORES = T([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0]])  # (T=2, S=3)
POOL_VALUES = T([[1.0, 0.0, 2.0, -1.0], [0.0, 1.0, 1.0, 3.0], [2.0, -2.0, 0.0, 1.0]])  # (S=3, dv=4)
# --- stored numbers: attention_pool ---
POOL_WEIGHTS = [[0.244728, 0.665241, 0.090031], [0.074596, 0.016645, 0.90876]]
# mistake: softmax over queries (dim=-2)
POOL_WEIGHTS_OVER_QUERIES = [[0.622459, 0.952574, 0.047426], [0.377541, 0.047426, 0.952574]]
POOL_OUTPUT = [[0.42479, 0.48518, 1.154698, 1.841025], [1.892115, -1.800875, 0.165836, 0.884098]]
# --- end of stored numbers ---


@public_check
def check_attention_pool(attention_pool) -> None:
    avoid_library_call(attention_pool, ("scaled_dot_product_attention",),
                       tr("write the pooling yourself: F.scaled_dot_product_attention scores zero here"))
    scores, values = POOL_SCORES, POOL_VALUES
    output, weights = expect_pair(attention_pool(scores, values), "attention_pool")
    if type(output) is torch.Tensor and tuple(output.shape) == (2, 3):
        fail(tr("return (output, weights) in that order; you returned the weights first"))
    expect_tensor(weights, (2, 3), "weights")
    expect_tensor(output, (2, 4), "output")
    diagnose(weights, POOL_WEIGHTS, {
        tr("your weights sum to 1 over the queries (dim=-2); the softmax goes over the keys (dim=-1)"):
            POOL_WEIGHTS_OVER_QUERIES,
        tr("the weights should be softmax(scores), not the raw scores"): scores,
    }, what="weights")
    diagnose(output, POOL_OUTPUT, {
        tr("the output should be weights @ values"): scores @ values,
    }, what="output")
    big, _ = expect_pair(attention_pool(T([[1e4, 0.0, -1e4]]), values), "attention_pool")
    if not bool(torch.isfinite(big).all()):
        fail(tr("scores around 1e4 give inf/NaN: exp overflows. Subtract the row max before exp "
                "(or use torch.softmax)"))
    expect_value_error(attention_pool, scores, values[:2], what=tr("scores with S = 3 and values with S = 2"))
    passed("attention_pool")

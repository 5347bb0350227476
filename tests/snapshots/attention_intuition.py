"""The numbers course/checks/attention_intuition.py stores (chapter 01), and how each is computed."""
import torch

import course.checks.attention_intuition as C
from tests.snapshots import Stored, catalogued, kept_here


def kernel(gaussian_kernel):
    return gaussian_kernel(C.U)


def nw(nadaraya_watson):
    return nadaraya_watson(C.X_QUERY, C.X_TRAIN, C.Y_TRAIN, 0.5)


def nw_weights(nadaraya_watson):
    return nw(nadaraya_watson)[1]


def nw_y_hat(nadaraya_watson):
    return nw(nadaraya_watson)[0]


def nadaraya_watson_with(score: str) -> str:
    """A nadaraya_watson whose score of u = (x_query - x_train) / bandwidth is `score` (the reference is -u**2 / 2)."""
    return f'''\
def nadaraya_watson(x_query, x_train, y_train, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) / bandwidth
    weights = torch.softmax({score}, dim=-1)
    return weights @ y_train, weights
'''


def general(cls):
    module = cls(3, 2)
    with torch.no_grad():
        module.W.copy_(C.GENERAL_W)
        return module(C.GENERAL_Q, C.GENERAL_K)


def additive(cls):
    module = cls(3, 2, 4)
    with torch.no_grad():
        for name, weight in C.ADDITIVE_WEIGHTS.items():
            getattr(module, name).weight.copy_(weight)
        return module(C.ADDITIVE_Q, C.ADDITIVE_K)


def pool(attention_pool):
    return attention_pool(C.POOL_SCORES, C.POOL_VALUES)


SCALED = "scaled_dot_product_score"

STORED = [
    Stored("KERNEL", "gaussian_kernel", kernel),
    Stored("KERNEL_UNNORMALISED", "gaussian_kernel", kernel, catalogued("unnormalised density"),
           says="without the 1/sqrt(2*pi) factor"),
    Stored("KERNEL_NO_HALF", "gaussian_kernel", kernel, catalogued("forgot the /2 in the exponent"),
           says="the exponent should be -u**2 / 2"),
    Stored("KERNEL_BY_2PI", "gaussian_kernel", kernel, catalogued("divides by 2*pi instead of sqrt(2*pi)"),
           says="not by 2*pi"),
    Stored("KERNEL_BY_SQRT_PI", "gaussian_kernel", kernel, says="not by sqrt(pi)", mistake=kept_here(
        "divides by sqrt(pi) instead of sqrt(2*pi)",
        "def gaussian_kernel(u):\n    return torch.exp(-u ** 2 / 2) / math.sqrt(math.pi)\n")),

    Stored("NW_RAW_KERNEL", "nadaraya_watson", nw_weights, says="these are raw kernel values", mistake=kept_here(
        "raw kernel values as weights (not normalised)", '''\
def nadaraya_watson(x_query, x_train, y_train, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) / bandwidth
    weights = torch.exp(-u ** 2 / 2) / math.sqrt(2 * math.pi)
    return weights @ y_train, weights
''')),
    Stored("NW_WEIGHTS", "nadaraya_watson", nw_weights),
    Stored("NW_BANDWIDTH_SQUARED", "nadaraya_watson", nw_weights, catalogued("bandwidth squared"),
           says="divided the difference by bandwidth**2"),
    Stored("NW_TIMES_BANDWIDTH", "nadaraya_watson", nw_weights,
           catalogued("difference multiplied by the bandwidth (d2l's learnable w)"),
           says="multiplied the difference by the bandwidth"),
    Stored("NW_NO_HALF", "nadaraya_watson", nw_weights, says="you left out the / 2",
           mistake=kept_here("score -u**2 without the / 2", nadaraya_watson_with("-u ** 2"))),
    Stored("NW_LAPLACE", "nadaraya_watson", nw_weights, says="gives a Laplace kernel",
           mistake=kept_here("score -|u| / 2 (a Laplace kernel)", nadaraya_watson_with("-u.abs() / 2"))),
    Stored("NW_Y_HAT", "nadaraya_watson", nw_y_hat),
    Stored("NW_PLAIN_MEAN", "nadaraya_watson", nw_y_hat, says="y_hat is the plain mean of y_train", mistake=kept_here(
        "y_hat is the mean of y_train", '''\
def nadaraya_watson(x_query, x_train, y_train, bandwidth):
    u = (x_query[:, None] - x_train[None, :]) / bandwidth
    weights = torch.softmax(-u ** 2 / 2, dim=-1)
    return y_train.mean().expand(len(x_query)), weights
''')),

    Stored("DOT", "dot_product_score", lambda f: f(C._Q, C._K)),
    Stored("DOT_SCALED", "dot_product_score", lambda f: f(C._Q, C._K), says="that is the next exercise",
           mistake=kept_here("divides by sqrt(d) (the next exercise)", '''\
def dot_product_score(q, k):
    return scaled_dot_product_score(q, k)
''')),

    Stored("SCALED", SCALED, lambda f: f(C._Q4, C._K4)),
    Stored("SCALED_UNSCALED", SCALED, lambda f: f(C._Q4, C._K4), catalogued("forgot to scale"),
           says="you forgot to divide by sqrt(d)"),
    Stored("SCALED_BY_D", SCALED, lambda f: f(C._Q4, C._K4), catalogued("divides by d instead of sqrt(d)"),
           says="not by d"),
    Stored("SCALED_BY_SQRT_S", SCALED, lambda f: f(C._Q4, C._K4), catalogued("divides by sqrt(S), the number of keys"),
           says="not sqrt(S), the number of keys"),
    Stored("SCALED_BY_SQRT_T", SCALED, lambda f: f(C._Q4, C._K4), says="not sqrt(T), the number of queries",
           mistake=kept_here("divides by sqrt(T), the number of queries", '''\
def scaled_dot_product_score(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("feature sizes differ")
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-2])
''')),

    Stored("GENERAL", "GeneralScore", general),
    Stored("GENERAL_BY_SQRT_QUERY_DIM", "GeneralScore", general, says="you divided by sqrt(query_dim)",
           mistake=kept_here("scaled by sqrt(query_dim)", '''\
_Reference = GeneralScore


class GeneralScore(_Reference):
    def forward(self, q, k):
        return super().forward(q, k) / math.sqrt(q.shape[-1])
''')),
    Stored("GENERAL_BY_SQRT_KEY_DIM", "GeneralScore", general,
           catalogued("scaled by sqrt(d) like the Transformer's dot product"), says="you divided by sqrt(key_dim)"),

    Stored("ADDITIVE", "AdditiveScore", additive),
    Stored("ADDITIVE_RELU", "AdditiveScore", additive, catalogued("relu instead of tanh"), says="tanh, not relu"),
    Stored("ADDITIVE_NO_TANH", "AdditiveScore", additive, says="you forgot the tanh", mistake=kept_here(
        "no tanh between the sum and v", '''\
_Reference = AdditiveScore


class AdditiveScore(_Reference):
    def forward(self, q, k):
        return self.v(self.W_q(q).unsqueeze(-2) + self.W_k(k).unsqueeze(-3)).squeeze(-1)
''')),
    Stored("ADDITIVE_TANH_AFTER_V", "AdditiveScore", additive, catalogued("tanh applied after v"),
           says="apply tanh before v"),

    Stored("POOL_WEIGHTS", "attention_pool", lambda f: pool(f)[1]),
    Stored("POOL_WEIGHTS_OVER_QUERIES", "attention_pool", lambda f: pool(f)[1],
           catalogued("softmax over queries (dim=-2)"), says="your weights sum to 1 over the queries"),
    Stored("POOL_OUTPUT", "attention_pool", lambda f: pool(f)[0]),
]

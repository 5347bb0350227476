"""Chapter 01: realistic wrong implementations (each must lose points) and correct alternatives."""
from tests.catalogue import Variant, do_nothing

WRONG = [
    # --- gaussian_kernel -------------------------------------------------------------------
    Variant("gaussian_kernel", "unnormalised density", """
def gaussian_kernel(u):
    return torch.exp(-u**2 / 2)
"""),
    Variant("gaussian_kernel", "forgot the /2 in the exponent", """
def gaussian_kernel(u):
    return torch.exp(-u**2) / math.sqrt(2 * math.pi)
"""),
    Variant("gaussian_kernel", "divides by 2*pi instead of sqrt(2*pi)", """
def gaussian_kernel(u):
    return torch.exp(-u**2 / 2) / (2 * math.pi)
"""),
    Variant("gaussian_kernel", "calls torch.distributions.Normal (forbidden)", """
def gaussian_kernel(u):
    return torch.distributions.Normal(0.0, 1.0).log_prob(u).exp()
"""),
    # --- nadaraya_watson --------------------------------------------------------------------
    Variant("nadaraya_watson", "weights normalised over queries (dim=0)", """
def nadaraya_watson(x_query, x_train, y_train, bandwidth=1.0):
    if bandwidth <= 0:
        raise ValueError("bandwidth must be positive")
    diff = (x_query[:, None] - x_train[None, :]) / bandwidth
    weights = torch.softmax(-diff**2 / 2, dim=0)
    return weights @ y_train, weights
"""),
    Variant("nadaraya_watson", "bandwidth squared", """
def nadaraya_watson(x_query, x_train, y_train, bandwidth=1.0):
    if bandwidth <= 0:
        raise ValueError("bandwidth must be positive")
    diff = (x_query[:, None] - x_train[None, :]) / bandwidth**2
    weights = torch.softmax(-diff**2 / 2, dim=1)
    return weights @ y_train, weights
"""),
    Variant("nadaraya_watson", "difference multiplied by the bandwidth (d2l's learnable w)", """
def nadaraya_watson(x_query, x_train, y_train, bandwidth=1.0):
    if bandwidth <= 0:
        raise ValueError("bandwidth must be positive")
    diff = (x_query[:, None] - x_train[None, :]) * bandwidth
    weights = torch.softmax(-diff**2 / 2, dim=1)
    return weights @ y_train, weights
"""),
    Variant("nadaraya_watson", "kernel / kernel.sum() underflows far from the data", """
def nadaraya_watson(x_query, x_train, y_train, bandwidth=1.0):
    if bandwidth <= 0:
        raise ValueError("bandwidth must be positive")
    K = gaussian_kernel((x_query[:, None] - x_train[None, :]) / bandwidth)
    weights = K / K.sum(dim=1, keepdim=True)
    return weights @ y_train, weights
"""),
    Variant("nadaraya_watson", "no ValueError for a bad bandwidth", """
def nadaraya_watson(x_query, x_train, y_train, bandwidth=1.0):
    diff = (x_query[:, None] - x_train[None, :]) / bandwidth
    weights = torch.softmax(-diff**2 / 2, dim=1)
    return weights @ y_train, weights
"""),
    Variant("nadaraya_watson", "weights returned as (N, Q)", """
def nadaraya_watson(x_query, x_train, y_train, bandwidth=1.0):
    if bandwidth <= 0:
        raise ValueError("bandwidth must be positive")
    diff = (x_train[:, None] - x_query[None, :]) / bandwidth
    weights = torch.softmax(-diff**2 / 2, dim=0)
    return y_train @ weights, weights
"""),
    Variant("nadaraya_watson", "bandwidth turned into a Python float", """
def nadaraya_watson(x_query, x_train, y_train, bandwidth=1.0):
    h = float(bandwidth)
    if h <= 0:
        raise ValueError("bandwidth must be positive")
    diff = (x_query[:, None] - x_train[None, :]) / h
    weights = torch.softmax(-diff**2 / 2, dim=1)
    return weights @ y_train, weights
"""),
    # --- dot_product_score -----------------------------------------------------------------
    Variant("dot_product_score", "k.T breaks batched inputs", """
def dot_product_score(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("feature sizes differ")
    return q @ k.T
"""),
    Variant("dot_product_score", "keys x queries: (S, T) instead of (T, S)", """
def dot_product_score(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("feature sizes differ")
    return k @ q.transpose(-2, -1)
"""),
    Variant("dot_product_score", "einsum without batch dims", """
def dot_product_score(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("feature sizes differ")
    return torch.einsum("td,sd->ts", q, k)
"""),
    # --- scaled_dot_product_score ----------------------------------------------------------
    Variant("scaled_dot_product_score", "divides by d instead of sqrt(d)", """
def scaled_dot_product_score(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("feature sizes differ")
    return q @ k.transpose(-2, -1) / q.shape[-1]
"""),
    Variant("scaled_dot_product_score", "divides by sqrt(S), the number of keys", """
def scaled_dot_product_score(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("feature sizes differ")
    return q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])
"""),
    Variant("scaled_dot_product_score", "forgot to scale", """
def scaled_dot_product_score(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("feature sizes differ")
    return q @ k.transpose(-2, -1)
"""),
    # --- GeneralScore -----------------------------------------------------------------------
    Variant("GeneralScore", "W stored transposed, (key_dim, query_dim)", """
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Parameter(torch.randn(key_dim, query_dim) / math.sqrt(query_dim * key_dim))

    def forward(self, q, k):
        if q.shape[-1] != self.W.shape[1] or k.shape[-1] != self.W.shape[0]:
            raise ValueError("wrong feature size")
        return q @ self.W.T @ k.transpose(-2, -1)
"""),
    Variant("GeneralScore", "a bias added to every score", """
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Parameter(torch.randn(query_dim, key_dim) / math.sqrt(query_dim * key_dim))
        self.b = nn.Parameter(torch.zeros(1))

    def forward(self, q, k):
        if q.shape[-1] != self.W.shape[0] or k.shape[-1] != self.W.shape[1]:
            raise ValueError("wrong feature size")
        return q @ self.W @ k.transpose(-2, -1) + self.b
"""),
    Variant("GeneralScore", "W applied to k on the wrong side: q (k W)^T", """
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Parameter(torch.randn(query_dim, key_dim) / math.sqrt(query_dim * key_dim))

    def forward(self, q, k):
        if q.shape[-1] != self.W.shape[0] or k.shape[-1] != self.W.shape[1]:
            raise ValueError("wrong feature size")
        return q @ (k @ self.W).transpose(-2, -1)
"""),
    Variant("GeneralScore", "scaled by sqrt(d) like the Transformer's dot product", """
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Parameter(torch.randn(query_dim, key_dim) / math.sqrt(query_dim * key_dim))

    def forward(self, q, k):
        if q.shape[-1] != self.W.shape[0] or k.shape[-1] != self.W.shape[1]:
            raise ValueError("wrong feature size")
        return q @ self.W @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
"""),
    Variant("GeneralScore", "W as an nn.Linear(key_dim, query_dim) with its default bias", """
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Linear(key_dim, query_dim)

    def forward(self, q, k):
        if q.shape[-1] != self.W.out_features or k.shape[-1] != self.W.in_features:
            raise ValueError("wrong feature size")
        return q @ self.W(k).transpose(-2, -1)
"""),
    Variant("GeneralScore", "k.T breaks batched inputs", """
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Parameter(torch.randn(query_dim, key_dim) / math.sqrt(query_dim * key_dim))

    def forward(self, q, k):
        if q.shape[-1] != self.W.shape[0] or k.shape[-1] != self.W.shape[1]:
            raise ValueError("wrong feature size")
        return q @ self.W @ k.T
"""),
    # --- AdditiveScore ----------------------------------------------------------------------
    Variant("AdditiveScore", "linear layers with bias", """
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim)
        self.W_k = nn.Linear(key_dim, hidden_dim)
        self.v = nn.Linear(hidden_dim, 1)

    def forward(self, q, k):
        if q.shape[-1] != self.W_q.in_features or k.shape[-1] != self.W_k.in_features:
            raise ValueError("wrong feature size")
        return self.v(torch.tanh(self.W_q(q).unsqueeze(-2) + self.W_k(k).unsqueeze(-3))).squeeze(-1)
"""),
    Variant("AdditiveScore", "relu instead of tanh", """
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q, k):
        if q.shape[-1] != self.W_q.in_features or k.shape[-1] != self.W_k.in_features:
            raise ValueError("wrong feature size")
        return self.v(torch.relu(self.W_q(q).unsqueeze(-2) + self.W_k(k).unsqueeze(-3))).squeeze(-1)
"""),
    Variant("AdditiveScore", "squeeze() drops size-1 axes", """
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q, k):
        if q.shape[-1] != self.W_q.in_features or k.shape[-1] != self.W_k.in_features:
            raise ValueError("wrong feature size")
        return self.v(torch.tanh(self.W_q(q).unsqueeze(-2) + self.W_k(k).unsqueeze(-3))).squeeze()
"""),
    Variant("AdditiveScore", "unsqueezed the wrong axes: (S, T)", """
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q, k):
        if q.shape[-1] != self.W_q.in_features or k.shape[-1] != self.W_k.in_features:
            raise ValueError("wrong feature size")
        return self.v(torch.tanh(self.W_q(q).unsqueeze(-3) + self.W_k(k).unsqueeze(-2))).squeeze(-1)
"""),
    Variant("AdditiveScore", "tanh applied after v", """
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q, k):
        if q.shape[-1] != self.W_q.in_features or k.shape[-1] != self.W_k.in_features:
            raise ValueError("wrong feature size")
        return torch.tanh(self.v(self.W_q(q).unsqueeze(-2) + self.W_k(k).unsqueeze(-3))).squeeze(-1)
"""),
    # --- attention_pool ---------------------------------------------------------------------
    Variant("attention_pool", "softmax over queries (dim=-2)", """
def attention_pool(scores, values):
    if scores.shape[-1] != values.shape[-2]:
        raise ValueError("S differs")
    weights = torch.softmax(scores, dim=-2)
    return weights @ values, weights
"""),
    Variant("attention_pool", "exp / sum without the max shift", """
def attention_pool(scores, values):
    if scores.shape[-1] != values.shape[-2]:
        raise ValueError("S differs")
    e = torch.exp(scores)
    weights = e / e.sum(dim=-1, keepdim=True)
    return weights @ values, weights
"""),
    Variant("attention_pool", "returns (weights, output)", """
def attention_pool(scores, values):
    if scores.shape[-1] != values.shape[-2]:
        raise ValueError("S differs")
    weights = torch.softmax(scores, dim=-1)
    return weights, weights @ values
"""),
    Variant("attention_pool", "calls F.scaled_dot_product_attention (forbidden)", """
import torch.nn.functional as F

def attention_pool(scores, values):
    if scores.shape[-1] != values.shape[-2]:
        raise ValueError("S differs")
    S = scores.shape[-1]
    # q = scores and k = sqrt(S) * I make softmax(q k^T / sqrt(S)) = softmax(scores).
    keys = torch.eye(S).expand(*scores.shape[:-2], S, S) * math.sqrt(S)
    output = F.scaled_dot_product_attention(scores, keys, values)
    return output, torch.softmax(scores, dim=-1)
"""),
]

# side rules (ValueError, in place) earned these points before issue 29; now they earn nothing
WRONG += [*do_nothing("nadaraya_watson", "raises ValueError"), *do_nothing("dot_product_score", "raises ValueError"),
          *do_nothing("scaled_dot_product_score", "raises ValueError"),
          *do_nothing("GeneralScore", "forward raises ValueError"),
          *do_nothing("AdditiveScore", "forward raises ValueError"),
          *do_nothing("attention_pool", "raises ValueError")]

CORRECT = [
    Variant("gaussian_kernel", "via the log-density", """
def gaussian_kernel(u):
    return torch.exp(-0.5 * u * u - 0.5 * math.log(2 * math.pi))
"""),
    Variant("nadaraya_watson", "max-shifted exp by hand, loop-free broadcasting with unsqueeze", """
def nadaraya_watson(x_query, x_train, y_train, bandwidth=1.0):
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0, got {bandwidth}")
    scores = -0.5 * ((x_query.unsqueeze(1) - x_train.unsqueeze(0)) / bandwidth) ** 2
    scores = scores - scores.max(dim=1, keepdim=True).values
    e = scores.exp()
    weights = e / e.sum(dim=1, keepdim=True)
    return (weights * y_train).sum(dim=1), weights
"""),
    Variant("nadaraya_watson", "log of the learner's kernel, then log_softmax", """
def nadaraya_watson(x_query, x_train, y_train, bandwidth=1.0):
    if bandwidth <= 0:
        raise ValueError("the bandwidth has to be positive")
    u = (x_query.reshape(-1, 1) - x_train.reshape(1, -1)) / bandwidth
    weights = torch.log_softmax(-u.pow(2) / 2, dim=-1).exp()
    return torch.mv(weights, y_train), weights
"""),
    Variant("dot_product_score", "einsum with ellipsis", """
def dot_product_score(q, k):
    if q.size(-1) != k.size(-1):
        raise ValueError("q and k must share d")
    return torch.einsum("...td,...sd->...ts", q, k)
"""),
    Variant("scaled_dot_product_score", "reuses dot_product_score, scales q first", """
def scaled_dot_product_score(q, k):
    return dot_product_score(q / q.shape[-1] ** 0.5, k)
"""),
    Variant("GeneralScore", "einsum with the weight in the middle, checks in one line", """
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.query_dim, self.key_dim = query_dim, key_dim
        self.W = nn.Parameter(torch.empty(query_dim, key_dim))
        nn.init.xavier_uniform_(self.W)

    def forward(self, q, k):
        if (q.shape[-1], k.shape[-1]) != (self.query_dim, self.key_dim):
            raise ValueError(f"expected ({self.query_dim}, {self.key_dim}) features, got {q.shape[-1]}, {k.shape[-1]}")
        return torch.einsum("...tq,qk,...sk->...ts", q, self.W, k)
"""),
    Variant("GeneralScore", "keys mapped into query space first: q (W k)", """
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Parameter(torch.randn(query_dim, key_dim) * 0.1)

    def forward(self, q, k):
        if q.size(-1) != self.W.size(0):
            raise ValueError("q has the wrong feature size")
        if k.size(-1) != self.W.size(1):
            raise ValueError("k has the wrong feature size")
        keys_in_query_space = k @ self.W.T  # (..., S, query_dim)
        return q @ keys_in_query_space.mT
"""),
    Variant("AdditiveScore", "explicit broadcasting with expand and a matmul with v.weight", """
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.v = nn.Linear(hidden_dim, 1, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.query_dim, self.key_dim = query_dim, key_dim

    def forward(self, q, k):
        if q.shape[-1] != self.query_dim:
            raise ValueError("q has the wrong feature size")
        if k.shape[-1] != self.key_dim:
            raise ValueError("k has the wrong feature size")
        T, S = q.shape[-2], k.shape[-2]
        qh = self.W_q(q)[..., :, None, :]
        kh = self.W_k(k)[..., None, :, :]
        hidden = torch.tanh(qh + kh)
        return (hidden @ self.v.weight.T)[..., 0]
"""),
    Variant("attention_pool", "max-shifted softmax by hand", """
def attention_pool(scores, values):
    if scores.size(-1) != values.size(-2):
        raise ValueError(f"{scores.size(-1)} scores per query but {values.size(-2)} values")
    z = scores - scores.amax(dim=-1, keepdim=True)
    w = z.exp() / z.exp().sum(-1, keepdim=True)
    return torch.matmul(w, values), w
"""),
]

# issue 29: an input changed in place must never write the expected value (the answer for zeros
# is the expected value of a check that computes it from the input after the call)
WRONG += [
    Variant("dot_product_score", "zeroes the input in place and returns the answer for that", '''\
_ref_dot_product_score = dot_product_score

def dot_product_score(q, k):
    q.zero_()
    return _ref_dot_product_score(q, k)
'''),
]

"""Chapter 01: attention before Transformers (reference implementation)."""
import math

import torch
import torch.nn as nn


def gaussian_kernel(u: torch.Tensor) -> torch.Tensor:
    """The standard normal density, elementwise.

    Args:
        u: any shape.
    Returns:
        same shape as `u`: exp(-u**2 / 2) / sqrt(2*pi).
    Do not call torch.distributions.
    """
    ### BEGIN SOLUTION
    return torch.exp(-u**2 / 2) / math.sqrt(2 * math.pi)
    ### END SOLUTION


def nadaraya_watson(x_query: torch.Tensor, x_train: torch.Tensor, y_train: torch.Tensor,
                    bandwidth=1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Nadaraya-Watson kernel regression: attention pooling with a Gaussian kernel.

    Args:
        x_query: (Q,) the points where we want a prediction (the queries).
        x_train: (N,) training inputs (the keys).
        y_train: (N,) training targets (the values).
        bandwidth: a float > 0, or a positive 0-dim tensor (so it can be learned);
            larger means smoother. A bandwidth <= 0 raises ValueError.
    Returns:
        (y_hat, weights): y_hat (Q,) = weights @ y_train; weights (Q, N), where row i is
        softmax_j(-((x_query[i] - x_train[j]) / bandwidth)**2 / 2) and sums to 1 over
        the N training points.
    Compute the weights as a softmax of the scores (torch.softmax is fine), not as
    kernel / kernel.sum(): that underflows to 0/0 for queries far from every training point.
    """
    ### BEGIN SOLUTION
    if bandwidth <= 0:
        raise ValueError(f"bandwidth must be positive, got {float(bandwidth)}")
    diff = (x_query[:, None] - x_train[None, :]) / bandwidth  # (Q, N)
    weights = torch.softmax(-diff**2 / 2, dim=-1)  # (Q, N), each row sums to 1 over training points
    y_hat = weights @ y_train  # (Q,)
    return y_hat, weights
    ### END SOLUTION


def dot_product_score(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Dot-product attention scores between every query and every key.

    Args:
        q: (..., T, d) queries.
        k: (..., S, d) keys; the leading dims broadcast with those of q.
    Returns:
        (..., T, S): score[..., t, s] = q[..., t, :] . k[..., s, :].
    Raises ValueError when q and k have different feature sizes d.
    """
    ### BEGIN SOLUTION
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k need the same feature size, got {q.shape[-1]} and {k.shape[-1]}")
    return q @ k.transpose(-2, -1)  # (..., T, d) @ (..., d, S) -> (..., T, S)
    ### END SOLUTION


def scaled_dot_product_score(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Dot-product scores divided by sqrt(d), so their variance does not grow with d.

    Args:
        q: (..., T, d) queries.
        k: (..., S, d) keys.
    Returns:
        (..., T, S): (q . k) / sqrt(d).
    Raises ValueError when q and k have different feature sizes d.
    """
    ### BEGIN SOLUTION
    d = q.shape[-1]
    if k.shape[-1] != d:
        raise ValueError(f"q and k need the same feature size, got {d} and {k.shape[-1]}")
    return q @ k.transpose(-2, -1) / math.sqrt(d)  # (..., T, S)
    ### END SOLUTION


class GeneralScore(nn.Module):
    """Luong's "general" score: a learned bilinear form between every query and every key.

    Args:
        query_dim: feature size of the queries.
        key_dim: feature size of the keys (may differ from query_dim).
    Attributes:
        W: nn.Parameter of shape (query_dim, key_dim), the only parameter (no bias). Any random
            start works; torch.randn(query_dim, key_dim) / sqrt(query_dim * key_dim) keeps the
            scores near unit variance for unit-variance q and k.
    forward(q (..., T, query_dim), k (..., S, key_dim)) -> (..., T, S) with
        score[..., t, s] = q_t W k_s (no bias, no 1/sqrt(d) scaling); the leading dims of q and k
        broadcast, as in dot_product_score.
    forward raises ValueError when q or k has the wrong feature size.
    """

    def __init__(self, query_dim: int, key_dim: int):
        super().__init__()
        ### BEGIN SOLUTION
        self.W = nn.Parameter(torch.randn(query_dim, key_dim) / math.sqrt(query_dim * key_dim))
        ### END SOLUTION

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        query_dim, key_dim = self.W.shape
        if q.shape[-1] != query_dim:
            raise ValueError(f"q has {q.shape[-1]} features, expected query_dim={query_dim}")
        if k.shape[-1] != key_dim:
            raise ValueError(f"k has {k.shape[-1]} features, expected key_dim={key_dim}")
        # q W maps each query into key space; a dot product with every key does the rest.
        return (q @ self.W) @ k.transpose(-2, -1)  # (..., T, key_dim) @ (..., key_dim, S) -> (..., T, S)
        ### END SOLUTION


class AdditiveScore(nn.Module):
    """Additive (Bahdanau) attention scores: a one-hidden-layer MLP of query and key.

    Args:
        query_dim: feature size of the queries.
        key_dim: feature size of the keys (may differ from query_dim).
        hidden_dim: size of the hidden layer.
    Attributes (all nn.Linear without bias):
        W_q: query_dim -> hidden_dim;  W_k: key_dim -> hidden_dim;  v: hidden_dim -> 1.
    forward(q (..., T, query_dim), k (..., S, key_dim)) -> (..., T, S) with
        score[..., t, s] = v(tanh(W_q q_t + W_k k_s)).
    forward raises ValueError when q or k has the wrong feature size.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int):
        super().__init__()
        ### BEGIN SOLUTION
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)
        ### END SOLUTION

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        if q.shape[-1] != self.W_q.in_features:
            raise ValueError(f"q has {q.shape[-1]} features, expected query_dim={self.W_q.in_features}")
        if k.shape[-1] != self.W_k.in_features:
            raise ValueError(f"k has {k.shape[-1]} features, expected key_dim={self.W_k.in_features}")
        # Broadcast every query against every key: (..., T, 1, h) + (..., 1, S, h).
        features = torch.tanh(self.W_q(q).unsqueeze(-2) + self.W_k(k).unsqueeze(-3))  # (..., T, S, h)
        return self.v(features).squeeze(-1)  # (..., T, S)
        ### END SOLUTION


def attention_pool(scores: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention pooling: softmax the scores over the keys, then average the values with those weights.

    Args:
        scores: (..., T, S) one score per (query, key) pair.
        values: (..., S, dv) one value per key.
    Returns:
        (output, weights): output (..., T, dv) = weights @ values; weights (..., T, S),
        each row sums to 1 over the S keys.
    Raises ValueError when scores and values disagree on S. Stays finite for scores around 1e4.
    Do not call F.scaled_dot_product_attention.
    """
    ### BEGIN SOLUTION
    if scores.shape[-1] != values.shape[-2]:
        raise ValueError(f"scores have S={scores.shape[-1]} keys but values have {values.shape[-2]}")
    weights = torch.softmax(scores, dim=-1)  # (..., T, S), normalised over keys
    return weights @ values, weights  # (..., T, dv)
    ### END SOLUTION

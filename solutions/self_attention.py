"""Chapter 02: scaled dot-product self-attention (reference implementation)."""
import math

import torch
import torch.nn as nn


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax along `dim`, numerically stable: finite for inputs around 1e4.

    Args:
        x: any shape, floating point. Entries may be -inf (they get probability 0),
            as long as every slice along `dim` has at least one finite entry.
        dim: the axis that is normalised (negative values count from the end).
    Returns:
        same shape and dtype as `x` (float64 stays float64); non-negative, sums to 1 along `dim`.
    Do not call torch.softmax, F.softmax, Tensor.softmax, torch.special.softmax
    or any log_softmax; do not modify `x` in place.
    """
    ### BEGIN SOLUTION
    # exp(x - c) / sum exp(x - c) is the same for every c; c = max keeps every exp <= 1.
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)
    ### END SOLUTION


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of every query over every key: softmax(q k^T / sqrt(Dk)) v.

    Args:
        q: (..., T, Dk) queries.
        k: (..., S, Dk) keys.
        v: (..., S, Dv) values.
        mask: optional bool tensor broadcastable to (..., T, S); True means "may attend".
            Masked-out keys get weight exactly 0 (the mask is applied before the softmax).
    Returns:
        output: (..., T, Dv), the weighted average of the values for each query.
        weights: (..., T, S), each row sums to 1 over the keys.
    Raises:
        ValueError: q and k differ in their last size, k and v differ in length S,
            mask is not a bool tensor, or mask does not broadcast to the scores' shape
            (..., T, S) (a (B, 1, 1, S) mask with 3-d inputs would silently add an axis).
    You may use your `softmax` from above; do not call F.scaled_dot_product_attention
    or F.multi_head_attention_forward.
    """
    ### BEGIN SOLUTION
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k need the same last size Dk, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v need the same length S, got {k.shape[-2]} and {v.shape[-2]}")
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = may attend), got dtype {mask.dtype}")
    d_k = q.shape[-1]
    # Dividing by sqrt(Dk) keeps the scores' variance near 1 whatever Dk is.
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., T, S)
    if mask is not None:
        if mask.dim() > scores.dim() or any(m not in (1, s) for m, s in zip(mask.shape[::-1], scores.shape[::-1])):
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast "
                             f"to the scores {tuple(scores.shape)}")
        # exp(-inf) = 0: a masked key gets no weight and the rest still sum to 1.
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)  # (..., T, S), normalised over the keys
    output = weights @ v  # (..., T, Dv)
    return output, weights
    ### END SOLUTION


class SelfAttention(nn.Module):
    """Single-head self-attention: queries, keys and values are all projections of the same x.

    Args:
        d_model: D, the size of each input vector.
        d_k: the size of queries and keys (W_q, W_k: D -> d_k).
        d_v: the size of values and of the output (W_v: D -> d_v).
        bias: whether the three nn.Linear layers have a bias.
    Attributes:
        W_q, W_k, W_v: nn.Linear layers.
    forward(x, mask=None):
        x: (B, T, D); mask: optional bool, broadcastable to (B, T, T), True = may attend.
        Returns (output (B, T, d_v), weights (B, T, T)).
        Raises ValueError when x is not (B, T, d_model).
    Use your scaled_dot_product_attention; do not call F.scaled_dot_product_attention,
    F.multi_head_attention_forward or nn.MultiheadAttention.
    """

    def __init__(self, d_model: int, d_k: int, d_v: int, bias: bool = False):
        super().__init__()
        ### BEGIN SOLUTION
        self.d_model = d_model
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_v, bias=bias)
        ### END SOLUTION

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        ### BEGIN SOLUTION
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x should have shape (B, T, {self.d_model}), got {tuple(x.shape)}")
        q = self.W_q(x)  # (B, T, d_k)
        k = self.W_k(x)  # (B, T, d_k)
        v = self.W_v(x)  # (B, T, d_v)
        return scaled_dot_product_attention(q, k, v, mask)  # (B, T, d_v), (B, T, T)
        ### END SOLUTION

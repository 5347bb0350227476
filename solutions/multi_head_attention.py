"""Chapter 04: multi-head attention (reference implementation)."""
import torch
import torch.nn as nn

from solutions.self_attention import scaled_dot_product_attention


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut each D-vector into H heads of size Dh = D / H and move the head axis forward.

    Args:
        x: (B, T, D), possibly non-contiguous (a transposed tensor, say).
        num_heads: H, must divide D.
    Returns:
        (B, H, T, Dh) with out[b, h, t] == x[b, t, h*Dh:(h+1)*Dh].
    Raises:
        ValueError if x is not 3-dimensional, num_heads < 1, or D % num_heads != 0.
    Use view/reshape and transpose; a reshape straight to (B, H, T, Dh) mixes tokens.
    """
    ### BEGIN SOLUTION
    if x.dim() != 3:
        raise ValueError(f"x should have shape (B, T, D), got {tuple(x.shape)}")
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"num_heads must be a positive divisor of D={D}, got {num_heads}")
    Dh = D // num_heads
    return x.view(B, T, num_heads, Dh).transpose(1, 2)  # (B, H, T, Dh)
    ### END SOLUTION


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Undo split_heads: put the heads of each token side by side again.

    Args:
        x: (B, H, T, Dh), contiguous or not (the result of a transpose is not).
    Returns:
        (B, T, H*Dh) with out[b, t, h*Dh:(h+1)*Dh] == x[b, h, t].
    Raises:
        ValueError if x is not 4-dimensional.
    """
    ### BEGIN SOLUTION
    if x.dim() != 4:
        raise ValueError(f"x should have shape (B, H, T, Dh), got {tuple(x.shape)}")
    B, H, T, Dh = x.shape
    # transpose leaves memory non-contiguous, so view would fail: reshape copies.
    return x.transpose(1, 2).reshape(B, T, H * Dh)  # (B, T, H*Dh)
    ### END SOLUTION


class MultiHeadAttention(nn.Module):
    """H attention heads in parallel, each on its own D/H-sized slice of learned projections.

    Args:
        d_model: D, the size of queries, keys, values and output.
        num_heads: H, must divide D.
        dropout: probability of zeroing attention weights, in training mode only (none in eval mode).
        bias: whether the four nn.Linear layers have a bias.
    Attributes:
        W_q, W_k, W_v, W_o: nn.Linear(D, D, bias); dropout: nn.Dropout on the weights.
    forward(query (B, T, D), key (B, S, D), value (B, S, D), mask=None):
        mask: optional bool, broadcastable to (B, H, T, S), True = may attend
            (a (T, S) causal mask or a (B, 1, 1, S) padding mask both broadcast).
        Returns (output (B, T, D), weights (B, H, T, S)): one attention map per head, taken
        after dropout (the weights that actually multiply the values, as PyTorch returns them).
    Raises:
        ValueError if d_model % num_heads != 0, or the inputs' last size is not d_model,
        or key and value differ in length.
    Use split_heads, merge_heads and scaled_dot_product_attention; do not call
    nn.MultiheadAttention, F.multi_head_attention_forward or F.scaled_dot_product_attention.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        ### BEGIN SOLUTION
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.d_model, self.num_heads = d_model, num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        ### BEGIN SOLUTION
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != 3 or t.shape[-1] != self.d_model:
                raise ValueError(f"{name} should have shape (B, *, {self.d_model}), got {tuple(t.shape)}")
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key and value need the same length S, got {key.shape[1]} and {value.shape[1]}")
        q = split_heads(self.W_q(query), self.num_heads)  # (B, H, T, Dh)
        k = split_heads(self.W_k(key), self.num_heads)  # (B, H, S, Dh)
        v = split_heads(self.W_v(value), self.num_heads)  # (B, H, S, Dh)
        # Every head attends on its own: the head axis is just another batch axis.
        _, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, S)
        weights = self.dropout(weights)  # dropout on the weights, as nn.MultiheadAttention does
        context = weights @ v  # (B, H, T, Dh)
        return self.W_o(merge_heads(context)), weights  # (B, T, D), (B, H, T, S)
        ### END SOLUTION


def mha_parameter_count(d_model: int, bias: bool = True) -> int:
    """The number of learnable numbers in MultiHeadAttention(d_model, num_heads, bias=bias).

    Args:
        d_model: D.
        bias: whether the four projections have biases.
    Returns:
        an int: 4*D*D weights, plus 4*D biases when bias is True. It does not depend on H.
    Raises:
        ValueError if d_model < 1.
    Work it out by hand; do not build a module and count its parameters (calling .parameters() or
    .named_parameters() scores zero).
    """
    ### BEGIN SOLUTION
    if d_model < 1:
        raise ValueError(f"d_model must be positive, got {d_model}")
    # Four D x D projections; splitting into heads slices them, it adds nothing.
    return 4 * d_model * d_model + (4 * d_model if bias else 0)
    ### END SOLUTION

"""Chapter 05: residual connections, LayerNorm, the feed-forward block and the encoder layer
(reference implementation)."""
import torch
import torch.nn as nn

from solutions.multi_head_attention import MultiHeadAttention


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Normalise each vector over its last axis to mean 0 and variance 1, then scale and shift.

    Args:
        x: (..., D).
        weight: (D,) the per-feature scale (gamma).
        bias: (D,) the per-feature shift (beta).
        eps: added to the variance inside the square root.
    Returns:
        same shape and dtype as x (float64 stays float64): (x - mean) / sqrt(var + eps) * weight + bias,
        where mean and var are taken over the last axis and var is the biased (divide by D) variance.
    Raises:
        ValueError if weight or bias is not of shape (D,).
    Do not modify x in place. Do not call F.layer_norm, torch.layer_norm, nn.LayerNorm or
    torch.var/std with their default (unbiased) setting.
    """
    ### BEGIN SOLUTION
    D = x.shape[-1]
    if weight.shape != (D,) or bias.shape != (D,):
        raise ValueError(f"weight and bias must have shape ({D},), got {tuple(weight.shape)} and {tuple(bias.shape)}")
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), divide by D, not D - 1
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
    ### END SOLUTION


class LayerNorm(nn.Module):
    """Layer normalisation with a learnable scale and shift per feature.

    Args:
        d_model: D, the size of the last axis.
        eps: added to the variance inside the square root.
    Attributes:
        weight: nn.Parameter (D,), initialised to ones; bias: nn.Parameter (D,), zeros.
    forward(x (..., D)) -> (..., D), the dtype of x (module.double() turns the parameters to float64).
    Use your layer_norm; do not call F.layer_norm, torch.layer_norm or nn.LayerNorm.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        ### BEGIN SOLUTION
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return layer_norm(x, self.weight, self.bias, self.eps)
        ### END SOLUTION


class PositionwiseFeedForward(nn.Module):
    """The same two-layer MLP applied to every position: linear2(dropout(relu(linear1(x)))).

    Args:
        d_model: D, input and output size.
        d_ff: the hidden size (4 * D in the original Transformer).
        dropout: probability of zeroing hidden units while training.
    Attributes:
        linear1: nn.Linear(D, d_ff); linear2: nn.Linear(d_ff, D); dropout: nn.Dropout, on the hidden
            units (after the ReLU, before linear2) in training mode; in eval mode it does nothing.
    forward(x (B, T, D)) -> (B, T, D), every position on its own.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))  # (B, T, D)
        ### END SOLUTION


class AddNorm(nn.Module):
    """The residual connection followed by LayerNorm: norm(x + dropout(sublayer_out)).

    Args:
        d_model: D.
        dropout: probability of zeroing entries of sublayer_out while training.
    Attributes:
        norm: your LayerNorm(D); dropout: nn.Dropout, on sublayer_out only (never on x) in
            training mode; in eval mode it does nothing.
    forward(x (B, T, D), sublayer_out (B, T, D)) -> (B, T, D); (T, D) inputs work too.
    Raises:
        ValueError if x and sublayer_out differ in shape.
    """

    def __init__(self, d_model: int, dropout: float = 0.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.norm = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x: torch.Tensor, sublayer_out: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        if x.shape != sublayer_out.shape:
            raise ValueError(f"x and sublayer_out must have the same shape, got "
                             f"{tuple(x.shape)} and {tuple(sublayer_out.shape)}")
        return self.norm(x + self.dropout(sublayer_out))
        ### END SOLUTION


class EncoderLayer(nn.Module):
    """One encoder block: self-attention then the feed-forward network, each with a residual and LayerNorm.

    Args:
        d_model: D; num_heads: H; d_ff: the feed-forward hidden size.
        dropout: used in attention, in the feed-forward block and on each sublayer's output.
        norm_first: False for Post-LN, x = norm(x + sublayer(x)) (the 2017 paper);
            True for Pre-LN, x = x + sublayer(norm(x)).
    Attributes:
        self_attn: MultiHeadAttention(D, H, dropout); ffn: PositionwiseFeedForward(D, d_ff, dropout);
        norm1, norm2: LayerNorm(D) (norm1 belongs to attention, norm2 to the feed-forward block);
        dropout1, dropout2: nn.Dropout modules, called on the two sublayers' outputs.
    forward(x (B, T, D), mask=None) -> (B, T, D); mask is bool, broadcastable to (B, H, T, T),
        True = may attend. self_attn(q, k, v, mask) returns (output, weights): use the output.
        Do not modify x in place (write x = x + ..., not x += ...).
    Dropout: in eval mode it does nothing. In training mode the tests swap every nn.Dropout of the
    layer for a fixed mask to see where it acts, so call the modules (not F.dropout).
    Do not call nn.TransformerEncoderLayer, nn.TransformerEncoder, nn.MultiheadAttention or
    F.multi_head_attention_forward.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False):
        super().__init__()
        ### BEGIN SOLUTION
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        ### BEGIN SOLUTION
        if self.norm_first:
            # Pre-LN: the residual stream x itself is never normalised.
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            # Post-LN: normalise after each residual sum.
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x  # (B, T, D)
        ### END SOLUTION


class Encoder(nn.Module):
    """A stack of num_layers EncoderLayers, each with its own weights.

    Args:
        num_layers: N, how many EncoderLayers; the other arguments are passed to each layer.
    Attributes:
        layers: nn.ModuleList of EncoderLayer.
        norm: a final LayerNorm(D) when norm_first is True (a Pre-LN stack never normalises
            its residual stream otherwise), nn.Identity() when it is False.
    forward(x (B, T, D), mask=None) -> (B, T, D): every layer in turn (same mask), then norm.
    Raises:
        ValueError if num_layers < 1.
    Each layer needs its own weights: build a new EncoderLayer for each, never reuse one object.
    Do not call nn.TransformerEncoder, nn.TransformerEncoderLayer, nn.MultiheadAttention or
    F.multi_head_attention_forward.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int,
                 dropout: float = 0.0, norm_first: bool = False):
        super().__init__()
        ### BEGIN SOLUTION
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers))
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()
        ### END SOLUTION

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        ### BEGIN SOLUTION
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)  # (B, T, D)
        ### END SOLUTION

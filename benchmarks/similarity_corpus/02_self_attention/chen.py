# %% softmax
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    dim = dim % x.dim()
    m = x.amax(dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    numerator = torch.exp(x - m)
    denominator = numerator.sum(dim, keepdim=True)
    result = numerator / denominator
    return result

# %% scaled_dot_product_attention
def _check_mask(mask, target_shape):
    if mask.dtype != torch.bool:
        raise ValueError("mask dtype must be torch.bool")
    padded = (1,) * (len(target_shape) - mask.dim()) + tuple(mask.shape)
    if mask.dim() > len(target_shape) or any(m != 1 and m != t for m, t in zip(padded, target_shape)):
        raise ValueError("mask cannot be broadcast to the scores")


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    T, Dk = q.shape[-2:]
    S = k.shape[-2]
    if k.shape[-1] != Dk:
        raise ValueError("Dk mismatch")
    if v.shape[-2] != S:
        raise ValueError("S mismatch")
    kt = k.swapaxes(-1, -2)
    raw = q @ kt
    raw = raw / Dk ** 0.5
    if mask is not None:
        _check_mask(mask, raw.shape)
        raw = raw.masked_fill(torch.logical_not(mask), -math.inf)
    probs = softmax(raw, -1)
    return probs @ v, probs

# %% SelfAttention
class SelfAttention(nn.Module):
    def __init__(self, d_model: int, d_k: int, d_v: int, bias: bool = False):
        super().__init__()
        self.dims = (d_model, d_k, d_v)
        layers = [nn.Linear(d_model, size, bias=bias) for size in (d_k, d_k, d_v)]
        self.W_q, self.W_k, self.W_v = layers

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if x.dim() == 3 and x.shape[-1] == self.dims[0]:
            return scaled_dot_product_attention(self.W_q(x), self.W_k(x), self.W_v(x), mask)
        raise ValueError("input must be of shape (B, T, d_model)")

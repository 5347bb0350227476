# %% softmax
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    axis = dim % x.dim()
    mx = x.amax(axis, keepdim=True)
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))  # -inf rows
    top = torch.exp(x - mx)
    bottom = top.sum(axis, keepdim=True)
    answer = top / bottom
    return answer

# %% scaled_dot_product_attention
def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    n_q, width = q.shape[-2:]
    n_k = k.shape[-2]
    if k.shape[-1] != width:
        raise ValueError("q and k widths differ")
    if v.shape[-2] != n_k:
        raise ValueError("k and v lengths differ")
    k_t = k.swapaxes(-1, -2)
    logits = q @ k_t
    logits = logits / width ** 0.5
    if mask is not None:
        validate(mask, logits.shape)
        logits = logits.masked_fill(torch.logical_not(mask), -math.inf)
    p = softmax(logits, -1)
    return p @ v, p


def validate(m, shape):
    # mask must be bool and broadcastable
    if m.dtype != torch.bool:
        raise ValueError("bool mask expected")
    full = (1,) * (len(shape) - m.dim()) + tuple(m.shape)
    if m.dim() > len(shape) or any(a != 1 and a != b for a, b in zip(full, shape)):
        raise ValueError("mask not broadcastable")

# %% SelfAttention
class SelfAttention(nn.Module):
    def __init__(self, d_model: int, d_k: int, d_v: int, bias: bool = False):
        super().__init__()
        self.sizes = (d_model, d_k, d_v)
        projections = []
        for out_size in (d_k, d_k, d_v):
            projections.append(nn.Linear(d_model, out_size, bias=bias))
        self.W_q, self.W_k, self.W_v = projections

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if x.dim() == 3 and x.shape[-1] == self.sizes[0]:
            return scaled_dot_product_attention(self.W_q(x), self.W_k(x), self.W_v(x), mask)
        raise ValueError("x should be (B, T, d_model)")

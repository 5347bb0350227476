# %% softmax
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    res = torch.empty_like(x)
    rows2d = x.movedim(dim, -1).reshape(-1, x.shape[dim])
    normalised = [(row - row.max()).exp() / (row - row.max()).exp().sum() for row in rows2d]
    res = torch.stack(normalised).reshape(x.movedim(dim, -1).shape).movedim(-1, dim)
    return res

# %% scaled_dot_product_attention
def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    good = q.shape[-1] == k.shape[-1] and k.shape[-2] == v.shape[-2]
    if not good:
        raise ValueError("q, k, v shapes do not fit")
    root = torch.tensor(q.shape[-1], dtype=q.dtype).sqrt()
    scores = (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1) / root
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError("bool mask please")
        if mask.ndim > scores.ndim or torch.broadcast_shapes(mask.shape, scores.shape) != scores.shape:
            raise ValueError("wrong mask shape")
        scores = scores + torch.zeros_like(scores).masked_fill(~mask, float("-inf"))
    attn = softmax(scores)
    ctx = (attn.unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)
    return ctx, attn

# %% SelfAttention
class SelfAttention(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        B, T, D = x.shape if x.dim() == 3 else (None, None, None)
        if D != self.in_dim:
            raise ValueError(f"bad input shape {tuple(x.shape)}")
        k_ = self.W_k(x)
        v_ = self.W_v(x)
        q_ = self.W_q(x)
        o, a = scaled_dot_product_attention(q_, k_, v_, mask)
        return o, a

    def __init__(self, d_model: int, d_k: int, d_v: int, bias: bool = False):
        nn.Module.__init__(self)
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_v, bias=bias)
        self.in_dim = d_model

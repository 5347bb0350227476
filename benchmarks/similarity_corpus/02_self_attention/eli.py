# %% softmax
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    out = torch.empty_like(x)
    flat = x.movedim(dim, -1).reshape(-1, x.shape[dim])
    rows = []
    for row in flat:
        r = row - row.max()
        r = r.exp()
        rows.append(r / r.sum())
    out = torch.stack(rows).reshape(x.movedim(dim, -1).shape).movedim(-1, dim)
    return out

# %% scaled_dot_product_attention
def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    assert_ok = q.shape[-1] == k.shape[-1] and k.shape[-2] == v.shape[-2]
    if not assert_ok:
        raise ValueError("incompatible q, k, v")
    sqrt_dk = torch.tensor(q.shape[-1], dtype=q.dtype).sqrt()
    sim = (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1) / sqrt_dk
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError("mask must be bool")
        if mask.ndim > sim.ndim or torch.broadcast_shapes(mask.shape, sim.shape) != sim.shape:
            raise ValueError("mask shape")
        sim = sim + torch.zeros_like(sim).masked_fill(~mask, float("-inf"))
    weights = softmax(sim)
    result = (weights.unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)
    return result, weights

# %% SelfAttention
class SelfAttention(nn.Module):
    def __init__(self, d_model: int, d_k: int, d_v: int, bias: bool = False):
        nn.Module.__init__(self)
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_v, bias=bias)
        self.size_in = d_model

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        B, T, D = x.shape if x.dim() == 3 else (None, None, None)
        if D != self.size_in:
            raise ValueError(f"got {tuple(x.shape)}")
        keys = self.W_k(x)
        vals = self.W_v(x)
        qs = self.W_q(x)
        out, att = scaled_dot_product_attention(qs, keys, vals, mask)
        return out, att

# %% softmax
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # move the axis to the end so I only have to think about the last one
    moved = x.transpose(dim, -1)
    biggest, _ = torch.max(moved, dim=-1, keepdim=True)
    top = torch.exp(moved - biggest)
    bottom = torch.sum(top, dim=-1, keepdim=True)
    return (top / bottom).transpose(dim, -1)

# %% scaled_dot_product_attention
def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    dk = q.shape[-1]
    if k.shape[-1] != dk or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"bad shapes {q.shape} {k.shape} {v.shape}")
    logits = torch.einsum("...td,...sd->...ts", q, k) * dk ** -0.5
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise ValueError("need a bool mask")
        ok = mask.dim() <= logits.dim()
        for a, b in zip(reversed(mask.shape), reversed(logits.shape)):
            ok = ok and a in (1, b)
        if not ok:
            raise ValueError(f"mask {tuple(mask.shape)} vs scores {tuple(logits.shape)}")
        neg = torch.full_like(logits, float("-inf"))
        logits = torch.where(mask, logits, neg)
    w = softmax(logits)
    out = torch.einsum("...ts,...sd->...td", w, v)
    return out, w

# %% SelfAttention
class SelfAttention(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        shape_ok = len(x.shape) == 3 and x.shape[2] == self.W_q.in_features
        if not shape_ok:
            raise ValueError(f"expected (B, T, {self.W_q.in_features}) but got {list(x.shape)}")
        queries, keys, values = self.W_q(x), self.W_k(x), self.W_v(x)
        output, weights = scaled_dot_product_attention(queries, keys, values, mask=mask)
        return output, weights

    def __init__(self, d_model: int, d_k: int, d_v: int, bias: bool = False):
        super().__init__()
        self.W_q, self.W_k = nn.Linear(d_model, d_k, bias), nn.Linear(d_model, d_k, bias)
        self.W_v = nn.Linear(d_model, d_v, bias)

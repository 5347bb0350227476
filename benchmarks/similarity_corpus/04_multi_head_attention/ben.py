# %% split_heads
def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    if len(x.shape) != 3 or num_heads <= 0 or x.shape[-1] % num_heads != 0:
        raise ValueError(f"cannot split {tuple(x.shape)} into {num_heads} heads")
    head_dim = x.shape[-1] // num_heads
    pieces = torch.split(x, head_dim, dim=-1)
    return torch.stack(pieces, dim=1)

# %% merge_heads
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    if len(x.shape) != 4:
        raise ValueError(f"need (B, H, T, Dh), got {tuple(x.shape)}")
    return torch.cat(torch.unbind(x, dim=1), dim=-1)

# %% MultiHeadAttention
class MultiHeadAttention(nn.Module):
    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        for t in (query, key, value):
            if t.shape[-1] != self.W_q.in_features:
                raise ValueError("wrong model width")
        if key.shape[-2] != value.shape[-2]:
            raise ValueError("key/value length mismatch")
        heads = [split_heads(proj(inp), self.h) for proj, inp in
                 ((self.W_q, query), (self.W_k, key), (self.W_v, value))]
        q, k, v = heads
        weights = scaled_dot_product_attention(q, k, v, mask)[1]
        weights = self.dropout(weights)
        mixed = torch.einsum("bhts,bhsd->bhtd", weights, v)
        return self.W_o(merge_heads(mixed)), weights

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads:
            raise ValueError(f"{num_heads} heads do not divide {d_model}")
        self.h = num_heads
        for name in ("W_q", "W_k", "W_v", "W_o"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))
        self.dropout = nn.Dropout(p=dropout)

# %% mha_parameter_count
def mha_parameter_count(d_model: int, bias: bool = True) -> int:
    if d_model < 1:
        raise ValueError("need d_model >= 1")
    per_projection = d_model * d_model + (d_model if bias else 0)
    return 4 * per_projection

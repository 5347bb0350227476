# %% split_heads
def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    if len(x.shape) != 3 or num_heads <= 0 or x.shape[-1] % num_heads != 0:
        raise ValueError(f"{num_heads} heads do not fit {tuple(x.shape)}")
    size = x.shape[-1] // num_heads
    chunks = torch.split(x, size, dim=-1)   # one chunk per head
    return torch.stack(chunks, dim=1)

# %% merge_heads
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    # glue the heads back together
    if len(x.shape) != 4:
        raise ValueError(f"expected 4 dims, got {tuple(x.shape)}")
    return torch.cat(torch.unbind(x, dim=1), dim=-1)

# %% MultiHeadAttention
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads:
            raise ValueError(f"d_model {d_model} not divisible by {num_heads}")
        self.n_heads = num_heads
        for attr in ("W_q", "W_k", "W_v", "W_o"):
            setattr(self, attr, nn.Linear(d_model, d_model, bias=bias))
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        for tensor in (query, key, value):
            if tensor.shape[-1] != self.W_q.in_features:
                raise ValueError("input width is not d_model")
        if key.shape[-2] != value.shape[-2]:
            raise ValueError("key and value lengths differ")
        projected = []
        for layer, src in ((self.W_q, query), (self.W_k, key), (self.W_v, value)):
            projected.append(split_heads(layer(src), self.n_heads))
        qq, kk, vv = projected
        attn = scaled_dot_product_attention(qq, kk, vv, mask)[1]
        attn = self.dropout(attn)
        combined = torch.einsum("bhts,bhsd->bhtd", attn, vv)
        return self.W_o(merge_heads(combined)), attn

# %% mha_parameter_count
def mha_parameter_count(d_model: int, bias: bool = True) -> int:
    if d_model < 1:
        raise ValueError("d_model must be at least 1")
    one_layer = d_model * d_model + (d_model if bias else 0)
    return 4 * one_layer

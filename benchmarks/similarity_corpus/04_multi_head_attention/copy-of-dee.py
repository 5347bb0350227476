# %% split_heads
def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    if x.dim() != 3:
        raise ValueError("x should be 3-d")
    if num_heads < 1:
        raise ValueError("num_heads must be >= 1")
    width = x.shape[2]
    if width % num_heads:
        raise ValueError("H must divide D")
    step = width // num_heads
    parts = []
    for i in range(num_heads):
        parts.append(x[:, :, i * step:(i + 1) * step])
    return torch.stack(parts, dim=1)

# %% merge_heads
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    if x.dim() != 4:
        raise ValueError("x should be 4-d")
    nb, nh, nt, hd = x.shape
    merged = x.new_empty(nb, nt, nh * hd)
    for j in range(nh):
        merged[:, :, j * hd:(j + 1) * hd] = x[:, j]
    return merged

# %% MultiHeadAttention
class MultiHeadAttention(nn.Module):
    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if any(t.shape[-1] != self.dim for t in (query, key, value)):
            raise ValueError("inputs must have d_model features")
        if key.shape[1] != value.shape[1]:
            raise ValueError("key and value lengths differ")
        B, T, _ = query.shape
        qs = self.W_q(query).view(B, T, self.h, -1).transpose(1, 2)
        ks = split_heads(self.W_k(key), self.h)
        vs = split_heads(self.W_v(value), self.h)
        result, weights = scaled_dot_product_attention(qs, ks, vs, mask)
        if self.training and self.dropout.p > 0:
            weights = self.dropout(weights)
            result = weights @ vs
        return self.W_o(merge_heads(result)), weights

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        divisible = num_heads > 0 and d_model % num_heads == 0
        if not divisible:
            raise ValueError("num_heads must divide d_model")
        self.h, self.dim = num_heads, d_model
        self.W_q = nn.Linear(d_model, d_model, bias)
        self.W_k = nn.Linear(d_model, d_model, bias)
        self.W_v = nn.Linear(d_model, d_model, bias)
        self.W_o = nn.Linear(d_model, d_model, bias)
        self.dropout = nn.Dropout(dropout)

# %% mha_parameter_count
def mha_parameter_count(d_model: int, bias: bool = True) -> int:
    # 4 projections, each D*D (+D)
    if d_model < 1:
        raise ValueError("d_model must be positive")
    return 4 * d_model * (d_model + int(bias))

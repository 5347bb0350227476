# %% split_heads
def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    if x.dim() != 3:
        raise ValueError("split_heads wants 3 dimensions")
    if num_heads < 1:
        raise ValueError("need at least one head")
    d = x.shape[2]
    if d % num_heads:
        raise ValueError("D not divisible by H")
    dh = d // num_heads
    heads = [x[:, :, h * dh:(h + 1) * dh] for h in range(num_heads)]
    return torch.stack(heads, dim=1)

# %% merge_heads
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    if x.dim() != 4:
        raise ValueError("merge_heads wants 4 dimensions")
    b, h, t, dh = x.shape
    out = x.new_empty(b, t, h * dh)
    for head in range(h):
        out[:, :, head * dh:(head + 1) * dh] = x[:, head]
    return out

# %% MultiHeadAttention
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        assert_divisible = num_heads > 0 and d_model % num_heads == 0
        if not assert_divisible:
            raise ValueError("heads must divide the model size")
        self.n_heads, self.width = num_heads, d_model
        self.W_q = nn.Linear(d_model, d_model, bias)
        self.W_k = nn.Linear(d_model, d_model, bias)
        self.W_v = nn.Linear(d_model, d_model, bias)
        self.W_o = nn.Linear(d_model, d_model, bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if any(t.shape[-1] != self.width for t in (query, key, value)):
            raise ValueError("an input does not end in d_model")
        if key.shape[1] != value.shape[1]:
            raise ValueError("S differs between key and value")
        B, T, _ = query.shape
        q = self.W_q(query).view(B, T, self.n_heads, -1).transpose(1, 2)
        k = split_heads(self.W_k(key), self.n_heads)
        v = split_heads(self.W_v(value), self.n_heads)
        out, w = scaled_dot_product_attention(q, k, v, mask)
        if self.training and self.dropout.p > 0:
            w = self.dropout(w)
            out = w @ v
        return self.W_o(merge_heads(out)), w

# %% mha_parameter_count
def mha_parameter_count(d_model: int, bias: bool = True) -> int:
    if d_model < 1:
        raise ValueError("d_model too small")
    return 4 * d_model * (d_model + int(bias))

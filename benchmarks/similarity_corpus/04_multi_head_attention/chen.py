# %% split_heads
def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    if x.ndim != 3:
        raise ValueError("expected a (B, T, D) tensor")
    batch, length, width = x.size()
    if num_heads < 1 or width % num_heads != 0:
        raise ValueError("bad number of heads")
    return x.unflatten(-1, (num_heads, width // num_heads)).transpose(-3, -2)

# %% merge_heads
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    if x.ndim != 4:
        raise ValueError("expected a (B, H, T, Dh) tensor")
    return x.transpose(-3, -2).flatten(start_dim=-2)

# %% MultiHeadAttention
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads:
            raise ValueError("num_heads must divide d_model")
        self.cfg = {"D": d_model, "H": num_heads}
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    def _heads(self, layer, x):
        return split_heads(layer(x), self.cfg["H"])

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if {query.shape[-1], key.shape[-1], value.shape[-1]} != {self.cfg["D"]}:
            raise ValueError("inputs must end in d_model")
        if key.shape[1] != value.shape[1]:
            raise ValueError("key and value must have the same length")
        qh, kh, vh = self._heads(self.W_q, query), self._heads(self.W_k, key), self._heads(self.W_v, value)
        _, p = scaled_dot_product_attention(qh, kh, vh, mask)
        p = self.dropout(p)
        return self.W_o(merge_heads(torch.matmul(p, vh))), p

# %% mha_parameter_count
def mha_parameter_count(d_model: int, bias: bool = True) -> int:
    if not d_model >= 1:
        raise ValueError("d_model < 1")
    total = 0
    for _ in range(4):
        total += d_model ** 2
        if bias:
            total += d_model
    return total

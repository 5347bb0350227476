# %% split_heads
def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    shape = tuple(x.shape)
    ok = len(shape) == 3 and num_heads >= 1 and shape[-1] % num_heads == 0
    if not ok:
        raise ValueError(f"split_heads: bad input {shape} / {num_heads}")
    return torch.einsum("bthd->bhtd", x.reshape(shape[0], shape[1], num_heads, -1))

# %% merge_heads
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    if len(x.shape) != 4:
        raise ValueError(f"merge_heads: bad input {tuple(x.shape)}")
    y = torch.einsum("bhtd->bthd", x)
    return y.reshape(y.shape[0], y.shape[1], -1)

# %% MultiHeadAttention
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super(MultiHeadAttention, self).__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError("d_model % num_heads != 0")
        self.heads = num_heads
        self.model_size = d_model
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        sizes = [t.shape[-1] for t in (query, key, value)]
        if sizes != [self.model_size] * 3:
            raise ValueError(f"expected last size {self.model_size}, got {sizes}")
        if key.shape[1] != value.shape[1]:
            raise ValueError("key and value: different S")
        projected = {}
        for name, layer, t in (("q", self.W_q, query), ("k", self.W_k, key), ("v", self.W_v, value)):
            projected[name] = split_heads(layer(t), self.heads)
        scores, weights = scaled_dot_product_attention(projected["q"], projected["k"], projected["v"], mask)
        weights = self.dropout(weights)
        context = weights.matmul(projected["v"])
        return self.W_o(merge_heads(context)), weights

# %% mha_parameter_count
def mha_parameter_count(d_model: int, bias: bool = True) -> int:
    if d_model < 1:
        raise ValueError(f"d_model={d_model} < 1")
    n_layers, w, b = 4, d_model * d_model, d_model
    return n_layers * (w + b) if bias else n_layers * w

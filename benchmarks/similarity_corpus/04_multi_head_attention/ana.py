# %% split_heads
def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    if x.dim() != 3:
        raise ValueError("x must be 3-d")
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("num_heads must divide D")
    return x.reshape(B, T, num_heads, D // num_heads).permute(0, 2, 1, 3)

# %% merge_heads
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    if x.dim() != 4:
        raise ValueError("x must be 4-d")
    B, H, T, Dh = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(B, T, H * Dh)

# %% MultiHeadAttention
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.d_model = d_model
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if query.size(-1) != self.d_model or key.size(-1) != self.d_model or value.size(-1) != self.d_model:
            raise ValueError("last size must be d_model")
        if key.size(1) != value.size(1):
            raise ValueError("key and value lengths differ")
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_k(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        _, attn = scaled_dot_product_attention(q, k, v, mask)
        attn = self.dropout(attn)
        out = merge_heads(attn @ v)
        return self.W_o(out), attn

# %% mha_parameter_count
def mha_parameter_count(d_model: int, bias: bool = True) -> int:
    if d_model < 1:
        raise ValueError("d_model must be positive")
    weights = 4 * d_model * d_model
    biases = 4 * d_model if bias else 0
    return weights + biases

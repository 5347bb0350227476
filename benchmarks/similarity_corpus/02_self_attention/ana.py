# %% softmax
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    shifted = x - x.max(dim=dim, keepdim=True).values
    exps = shifted.exp()
    return exps / exps.sum(dim=dim, keepdim=True)

# %% scaled_dot_product_attention
def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    if q.size(-1) != k.size(-1):
        raise ValueError("q and k must have the same last dimension")
    if k.size(-2) != v.size(-2):
        raise ValueError("k and v must have the same length")
    if mask is not None and mask.dtype is not torch.bool:
        raise ValueError("mask must be boolean")
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.size(-1))
    if mask is not None:
        try:
            torch.broadcast_shapes(mask.shape, scores.shape)
        except RuntimeError as e:
            raise ValueError("mask does not broadcast") from e
        if mask.dim() > scores.dim():
            raise ValueError("mask has too many dimensions")
        scores = scores.masked_fill(mask == False, float("-inf"))  # noqa: E712
    attn = softmax(scores, dim=-1)
    return torch.matmul(attn, v), attn

# %% SelfAttention
class SelfAttention(nn.Module):
    def __init__(self, d_model: int, d_k: int, d_v: int, bias: bool = False):
        super().__init__()
        self.d_model = d_model
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_v, bias=bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if x.ndim != 3 or x.size(-1) != self.d_model:
            raise ValueError("x must be (B, T, d_model)")
        return scaled_dot_product_attention(self.W_q(x), self.W_k(x), self.W_v(x), mask)

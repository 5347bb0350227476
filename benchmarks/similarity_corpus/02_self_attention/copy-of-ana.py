# %% softmax
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Stable softmax (subtract the max first)."""
    centred = x - x.max(dim=dim, keepdim=True).values   # avoid overflow
    e = centred.exp()
    return e / e.sum(dim=dim, keepdim=True)

# %% scaled_dot_product_attention
def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    # shape checks
    if q.size(-1) != k.size(-1):
        raise ValueError("last dims of q and k differ")
    if k.size(-2) != v.size(-2):
        raise ValueError("lengths of k and v differ")
    if mask is not None and mask.dtype is not torch.bool:
        raise ValueError("the mask should be a bool tensor")

    att_logits = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.size(-1))

    if mask is not None:
        try:
            torch.broadcast_shapes(mask.shape, att_logits.shape)
        except RuntimeError as err:
            raise ValueError("bad mask shape") from err
        if mask.dim() > att_logits.dim():
            raise ValueError("too many mask dims")
        att_logits = att_logits.masked_fill(mask == False, float("-inf"))  # noqa: E712

    probs = softmax(att_logits, dim=-1)
    return torch.matmul(probs, v), probs

# %% SelfAttention
class SelfAttention(nn.Module):
    def forward(self, inputs: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        # check the input is (batch, time, width)
        if inputs.ndim != 3 or inputs.size(-1) != self.width:
            raise ValueError("expected input of shape (B, T, d_model)")
        return scaled_dot_product_attention(self.W_q(inputs), self.W_k(inputs), self.W_v(inputs), mask)

    def __init__(self, d_model: int, d_k: int, d_v: int, bias: bool = False):
        super().__init__()
        self.width = d_model
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, d_v, bias=bias)

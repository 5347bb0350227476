# %% softmax
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # log-sum-exp trick by hand
    c = torch.max(x, dim, True)[0]
    lse = c + torch.log(torch.sum(torch.exp(x - c), dim, True))
    return torch.exp(x - lse)

# %% scaled_dot_product_attention
def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    problems = []
    if q.shape[-1] != k.shape[-1]:
        problems.append("q/k last dim")
    if k.shape[-2] != v.shape[-2]:
        problems.append("k/v length")
    if mask is not None and mask.dtype != torch.bool:
        problems.append("mask dtype")
    if problems:
        raise ValueError(", ".join(problems))
    scale = 1.0 / math.sqrt(k.shape[-1])
    s = torch.bmm(q.reshape(-1, *q.shape[-2:]), k.reshape(-1, *k.shape[-2:]).transpose(1, 2))
    s = s.reshape(*q.shape[:-1], k.shape[-2]) * scale
    if mask is not None:
        if mask.dim() > s.dim():
            raise ValueError("mask has more axes than the scores")
        try:
            mask = mask.expand_as(s)
        except RuntimeError:
            raise ValueError("mask shape is wrong") from None
        s = s.masked_fill(~mask, float("-inf"))
    a = softmax(s, dim=-1)
    o = torch.matmul(a, v)
    return o, a

# %% SelfAttention
class SelfAttention(nn.Module):
    def __init__(self, d_model: int, d_k: int, d_v: int, bias: bool = False):
        super().__init__()
        self.expected_width = d_model
        self.W_q = nn.Linear(in_features=d_model, out_features=d_k, bias=bias)
        self.W_k = nn.Linear(in_features=d_model, out_features=d_k, bias=bias)
        self.W_v = nn.Linear(in_features=d_model, out_features=d_v, bias=bias)

    def project(self, x):
        return self.W_q(x), self.W_k(x), self.W_v(x)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if x.dim() != 3:
            raise ValueError("x needs 3 dims")
        if x.shape[-1] != self.expected_width:
            raise ValueError("x has the wrong width")
        q, k, v = self.project(x)
        return scaled_dot_product_attention(q, k, v, mask)

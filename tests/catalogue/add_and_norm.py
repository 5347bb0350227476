from tests.catalogue import Variant, do_nothing

_SHAPES = '''
    D = x.shape[-1]
    if weight.shape != (D,) or bias.shape != (D,):
        raise ValueError("weight and bias must have shape (D,)")
'''

_LAYER_INIT = '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
'''

_ENCODER_FORWARD = '''
    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)
'''

# ------------------------------------------------------------------ wrong implementations
WRONG = [
    Variant("layer_norm", "unbiased variance (torch.var default, divides by D - 1)", '''
def layer_norm(x, weight, bias, eps=1e-5):''' + _SHAPES + '''
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
'''),
    Variant("layer_norm", "eps added outside the square root", '''
def layer_norm(x, weight, bias, eps=1e-5):''' + _SHAPES + '''
    mean = x.mean(-1, keepdim=True)
    std = ((x - mean) ** 2).mean(-1, keepdim=True).sqrt()
    return (x - mean) / (std + eps) * weight + bias
'''),
    Variant("layer_norm", "std with the default unbiased setting plus eps outside (x.std)", '''
def layer_norm(x, weight, bias, eps=1e-5):''' + _SHAPES + '''
    return weight * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) + bias
'''),
    Variant("layer_norm", "normalises over dim 0 (the batch) instead of the last axis", '''
def layer_norm(x, weight, bias, eps=1e-5):''' + _SHAPES + '''
    mean = x.mean(0, keepdim=True)
    var = ((x - mean) ** 2).mean(0, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
'''),
    Variant("layer_norm", "normalises over dim 1", '''
def layer_norm(x, weight, bias, eps=1e-5):''' + _SHAPES + '''
    dim = 1 if x.dim() > 1 else 0
    mean = x.mean(dim, keepdim=True)
    var = ((x - mean) ** 2).mean(dim, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''', at_most=0.34),
    Variant("layer_norm", "forgot weight and bias", '''
def layer_norm(x, weight, bias, eps=1e-5):''' + _SHAPES + '''
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)
'''),
    Variant("layer_norm", "eps ignored (hard-coded 1e-5)", '''
def layer_norm(x, weight, bias, eps=1e-5):''' + _SHAPES + '''
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * weight + bias
'''),
    Variant("layer_norm", "calls F.layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):''' + _SHAPES + '''
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)
'''),
    Variant("LayerNorm", "weight and bias are plain tensors, not nn.Parameter", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.ones(d_model)
        self.bias = torch.zeros(d_model)

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
'''),
    Variant("LayerNorm", "weight initialised randomly", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
'''),
    Variant("LayerNorm", "eps not passed on to layer_norm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias)
'''),
    Variant("LayerNorm", "wraps nn.LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.inner = nn.LayerNorm(d_model, eps=eps)
        self.weight, self.bias = self.inner.weight, self.inner.bias

    def forward(self, x):
        return self.inner(x)
'''),
    Variant("PositionwiseFeedForward", "no activation between the linear layers", '''
class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(self.linear1(x)))
'''),
    Variant("PositionwiseFeedForward", "ReLU after linear2 instead of between the layers", '''
class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return torch.relu(self.linear2(self.dropout(self.linear1(x))))
'''),
    Variant("PositionwiseFeedForward", "dropout on the output instead of the hidden units", '''
class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.linear2(torch.relu(self.linear1(x))))
'''),
    Variant("AddNorm", "normalises before adding: norm(x) + sublayer_out", '''
class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0):
        super().__init__()
        self.norm = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer_out):
        if x.shape != sublayer_out.shape:
            raise ValueError("shapes differ")
        return self.norm(x) + self.dropout(sublayer_out)
'''),
    Variant("AddNorm", "drops the residual: norm(sublayer_out)", '''
class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0):
        super().__init__()
        self.norm = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer_out):
        if x.shape != sublayer_out.shape:
            raise ValueError("shapes differ")
        return self.norm(self.dropout(sublayer_out))
'''),
    Variant("AddNorm", "dropout on the sum instead of on sublayer_out", '''
class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0):
        super().__init__()
        self.norm = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer_out):
        if x.shape != sublayer_out.shape:
            raise ValueError("shapes differ")
        return self.norm(self.dropout(x + sublayer_out))
'''),
    Variant("AddNorm", "no shape check (broadcasts silently)", '''
class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0):
        super().__init__()
        self.norm = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer_out):
        return self.norm(x + self.dropout(sublayer_out))
'''),
    Variant("EncoderLayer", "Pre-LN normalises the residual stream: x = norm(x) + sublayer(norm(x))",
            _LAYER_INIT + '''
    def forward(self, x, mask=None):
        if self.norm_first:
            x = self.norm1(x)
            x = x + self.dropout1(self.self_attn(x, x, x, mask)[0])
            x = self.norm2(x)
            return x + self.dropout2(self.ffn(x))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))
        return self.norm2(x + self.dropout2(self.ffn(x)))
'''),
    Variant("EncoderLayer", "norm1 and norm2 swapped", _LAYER_INIT + '''
    def forward(self, x, mask=None):
        if self.norm_first:
            h = self.norm2(x)
            x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])
            return x + self.dropout2(self.ffn(self.norm1(x)))
        x = self.norm2(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))
        return self.norm1(x + self.dropout2(self.ffn(x)))
'''),
    Variant("EncoderLayer", "Post-LN applies the FFN to the pre-attention x", _LAYER_INIT + '''
    def forward(self, x, mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])
            return x + self.dropout2(self.ffn(self.norm2(x)))
        a = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))
        return self.norm2(a + self.dropout2(self.ffn(x)))
'''),
    Variant("EncoderLayer", "norm_first ignored (always Post-LN)", _LAYER_INIT + '''
    def forward(self, x, mask=None):
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))
        return self.norm2(x + self.dropout2(self.ffn(x)))
'''),
    Variant("EncoderLayer", "mask not passed to self-attention", _LAYER_INIT + '''
    def forward(self, x, mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h)[0])
            return x + self.dropout2(self.ffn(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x)[0]))
        return self.norm2(x + self.dropout2(self.ffn(x)))
''', at_most=0.34),  # kept 3.11 of 4 before issue 39
    Variant("EncoderLayer", "Pre-LN with a LayerNorm after the residual too (both norms on every sublayer)",
            _LAYER_INIT + '''
    def forward(self, x, mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = self.norm1(x + self.dropout1(self.self_attn(h, h, h, mask)[0]))
            return self.norm2(x + self.dropout2(self.ffn(self.norm2(x))))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))
        return self.norm2(x + self.dropout2(self.ffn(x)))
'''),
    Variant("EncoderLayer", "dropout1 and dropout2 created but never applied", _LAYER_INIT + '''
    def forward(self, x, mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.self_attn(h, h, h, mask)[0]
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.self_attn(x, x, x, mask)[0])
        return self.norm2(x + self.ffn(x))
'''),
    Variant("EncoderLayer", "dropout not passed on to self_attn and ffn", _LAYER_INIT.replace(
        "MultiHeadAttention(d_model, num_heads, dropout)", "MultiHeadAttention(d_model, num_heads)").replace(
        "PositionwiseFeedForward(d_model, d_ff, dropout)", "PositionwiseFeedForward(d_model, d_ff)") + '''
    def forward(self, x, mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])
            return x + self.dropout2(self.ffn(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))
        return self.norm2(x + self.dropout2(self.ffn(x)))
'''),
    Variant("EncoderLayer", "Post-LN drops out the residual sum, not the sublayer output", _LAYER_INIT + '''
    def forward(self, x, mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])
            return x + self.dropout2(self.ffn(self.norm2(x)))
        x = self.norm1(self.dropout1(x + self.self_attn(x, x, x, mask)[0]))
        return self.norm2(self.dropout2(x + self.ffn(x)))
'''),
    Variant("EncoderLayer", "Pre-LN forgets dropout2 on the feed-forward output", _LAYER_INIT + '''
    def forward(self, x, mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))
        return self.norm2(x + self.dropout2(self.ffn(x)))
'''),
    Variant("EncoderLayer", "wraps nn.TransformerEncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.inner = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout, batch_first=True,
                                                norm_first=norm_first)

    def forward(self, x, mask=None):
        return self.inner(x, src_mask=None if mask is None else ~mask)
'''),
    Variant("Encoder", "one layer reused num_layers times (shared weights)", '''
class Encoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        if num_layers < 1:
            raise ValueError("num_layers must be positive")
        layer = EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
        self.layers = nn.ModuleList([layer] * num_layers)
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()
''' + _ENCODER_FORWARD),
    Variant("Encoder", "no final LayerNorm for Pre-LN", '''
class Encoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        if num_layers < 1:
            raise ValueError("num_layers must be positive")
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = nn.Identity()
''' + _ENCODER_FORWARD),
    Variant("Encoder", "final LayerNorm after a Post-LN stack too", '''
class Encoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        if num_layers < 1:
            raise ValueError("num_layers must be positive")
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = LayerNorm(d_model)
''' + _ENCODER_FORWARD),
    Variant("Encoder", "mask not passed to the layers", '''
class Encoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        if num_layers < 1:
            raise ValueError("num_layers must be positive")
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)
''', at_most=0.34),  # kept 2.57 of 3 before issue 39
    Variant("Encoder", "every layer gets the encoder input instead of the previous layer's output", '''
class Encoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        if num_layers < 1:
            raise ValueError("num_layers must be positive")
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, x, mask=None):
        out = x
        for layer in self.layers:
            out = layer(x, mask)
        return self.norm(out)
'''),
    Variant("Encoder", "calls nn.TransformerEncoder", '''
class Encoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        if num_layers < 1:
            raise ValueError("num_layers must be positive")
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()
        self.inner = nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout,
                                           batch_first=True, norm_first=norm_first), num_layers,
                                           enable_nested_tensor=False)

    def forward(self, x, mask=None):
        self.inner(x)
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)
'''),
]

# side rules (ValueError, in place) earned these points before issue 29; now they earn nothing
WRONG += [*do_nothing("Encoder", "__init__ raises ValueError")]

# ------------------------------------------------------------------ correct, written differently
CORRECT = [
    Variant("layer_norm", "torch.var_mean with correction=0 and rsqrt", '''
def layer_norm(x, weight, bias, eps=1e-5):
    if weight.shape != x.shape[-1:] or bias.shape != x.shape[-1:]:
        raise ValueError(f"weight/bias must match the last axis {tuple(x.shape[-1:])}")
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    return torch.addcmul(bias, (x - mean) * torch.rsqrt(var + eps), weight)
'''),
    Variant("layer_norm", "E[x^2] - E[x]^2 in float64, then back", '''
def layer_norm(x, weight, bias, eps=1e-5):
    n = x.size(-1)
    if tuple(weight.shape) != (n,) or tuple(bias.shape) != (n,):
        raise ValueError("weight and bias need one entry per feature")
    z = x.double()
    mean = z.sum(-1, keepdim=True) / n
    var = (z * z).sum(-1, keepdim=True) / n - mean ** 2
    y = (z - mean) / (var + eps).sqrt()
    return (y * weight.double() + bias.double()).to(x.dtype)
'''),
    Variant("layer_norm", "E[x^2] - E[x]^2 in float32", '''
def layer_norm(x, weight, bias, eps=1e-5):
    if list(weight.shape) != [x.shape[-1]] or list(bias.shape) != [x.shape[-1]]:
        raise ValueError("weight and bias must have one entry per feature")
    mean = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mean * mean
    return (x - mean) / (var + eps) ** 0.5 * weight + bias
'''),
    Variant("layer_norm", "torch.std(unbiased=False), eps under the root by hand", '''
def layer_norm(x, weight, bias, eps=1e-5):
    if weight.dim() != 1 or weight.numel() != x.shape[-1] or bias.shape != weight.shape:
        raise ValueError("bad weight/bias shape")
    centred = x - x.mean(dim=-1, keepdim=True)
    std = torch.sqrt(torch.std(x, dim=-1, keepdim=True, unbiased=False) ** 2 + eps)
    return weight * centred / std + bias
'''),
    Variant("LayerNorm", "inline computation with torch.var(correction=0)", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = torch.var(x, dim=-1, keepdim=True, correction=0)
        return self.weight * (x - mu) / torch.sqrt(var + self.eps) + self.bias
'''),
    Variant("PositionwiseFeedForward", "F.relu and a Sequential-free forward with clamp", '''
class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, bias=True)
        self.linear2 = nn.Linear(d_ff, d_model, bias=True)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x):
        hidden = self.linear1(x).clamp(min=0)
        return self.linear2(self.dropout(hidden))
'''),
    Variant("AddNorm", "sum first, then norm, written in two lines", '''
class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.norm = LayerNorm(d_model)

    def forward(self, x, sublayer_out):
        if x.size() != sublayer_out.size():
            raise ValueError(f"cannot add {tuple(sublayer_out.size())} to {tuple(x.size())}")
        residual = x + self.dropout(sublayer_out)
        return self.norm(residual)
'''),
    Variant("EncoderLayer", "torch-style _sa_block / _ff_block helpers", _LAYER_INIT + '''
    def _sa_block(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask=mask)[0])

    def _ff_block(self, x):
        return self.dropout2(self.ffn(x))

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), mask)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, mask))
            x = self.norm2(x + self._ff_block(x))
        return x
'''),
    Variant("EncoderLayer", "one dropout module called for both sublayers (dropout2 kept unused)", _LAYER_INIT + '''
    def forward(self, x, mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])
            return x + self.dropout1(self.ffn(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))
        return self.norm2(x + self.dropout1(self.ffn(x)))
'''),
    Variant("Encoder", "layers from a list, final norm None for Post-LN", '''
class Encoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        if not num_layers >= 1:
            raise ValueError(f"need at least one layer, got {num_layers}")
        layers = []
        for _ in range(num_layers):
            layers.append(EncoderLayer(d_model, num_heads, d_ff, dropout=dropout, norm_first=norm_first))
        self.layers = nn.ModuleList(layers)
        self.norm = LayerNorm(d_model) if norm_first else None

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask=mask)
        if self.norm is not None:
            x = self.norm(x)
        return x
'''),
]

# issue 29: an input changed in place must never write the expected value (the answer for zeros
# is the expected value of a check that computes it from the input after the call)
WRONG += [
    Variant("layer_norm", "zeroes the input in place and returns the answer for that", '''\
_ref_layer_norm = layer_norm

def layer_norm(x, weight, bias, eps=1e-5):
    x.zero_()
    return _ref_layer_norm(x, weight, bias, eps)
'''),
]

from tests.catalogue import Variant, do_nothing

# ------------------------------------------------------------------ wrong implementations
_CHECK = '''
    if max_len < 1 or d_model < 1 or d_model % 2:
        raise ValueError("bad sizes")
'''

WRONG = [
    Variant("sinusoidal_positional_encoding", "sin and cos swapped", '''
def sinusoidal_positional_encoding(max_len, d_model):''' + _CHECK + '''
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    inv = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    P = torch.zeros(max_len, d_model)
    P[:, 0::2] = torch.cos(pos * inv)
    P[:, 1::2] = torch.sin(pos * inv)
    return P
''', at_most=0.5),
    Variant("sinusoidal_positional_encoding", "sin half then cos half (concatenated, not interleaved)", '''
def sinusoidal_positional_encoding(max_len, d_model):''' + _CHECK + '''
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    inv = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    return torch.cat([torch.sin(pos * inv), torch.cos(pos * inv)], dim=-1)
'''),
    Variant("sinusoidal_positional_encoding", "exponent 2j/d with j the column index (seed bug)", '''
def sinusoidal_positional_encoding(max_len, d_model):''' + _CHECK + '''
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    j = torch.arange(d_model, dtype=torch.float32)
    angle = pos / 10000.0 ** (2 * j / d_model)
    P = angle.clone()
    P[:, 0::2] = torch.sin(angle[:, 0::2])
    P[:, 1::2] = torch.cos(angle[:, 1::2])
    return P
'''),
    Variant("sinusoidal_positional_encoding", "exponent j/d per column (cos column gets its own frequency)", '''
def sinusoidal_positional_encoding(max_len, d_model):''' + _CHECK + '''
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    j = torch.arange(d_model, dtype=torch.float32)
    angle = pos / 10000.0 ** (j / d_model)
    return torch.where(j.long() % 2 == 0, torch.sin(angle), torch.cos(angle))
'''),
    Variant("sinusoidal_positional_encoding", "pair index i without the factor 2: 10000**(i/d)", '''
def sinusoidal_positional_encoding(max_len, d_model):''' + _CHECK + '''
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    i = torch.arange(d_model // 2, dtype=torch.float32)
    angle = pos / 10000.0 ** (i / d_model)
    return torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).flatten(1)
'''),
    Variant("sinusoidal_positional_encoding", "positions start at 1", '''
def sinusoidal_positional_encoding(max_len, d_model):''' + _CHECK + '''
    pos = torch.arange(1, max_len + 1, dtype=torch.float32)[:, None]
    inv = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    P = torch.zeros(max_len, d_model)
    P[:, 0::2] = torch.sin(pos * inv)
    P[:, 1::2] = torch.cos(pos * inv)
    return P
'''),
    Variant("sinusoidal_positional_encoding", "base 1000 instead of 10000", '''
def sinusoidal_positional_encoding(max_len, d_model):''' + _CHECK + '''
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    inv = 1000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    P = torch.zeros(max_len, d_model)
    P[:, 0::2] = torch.sin(pos * inv)
    P[:, 1::2] = torch.cos(pos * inv)
    return P
'''),
    Variant("sinusoidal_positional_encoding", "positions divided by max_len", '''
def sinusoidal_positional_encoding(max_len, d_model):''' + _CHECK + '''
    pos = torch.arange(max_len, dtype=torch.float32)[:, None] / max_len
    inv = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    P = torch.zeros(max_len, d_model)
    P[:, 0::2] = torch.sin(pos * inv)
    P[:, 1::2] = torch.cos(pos * inv)
    return P
'''),
    Variant("sinusoidal_positional_encoding", "no argument validation", '''
def sinusoidal_positional_encoding(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    inv = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    P = torch.zeros(max_len, d_model)
    P[:, 0::2] = torch.sin(pos * inv)
    P[:, 1::2] = torch.cos(pos * inv)[:, : d_model // 2]
    return P
'''),
    Variant("sinusoidal_positional_encoding", "float64 table (numpy habit)", '''
def sinusoidal_positional_encoding(max_len, d_model):''' + _CHECK + '''
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    inv = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    P = torch.zeros(max_len, d_model, dtype=torch.float64)
    P[:, 0::2] = torch.sin(pos * inv)
    P[:, 1::2] = torch.cos(pos * inv)
    return P
'''),
    Variant("relative_position_matrix", "transposed blocks (rotates by -offset)", '''
def relative_position_matrix(offset, d_model):
    if d_model < 1 or d_model % 2:
        raise ValueError("d_model must be even")
    M = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        a = offset / 10000 ** (2 * i / d_model)
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = math.cos(a), -math.sin(a)
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = math.sin(a), math.cos(a)
    return M
'''),
    Variant("relative_position_matrix", "wrong frequency per block (10000**(i/d))", '''
def relative_position_matrix(offset, d_model):
    if d_model < 1 or d_model % 2:
        raise ValueError("d_model must be even")
    M = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        a = offset / 10000 ** (i / d_model)
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = math.cos(a), math.sin(a)
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = -math.sin(a), math.cos(a)
    return M
'''),
    Variant("relative_position_matrix", "angle = offset in every block (frequency forgotten)", '''
def relative_position_matrix(offset, d_model):
    if d_model < 1 or d_model % 2:
        raise ValueError("d_model must be even")
    c, s = math.cos(offset), math.sin(offset)
    block = torch.tensor([[c, s], [-s, c]])
    return torch.block_diag(*[block] * (d_model // 2))
'''),
    Variant("relative_position_matrix", "sin and cos swapped in the block", '''
def relative_position_matrix(offset, d_model):
    if d_model < 1 or d_model % 2:
        raise ValueError("d_model must be even")
    M = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        a = offset / 10000 ** (2 * i / d_model)
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = math.sin(a), math.cos(a)
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = math.cos(a), -math.sin(a)
    return M
'''),
    Variant("PositionalEncoding", "table stored as an nn.Parameter", '''
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.pe = nn.Parameter(sinusoidal_positional_encoding(max_len, d_model), requires_grad=False)

    def forward(self, x):
        if x.shape[1] > self.pe.shape[0]:
            raise ValueError("too long")
        return self.dropout(x + self.pe[: x.shape[1]])
'''),
    Variant("PositionalEncoding", "table stored as a plain attribute", '''
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.pe = sinusoidal_positional_encoding(max_len, d_model)

    def forward(self, x):
        if x.shape[1] > self.pe.shape[0]:
            raise ValueError("too long")
        return self.dropout(x + self.pe[: x.shape[1]])
'''),
    Variant("PositionalEncoding", "forgot to slice pe[:T]", '''
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))

    def forward(self, x):
        if x.shape[1] > self.pe.shape[0]:
            raise ValueError("too long")
        return self.dropout(x + self.pe)
'''),
    Variant("PositionalEncoding", "dropout on x before adding pe", '''
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))

    def forward(self, x):
        T = x.shape[1]
        if T > self.pe.shape[0]:
            raise ValueError("too long")
        return self.dropout(x) + self.pe[:T]
'''),
    Variant("PositionalEncoding", "no check of T > max_len", '''
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))

    def forward(self, x):
        return self.dropout(x + self.pe[: x.shape[1]])
'''),
    Variant("TokenEmbedding", "no sqrt(d_model) scale", '''
class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)

    def forward(self, ids):
        return self.embedding(ids)
'''),
    Variant("TokenEmbedding", "scaled by d_model", '''
class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)

    def forward(self, ids):
        return self.embedding(ids) * self.d_model
'''),
    Variant("TokenEmbedding", "divided by sqrt(d_model)", '''
class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)

    def forward(self, ids):
        return self.embedding(ids) / math.sqrt(self.d_model)
'''),
    Variant("TokenEmbedding", "integer square root", '''
class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)

    def forward(self, ids):
        return self.embedding(ids) * math.isqrt(self.d_model)
'''),
    Variant("LearnedPositionalEmbedding", "returns E[:T] without adding x", '''
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        B, T, D = x.shape
        if T > self.embedding.num_embeddings:
            raise ValueError("too long")
        return self.embedding.weight[:T].expand(B, T, D)
'''),
    Variant("LearnedPositionalEmbedding", "table kept as a buffer (never trained)", '''
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)
        self.embedding.weight.requires_grad_(False)

    def forward(self, x):
        T = x.shape[1]
        if T > self.embedding.num_embeddings:
            raise ValueError("too long")
        return x + self.embedding.weight[:T]
'''),
    Variant("LearnedPositionalEmbedding", "positions start at 1", '''
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.embedding = nn.Embedding(max_len + 1, d_model)

    def forward(self, x):
        T = x.shape[1]
        if T > self.embedding.num_embeddings - 1:
            raise ValueError("too long")
        return x + self.embedding(torch.arange(1, T + 1))
'''),
    Variant("LearnedPositionalEmbedding", "no ValueError past max_len (IndexError from nn.Embedding)", '''
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        return x + self.embedding(torch.arange(x.shape[1]))
'''),
]

# side rules (ValueError, in place) earned these points before issue 29; now they earn nothing
WRONG += [*do_nothing("sinusoidal_positional_encoding", "raises ValueError"),
          *do_nothing("relative_position_matrix", "raises ValueError")]

# ------------------------------------------------------------------ correct, written differently
CORRECT = [
    Variant("sinusoidal_positional_encoding", "complex exponentials with torch.polar", '''
def sinusoidal_positional_encoding(max_len, d_model):
    if max_len <= 0 or d_model <= 0 or d_model % 2 == 1:
        raise ValueError(f"need positive sizes and an even d_model, got {max_len}, {d_model}")
    freq = torch.pow(torch.tensor(10000.0), -torch.arange(0, d_model, 2).float() / d_model)
    angle = torch.outer(torch.arange(max_len).float(), freq)
    z = torch.polar(torch.ones_like(angle), angle)  # cos + i sin
    return torch.stack([z.imag, z.real], dim=-1).reshape(max_len, d_model)
'''),
    Variant("sinusoidal_positional_encoding", "log-space frequencies, stack then flatten", '''
def sinusoidal_positional_encoding(max_len, d_model):
    if max_len < 1:
        raise ValueError("max_len must be at least 1")
    if d_model < 2 or d_model % 2:
        raise ValueError("d_model must be a positive even number")
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    angle = torch.arange(max_len, dtype=torch.float32).unsqueeze(1) * div_term
    return torch.stack((angle.sin(), angle.cos()), dim=2).flatten(1)
'''),
    Variant("sinusoidal_positional_encoding", "python loops with math.sin", '''
def sinusoidal_positional_encoding(max_len, d_model):
    if max_len < 1 or d_model < 1 or d_model % 2 != 0:
        raise ValueError("bad sizes")
    rows = []
    for p in range(max_len):
        row = []
        for i in range(d_model // 2):
            a = p / 10000 ** (2 * i / d_model)
            row += [math.sin(a), math.cos(a)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32)
'''),
    Variant("relative_position_matrix", "torch.block_diag of 2x2 blocks", '''
def relative_position_matrix(offset, d_model):
    if d_model <= 0 or d_model % 2:
        raise ValueError("d_model must be positive and even")
    blocks = []
    for i in range(d_model // 2):
        a = offset * 10000 ** (-2 * i / d_model)
        blocks.append(torch.tensor([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]]))
    return torch.block_diag(*blocks)
'''),
    Variant("relative_position_matrix", "solve P[p + k] = M P[p] per pair via angle addition, vectorised", '''
def relative_position_matrix(offset, d_model):
    if d_model <= 0 or d_model % 2:
        raise ValueError("d_model must be positive and even")
    w = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(offset * w), torch.sin(offset * w)
    blocks = torch.stack([torch.stack([c, s], -1), torch.stack([-s, c], -1)], -2)  # (D/2, 2, 2)
    eye = torch.eye(d_model // 2, dtype=torch.float64)
    M = torch.einsum("ij,iab->iajb", eye, blocks).reshape(d_model, d_model)
    return M.float()
'''),
    Variant("PositionalEncoding", "table built with a loop, batch dim kept in the buffer", '''
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        table = torch.zeros(max_len, d_model)
        for i in range(0, d_model, 2):
            w = 1.0 / 10000 ** (i / d_model)
            table[:, i] = torch.sin(torch.arange(max_len) * w)
            table[:, i + 1] = torch.cos(torch.arange(max_len) * w)
        self.register_buffer("pe", table)
        self.drop = nn.Dropout(p=dropout)

    def forward(self, x):
        if x.size(1) > self.pe.size(0):
            raise ValueError(f"sequence of length {x.size(1)} is longer than max_len {self.pe.size(0)}")
        return self.drop(x + self.pe[None, : x.size(1), :])
'''),
    Variant("TokenEmbedding", "indexing the weight, d_model ** 0.5", '''
class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.scale = d_model ** 0.5

    def forward(self, ids):
        return self.embedding.weight[ids.long()] * self.scale
'''),
    Variant("LearnedPositionalEmbedding", "slicing the weight and unsqueezing", '''
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        T = x.size(1)
        if T > self.embedding.weight.shape[0]:
            raise ValueError("sequence longer than the learned table")
        return x + self.embedding.weight[:T].unsqueeze(0)
'''),
]

# issue 29: an input changed in place must never write the expected value (the answer for zeros
# is the expected value of a check that computes it from the input after the call)
WRONG += [
    Variant("PositionalEncoding", "zeroes the input in place and returns the answer for that", '''\
_RefPositionalEncoding = PositionalEncoding

class PositionalEncoding(_RefPositionalEncoding):
    def forward(self, x):
        with torch.no_grad():
            x.zero_()
        return super().forward(x)
'''),
]

"""The numbers course/checks/positional_encoding.py stores (chapter 03), and how each is computed."""
import torch

import course.checks.positional_encoding as C
from tests.snapshots import Stored, catalogued, kept_here


def table(fn):
    return fn(*C.TABLE_SHAPE)


def rotation(fn):
    return fn(*C.ROTATION_ARGS)


def learned(cls):
    m = cls(5, 4)
    with torch.no_grad():
        m.embedding.weight.copy_(C.LEARNED_TABLE)
        return m(C.LEARNED_X)


TABLE, ROTATION = "sinusoidal_positional_encoding", "relative_position_matrix"
LEARNED = "LearnedPositionalEmbedding"

STORED = [
    Stored("TABLE_3x6", TABLE, table),
    Stored("TABLE_SWAPPED", TABLE, table, catalogued("sin and cos swapped"), says="sin and cos are swapped"),
    Stored("TABLE_CONCATENATED", TABLE, table, catalogued("sin half then cos half (concatenated, not interleaved)"),
           says="the sin columns come first"),
    Stored("TABLE_COLUMN_EXPONENT", TABLE, table, catalogued("exponent 2j/d with j the column index (seed bug)"),
           says="exponent 2j/d from the column index j"),
    Stored("TABLE_J_OVER_D", TABLE, table, catalogued("exponent j/d per column (cos column gets its own frequency)"),
           says="j/d per column j"),
    Stored("TABLE_NO_FACTOR_2", TABLE, table, catalogued("pair index i without the factor 2: 10000**(i/d)"),
           says="forgot the factor 2"),
    Stored("TABLE_FROM_1", TABLE, table, catalogued("positions start at 1"), says="positions start at 0, not 1"),
    Stored("TABLE_BASE_1000", TABLE, table, catalogued("base 1000 instead of 10000"), says="the base is 10000"),
    Stored("TABLE_OVER_MAX_LEN", TABLE, table, catalogued("positions divided by max_len"),
           says="not p / max_len"),

    Stored("ROTATION_1x4", ROTATION, rotation),
    Stored("ROTATION_TRANSPOSED", ROTATION, rotation, catalogued("transposed blocks (rotates by -offset)"),
           says="your blocks are transposed"),
    Stored("ROTATION_I_OVER_D", ROTATION, rotation, catalogued("wrong frequency per block (10000**(i/d))"),
           says="you used 10000**(-i/d)"),
    Stored("ROTATION_SAME_ANGLE", ROTATION, rotation, catalogued("angle = offset in every block (frequency forgotten)"),
           says="every block turns by the same angle"),
    Stored("ROTATION_SWAPPED", ROTATION, rotation, catalogued("sin and cos swapped in the block"),
           says="sin and cos are swapped inside the blocks"),

    Stored("LEARNED", LEARNED, learned),
    Stored("LEARNED_NO_X", LEARNED, learned, catalogued("returns E[:T] without adding x"),
           says="you returned the position rows without adding x"),
    Stored("LEARNED_FROM_1", LEARNED, learned, says="positions start at 0", mistake=kept_here(
        "rows E[1..T] of a table of max_len rows (the catalogue's positions-from-1 keeps max_len + 1 rows)", '''\
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        T = x.shape[1]
        if T >= self.embedding.num_embeddings:
            raise ValueError("too long")
        return x + self.embedding(torch.arange(1, T + 1))
''')),
    Stored("LEARNED_JUST_X", LEARNED, learned, says="the output is just x", mistake=kept_here(
        "returns x without the position rows", '''\
_Reference = LearnedPositionalEmbedding


class LearnedPositionalEmbedding(_Reference):
    def forward(self, x):
        super().forward(x)  # its checks
        return x
''')),
]

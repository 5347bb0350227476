"""The numbers course/checks/multi_head_attention.py stores (chapter 04), and how each is computed."""
import torch

import course.checks.multi_head_attention as C
from tests.snapshots import Stored, catalogued


def loaded(cls):
    module = cls(4, 2, bias=False)
    with torch.no_grad():
        for name, weight in zip(("W_q", "W_k", "W_v", "W_o"), (C.WQ, C.WK, C.WV, C.WO)):
            getattr(module, name).weight.copy_(weight)
    return module


def mha(cls, query=C.X, key=C.X, value=C.X, mask=None):
    with torch.no_grad():
        return loaded(cls)(query, key, value, mask)


def weights(cls):
    return mha(cls)[1]


def output(cls):
    return mha(cls)[0]


def cross(cls):
    return mha(cls, C.Q2, C.X, C.V3)


MHA = "MultiHeadAttention"

STORED = [
    Stored("SPLIT", "split_heads", lambda f: f(C.X_SPLIT, 3)),
    Stored("SPLIT_NO_TRANSPOSE", "split_heads", lambda f: f(C.X_SPLIT, 3),
           catalogued("view straight to (B, H, T, Dh) without transpose (mixes tokens)"),
           says="you reshaped straight to (B, H, T, Dh)"),
    Stored("SPLIT_STRIDED", "split_heads", lambda f: f(C.X_SPLIT, 3),
           catalogued("strided heads: head h gets features h, h+H, h+2H, ..."), says="take every H-th feature"),

    Stored("MERGE", "merge_heads", lambda f: f(C.X_MERGE)),
    Stored("MERGE_NO_TRANSPOSE", "merge_heads", lambda f: f(C.X_MERGE),
           catalogued("reshape without transposing back (mixes tokens and heads)"),
           says="you reshaped (B, H, T, Dh) straight to (B, T, H*Dh)"),
    Stored("MERGE_INTERLEAVED", "merge_heads", lambda f: f(C.X_MERGE),
           catalogued("permutes in the wrong order: features interleaved across heads"),
           says="the heads are interleaved feature by feature"),

    Stored("MHA_W", MHA, weights),
    Stored("MHA_OUT", MHA, output),
    Stored("MHA_W_BY_SQRT_D", MHA, weights, catalogued("scales by sqrt(D) instead of sqrt(Dh)"),
           says="you divided the scores by sqrt(d_model)"),
    Stored("MHA_W_OVER_QUERIES", MHA, weights, catalogued("softmax over the queries (dim=-2)"),
           says="your weights sum to 1 over the queries"),
    Stored("MHA_W_ONE_PROJECTION", MHA, weights, catalogued("one shared projection (W_q) for queries, keys and values"),
           says="the keys (and values) were made with W_q"),
    Stored("MHA_W_HEADS_MIX_TOKENS", MHA, weights,
           catalogued("splits q, k, v with view to (B, H, T, Dh), no transpose"), says="your heads mix tokens"),
    Stored("MHA_OUT_NO_W_O", MHA, output, catalogued("forgets W_o"), says="you forgot the output projection W_o"),
    Stored("MASK_W", MHA, lambda cls: mha(cls, mask=C.CAUSAL)[1]),
    Stored("CROSS_W", MHA, lambda cls: cross(cls)[1]),
    Stored("CROSS_OUT", MHA, lambda cls: cross(cls)[0]),
    Stored("CROSS_OUT_KEY_AS_VALUE", MHA, lambda cls: cross(cls)[0], catalogued("the key is used as the value"),
           says="the values were computed from the key input"),
]

"""The numbers course/checks/self_attention.py stores (chapter 02), and how each is computed."""
import torch

import course.checks.self_attention as C
from tests.snapshots import Stored, catalogued, kept_here


def rows(softmax):
    return softmax(C.A)


def weights(attention, mask=None):
    return attention(C.Q, C.K, C.V, mask)[1]


def output(attention, mask=None):
    return attention(C.Q, C.K, C.V, mask)[0]


def self_attention(cls, mask=None):
    module = cls(4, 3, 2)
    with torch.no_grad():
        module.W_q.weight.copy_(C.WQ)
        module.W_k.weight.copy_(C.WK)
        module.W_v.weight.copy_(C.WV)
        return module(C.X, mask)


SDPA = "scaled_dot_product_attention"
CAUSAL = torch.ones(3, 3, dtype=torch.bool).tril()

STORED = [
    Stored("A_ROWS", "softmax", rows, note="softmax along dim=-1"),
    Stored("A_COLS", "softmax", lambda softmax: softmax(C.A, dim=0), note="softmax along dim=0"),
    Stored("A_WHOLE", "softmax", rows, note="exp / sum of everything", says="divided by the sum of the whole tensor",
           mistake=kept_here("divides by the sum of the whole tensor",
                             "def softmax(x, dim=-1):\n    e = torch.exp(x)\n    return e / e.sum()\n")),

    Stored("W_OK", SDPA, weights),
    Stored("OUT_OK", SDPA, output),
    Stored("W_NO_SCALE", SDPA, weights, catalogued("no scale"), says="forgot to divide the scores by sqrt(d_k)"),
    Stored("W_BY_DK", SDPA, weights, catalogued("scales by d_k instead of sqrt(d_k)"),
           says="divided the scores by d_k"),
    Stored("W_BY_DV", SDPA, weights, catalogued("scales by sqrt(d_v)"), says="divided by sqrt(d_v)"),
    Stored("W_OVER_QUERIES", SDPA, weights, catalogued("softmax over the queries (dim=-2)"),
           says="sum to 1 over the queries"),
    Stored("W_MASK", SDPA, lambda f: weights(f, C.MASK)),
    Stored("OUT_MASK", SDPA, lambda f: output(f, C.MASK)),
    Stored("W_MASK_REVERSED", SDPA, lambda f: weights(f, C.MASK), catalogued("mask polarity reversed (True = blocked)"),
           says="the mask is reversed"),
    Stored("W_MASK_AFTER_SOFTMAX", SDPA, lambda f: weights(f, C.MASK),
           catalogued("mask applied after the softmax (not renormalised)"), says="applied the mask after the softmax"),
    Stored("W_MASK_ZERO", SDPA, lambda f: weights(f, C.MASK), catalogued("masked scores set to 0 instead of -inf"),
           says="masked scores were set to 0"),

    Stored("SA_W", "SelfAttention", lambda cls: self_attention(cls)[1]),
    Stored("SA_OUT", "SelfAttention", lambda cls: self_attention(cls)[0]),
    Stored("SA_W_KEYS_FROM_WQ", "SelfAttention", lambda cls: self_attention(cls)[1],
           catalogued("uses W_q for the keys"), says="the keys were computed with W_q"),
    Stored("SA_W_SWAPPED", "SelfAttention", lambda cls: self_attention(cls)[1],
           catalogued("keys and queries swapped (weights over queries)"), says="queries and keys are swapped"),
    Stored("SA_W_TRANSPOSED", "SelfAttention", lambda cls: self_attention(cls)[1],
           catalogued("returns the weights transposed"), says="the weights are transposed"),
    Stored("SA_W_CAUSAL", "SelfAttention", lambda cls: self_attention(cls, CAUSAL)[1]),
]

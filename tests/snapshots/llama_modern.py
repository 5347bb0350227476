"""The numbers course/checks/llama_modern.py stores (chapter 09), and how each is computed."""
import torch

import course.checks.llama_modern as C
from tests.snapshots import Stored, catalogued, kept_here


def rms(cls):
    norm = cls(4)
    with torch.no_grad():
        norm.weight.copy_(C.RMS_WEIGHT)
        return norm(C.NORM_X)


def rope_cos(fn):
    return fn(4, 3, base=100.0)[0]


def rope_sin(fn):
    return fn(4, 3, base=100.0)[1]


def apply(fn, offset=0):
    return fn(C.ROPE_X.clone(), C.ROPE_ANGLES.cos(), C.ROPE_ANGLES.sin(), offset=offset)


def first_features(module, n=4):
    C.set_params(module)
    with torch.no_grad():
        return module(C.SEQ)[0, :, :n]


def moe(cls):
    m = cls(8, 6, 4, 2)
    C._moe_params(m)
    with torch.no_grad():
        return m(C.MOE_X)


def lb(fn, top_k=1):
    return fn(C.LB_LOGITS, top_k)


SWIGLU, GQA, BLOCK, MOE, LB = "SwiGLUFeedForward", "GroupedQueryAttention", "LlamaBlock", "MoEFeedForward", \
    "load_balancing_loss"


def swiglu(cls):
    return first_features(cls(16, 6))


def gqa(cls):
    return first_features(cls(16, 4, 2, 8))


def block(cls):
    return first_features(cls(16, 4, 2, 24, 8))


def stored(*args, **kwargs):
    return Stored(*args, tensor=True, **kwargs)


STORED = [
    stored("RMS_OUT", "RMSNorm", rms),
    stored("RMS_CENTRED", "RMSNorm", rms, catalogued("subtracts the mean (that is LayerNorm without a bias)"),
           says="you subtracted the mean"),
    stored("RMS_EPS_OUTSIDE", "RMSNorm", rms, catalogued("eps outside the square root"),
           says="eps must go INSIDE the square root"),
    stored("RMS_SUM", "RMSNorm", rms, catalogued("sum of squares instead of the mean"),
           says="you used the SUM of squares"),
    stored("RMS_NO_WEIGHT", "RMSNorm", rms, says="the weight is missing", mistake=kept_here(
        "the weight never applied", '''\
_Reference = RMSNorm


class RMSNorm(_Reference):
    def forward(self, x):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
''')),

    stored("RMS_STD", "RMSNorm", rms,
           catalogued("divides by the standard deviation (x.std) instead of the root mean square"),
           says="you divided by the standard deviation"),

    stored("ROPE_COS_100", "rope_frequencies", rope_cos),
    stored("ROPE_SIN_100", "rope_frequencies", rope_sin),
    stored("ROPE_COS_INTERLEAVED", "rope_frequencies", rope_cos,
           catalogued("interleaved layout: each frequency twice in a row (CS336's pairs 2i, 2i+1)"),
           says="this is the interleaved layout"),
    stored("ROPE_COS_PER_COLUMN", "rope_frequencies", rope_cos,
           catalogued("exponent i/d per column instead of 2i/d per pair"), says="the exponent is per PAIR"),
    stored("ROPE_COS_FROM_1", "rope_frequencies", rope_cos, catalogued("positions counted from 1"),
           says="positions start at 0"),

    stored("APPLY_OUT", "apply_rope", apply),
    stored("APPLY_OFFSET", "apply_rope", lambda fn: apply(fn, offset=1)),
    stored("APPLY_INTERLEAVED", "apply_rope", apply,
           catalogued("rotates interleaved pairs (2i, 2i+1) instead of (i, i + Dh/2)"),
           says="you rotated the interleaved pairs"),
    stored("APPLY_WRONG_SIGN", "apply_rope", apply,
           catalogued("rotate-half with the sign on the wrong half (rotates the other way)"),
           says="the sign is on the wrong half"),

    stored("SWIGLU_OUT", SWIGLU, swiglu),
    stored("SWIGLU_UP", SWIGLU, swiglu, catalogued("SiLU on the up branch instead of the gate"),
           says="SiLU belongs on the GATE branch"),
    stored("SWIGLU_AFTER", SWIGLU, swiglu, catalogued("SiLU after the product"),
           says="apply SiLU to w_gate(x) before multiplying"),
    stored("SWIGLU_GELU", SWIGLU, swiglu, catalogued("GELU instead of SiLU"), says="this is a GELU gate"),
    stored("SWIGLU_SIGMOID", SWIGLU, swiglu, catalogued("sigmoid gate instead of SiLU (GLU, not SwiGLU)"),
           says="this is a sigmoid gate"),

    stored("GQA_OUT", GQA, gqa),
    stored("GQA_TILED", GQA, gqa, catalogued("kv heads tiled with .repeat (query head j uses kv head j % Hkv)"),
           says="the kv heads are tiled"),
    stored("GQA_ROPE_V", GQA, gqa, catalogued("RoPE applied to v as well"), says="RoPE is applied to v too"),
    stored("GQA_ROPE_Q_ONLY", GQA, gqa, catalogued("RoPE on q only"), says="only q is rotated"),
    stored("GQA_NO_ROPE", GQA, gqa, says="no RoPE at all", mistake=kept_here(
        "no RoPE: cos = 1 and sin = 0 everywhere", '''\
_Reference = GroupedQueryAttention


class GroupedQueryAttention(_Reference):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cos.fill_(1.0)
        self.sin.fill_(0.0)
''')),

    stored("BLOCK_OUT", BLOCK, block),
    stored("BLOCK_POST", BLOCK, block, catalogued("Post-norm: normalises after each residual sum (the 2017 order)"),
           says="this is the 2017 (Post-LN) order"),
    stored("BLOCK_PARALLEL", BLOCK, block,
           catalogued("parallel block: attention and feed-forward both read the same input"),
           says="attention and feed-forward both read the block's input"),
    stored("BLOCK_NO_FFN_RES", BLOCK, block, catalogued("no residual around the feed-forward block"),
           says="a residual connection is missing around the feed-forward block"),
    stored("BLOCK_ONE_NORM", BLOCK, block,
           catalogued("one norm for both sublayers (attn_norm before the feed-forward block too)"),
           says="one norm serves both sublayers"),

    stored("MOE_OUT", MOE, lambda cls: moe(cls)[0][:, :, :3]),
    stored("MOE_LOGITS", MOE, lambda cls: moe(cls)[1]),
    stored("MOE_NO_RENORM", MOE, lambda cls: moe(cls)[0][:, :, :3],
           catalogued("no renormalisation: the kept probabilities do not sum to 1"),
           says="the kept probabilities must be renormalised"),
    stored("MOE_SOFTMAX_TWICE", MOE, lambda cls: moe(cls)[0][:, :, :3],
           catalogued("softmax applied again to the kept probabilities instead of dividing by their sum"),
           says="not with a second softmax"),
    stored("MOE_PER_BATCH", MOE, lambda cls: moe(cls)[0][:, :, :3],
           catalogued("experts chosen once per batch (top-k of the mean probability), not per token"),
           says="the experts are chosen per TOKEN"),
    stored("MOE_RAW_LOGITS", MOE, lambda cls: moe(cls)[0][:, :, :3],
           catalogued("routing weights from the raw logits (no softmax), renormalised"),
           says="the routing weights come from the softmax over ALL experts"),
    stored("MOE_SOFTMAX_TOKENS", MOE, lambda cls: moe(cls)[0][:, :, :3],
           catalogued("router softmax over the tokens (dim 0) instead of over the experts"),
           says="the router's softmax ran over the TOKENS"),

    stored("LB_TOP1", LB, lb),
    stored("LB_TOP2", LB, lambda fn: lb(fn, 2)),
    stored("LB_PROBS_ONLY", LB, lb, catalogued("f_e from the probabilities instead of the top-k counts"),
           says="f_e must count TOKENS"),
    stored("LB_MEAN_LOGITS", LB, lb, catalogued("P_e from the mean logits instead of the mean probabilities"),
           says="P_e is the mean of the softmax PROBABILITIES"),
    stored("LB_SOFTMAX_MEAN", LB, lb,
           catalogued("P_e as the softmax of the mean logits (mean and softmax swapped)"),
           says="not the softmax of the mean logits"),
]

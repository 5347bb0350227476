"""The numbers course/checks/bert_pretraining.py stores (chapter 07), and how each is computed."""
import torch

import course.checks.bert_pretraining as C
from tests.snapshots import Stored, catalogued, kept_here


def gelu(fn):
    return fn(C.GELU_X)


def embeddings(cls):
    m = cls(6, 4, 5)
    C.fill(m)
    m.eval()
    return m(C.EMB_IDS, C.EMB_SEGMENTS)


def bert(cls):
    model = cls(7, 4, 2, 1, 6, max_len=8)
    C.fill(model)
    model.eval()
    with torch.no_grad():
        return model(C.MODEL_IDS, C.MODEL_SEGMENTS, C.MODEL_MASK)


def mlm_row0(cls):
    return bert(cls)[0][0]


def nsp(cls):
    return bert(cls)[1]


def loss(fn):
    return tuple(float(v) for v in fn(C.LOSS_MLM, C.LOSS_LABELS, C.LOSS_NSP, C.LOSS_NSP_LABELS))


MODEL, LOSS = "BertForPretraining", "bert_pretraining_loss"

STORED = [
    Stored("GELU_OUT", "gelu", gelu),
    Stored("GELU_EXACT", "gelu", gelu,
           catalogued("the exact erf form (what F.gelu does by default), not the tanh form"),
           says="these are the values of the EXACT GELU"),
    Stored("GELU_SIGMOID", "gelu", gelu, catalogued("the sigmoid approximation x * sigmoid(1.702 x)"),
           says="this is the sigmoid approximation"),
    Stored("GELU_SQUARE", "gelu", gelu, catalogued("x**2 in the cubic term"), says="(you used x**2)"),
    Stored("GELU_SQRT_2PI", "gelu", gelu, catalogued("sqrt(2 * pi) instead of sqrt(2 / pi)"),
           says="not sqrt(2 * pi)"),
    Stored("GELU_NO_HALF", "gelu", gelu, says="the 0.5 in front is missing", mistake=kept_here(
        "the 0.5 in front left out", '''\
def gelu(x):
    return x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
''')),

    Stored("EMB_OUT", "BertEmbeddings", embeddings),
    Stored("EMB_NO_SEGMENT", "BertEmbeddings", embeddings, catalogued("the segment embedding is never added"),
           says="the segment embedding is missing"),
    Stored("EMB_NO_NORM", "BertEmbeddings", embeddings, catalogued("no LayerNorm applied"),
           says="the embeddings are summed but never normalised"),

    Stored("MLM_ROW0", MODEL, mlm_row0),
    Stored("NSP", MODEL, nsp),
    Stored("MLM_RELU", MODEL, mlm_row0, catalogued("calls chapter 05's layer(x, mask): ReLU feed-forward"),
           says="this matches calling chapter 05's layer(x, mask)"),
    Stored("MLM_PRE_LN", MODEL, mlm_row0, catalogued("Pre-LN instead of Post-LN"),
           says="this is the Pre-LN order"),
    Stored("MLM_NO_BIAS", MODEL, mlm_row0, catalogued("the decoder bias is never added"), says="mlm_bias is missing"),
    Stored("MLM_NO_TRANSFORM", MODEL, mlm_row0,
           catalogued("the MLM head has no transform (logits straight from the hidden states)"),
           says="the MLM transform is missing"),
    Stored("MLM_NO_SEGMENTS", MODEL, mlm_row0, catalogued("segment_ids are not passed to the embeddings"),
           says="segment_ids do not reach the embeddings"),
    Stored("NSP_MEAN", MODEL, nsp, catalogued("NSP pooled from the mean of the hidden states, not [CLS]"),
           says="the NSP head should read the [CLS] position"),
    Stored("NSP_NO_TANH", MODEL, nsp, catalogued("the pooler has no tanh"), says="the pooler is dense + tanh"),

    Stored("LOSS_OUT", LOSS, loss, note="(total, mlm, nsp)"),
    Stored("LOSS_EVERY_POSITION", LOSS, loss, catalogued("MLM loss over every position (the -100 labels clamped to 0)"),
           says="the MLM loss counts every position"),
    Stored("LOSS_OVER_B_T", LOSS, loss,
           catalogued("MLM loss summed over labelled positions but divided by B * T"),
           says="the MLM loss is divided by B * T"),
    Stored("LOSS_AVERAGE", LOSS, loss, catalogued("total is the average (mlm + nsp) / 2"),
           says="total is the SUM mlm + nsp"),
    Stored("LOSS_BINARY_NSP", LOSS, loss, catalogued("binary cross-entropy on the second NSP logit"),
           says="NSP has two classes"),
    Stored("LOSS_NSP_FLIPPED", LOSS, loss, catalogued("NSP labels flipped (1 - labels)"),
           says="do not flip them"),
]

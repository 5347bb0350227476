"""The numbers course/checks/add_and_norm.py stores (chapter 05), and how each is computed."""
import torch

import course.checks.add_and_norm as C
from tests.snapshots import Stored, catalogued, kept_here


def norm(fn):
    return fn(C.X, C.W, C.B)


def ffn(cls):
    m = cls(3, 4)
    m.load_state_dict(C.FFN_STATE)
    return m(C.FFN_X)


def ffn_with(forward: str) -> str:
    return f'''\
_Reference = PositionwiseFeedForward


class PositionwiseFeedForward(_Reference):
    def forward(self, x):
        return {forward}
'''


def add_norm(cls):
    m = cls(4)
    with torch.no_grad():
        m.norm.weight.copy_(C.W)
        m.norm.bias.copy_(C.B)
    return m(C.AN_X, C.AN_SUB)


def add_norm_with(forward: str) -> str:
    return f'''\
_Reference = AddNorm


class AddNorm(_Reference):
    def forward(self, x, sublayer_out):
        return {forward}
'''


def layer(cls, norm_first=False, mask=None):
    m = cls(4, 2, 8, norm_first=norm_first)
    C.fill(m, C.LAYER_KEYS)
    return m(C.sequence(), mask)


def pre_layer(cls):
    return layer(cls, norm_first=True)


def encoder(cls, norm_first=False, mask=None):
    m = cls(2, 4, 2, 8, norm_first=norm_first)
    C.fill(m, C._encoder_keys(2, norm_first))
    return m(C.sequence(), mask)


def pre_encoder(cls):
    return encoder(cls, norm_first=True)


LN, FFN, LAYER, ENCODER = "layer_norm", "PositionwiseFeedForward", "EncoderLayer", "Encoder"

STORED = [
    Stored("LN_OUT", LN, norm),
    Stored("LN_UNBIASED", LN, norm, catalogued("unbiased variance (torch.var default, divides by D - 1)"),
           says="you used the unbiased variance"),
    Stored("LN_EPS_OUTSIDE", LN, norm, catalogued("eps added outside the square root"),
           says="eps belongs inside the square root, sqrt(var + eps), not after it"),
    Stored("LN_STD_EPS", LN, norm, catalogued("std with the default unbiased setting plus eps outside (x.std)"),
           says="two mistakes: x.std() is unbiased"),
    Stored("LN_NO_AFFINE", LN, norm, catalogued("forgot weight and bias"),
           says="you forgot to scale by weight and shift by bias"),
    Stored("LN_DIM0", LN, norm, catalogued("normalises over dim 0 (the batch) instead of the last axis"),
           says="you normalised over dim 0"),
    Stored("LN_OUT_EPS", LN, lambda fn: fn(C.X, C.W, C.B, eps=0.5)),
    Stored("LN_DIM0_3D", LN, lambda fn: fn(C.X.view(1, 2, 4), C.W, C.B), catalogued("normalises over dim 1"),
           says="for a (1, 2, 4) input you normalised over dim 1"),

    Stored("LN_PLAIN_EPS", "LayerNorm", lambda cls: cls(4, eps=0.5)(C.X)),
    Stored("LN_PLAIN", "LayerNorm", lambda cls: cls(4, eps=0.5)(C.X), catalogued("eps not passed on to layer_norm"),
           says="ignores its eps"),

    Stored("FFN_OUT", FFN, ffn),
    Stored("FFN_NO_RELU", FFN, ffn, catalogued("no activation between the linear layers"),
           says="there is no activation"),
    Stored("FFN_RELU_LAST", FFN, ffn, catalogued("ReLU after linear2 instead of between the layers"),
           says="the ReLU belongs between the two layers"),
    Stored("FFN_RELU_TWICE", FFN, ffn, says="a ReLU after linear2 as well", mistake=kept_here(
        "a ReLU after linear2 as well",
        ffn_with("torch.relu(self.linear2(self.dropout(torch.relu(self.linear1(x)))))"))),

    Stored("AN_OUT", "AddNorm", add_norm),
    Stored("AN_NORM_THEN_ADD", "AddNorm", add_norm, catalogued("normalises before adding: norm(x) + sublayer_out"),
           says="you normalised x before adding"),
    Stored("AN_NO_RESIDUAL", "AddNorm", add_norm, catalogued("drops the residual: norm(sublayer_out)"),
           says="the residual is missing"),
    Stored("AN_X_PLUS_NORM", "AddNorm", add_norm, says="you normalised only sublayer_out", mistake=kept_here(
        "x + norm(sublayer_out)", add_norm_with("x + self.norm(self.dropout(sublayer_out))"))),
    Stored("AN_NO_NORM", "AddNorm", add_norm, says="there is no LayerNorm", mistake=kept_here(
        "no LayerNorm: x + sublayer_out", add_norm_with("x + self.dropout(sublayer_out)"))),
    Stored("AN_NO_SUB", "AddNorm", add_norm, says="sublayer_out is ignored", mistake=kept_here(
        "sublayer_out ignored: norm(x)", add_norm_with("self.norm(x)")),
           note="mistake: sublayer_out ignored, norm(x); also what a training-mode AddNorm gives for sublayer_out = 0"),

    Stored("POST_OUT", LAYER, layer),
    Stored("POST_MASKED", LAYER, lambda cls: layer(cls, mask=C.CAUSAL)),
    Stored("PRE_OUT", LAYER, pre_layer),
    Stored("POST_FFN_ON_INPUT", LAYER, layer, catalogued("Post-LN applies the FFN to the pre-attention x"),
           says="the feed-forward block must read the output of the attention sub-layer"),
    Stored("POST_SWAPPED", LAYER, layer, catalogued("norm1 and norm2 swapped"),
           says="norm1 follows the attention sub-layer"),
    Stored("PRE_SWAPPED", LAYER, pre_layer, catalogued("norm1 and norm2 swapped"),
           says="norm1 and norm2 are swapped"),
    Stored("PRE_NORMED_STREAM", LAYER, pre_layer,
           catalogued("Pre-LN normalises the residual stream: x = norm(x) + sublayer(norm(x))"),
           says="Pre-LN must leave the residual stream unnormalised"),
    Stored("PRE_BOTH_NORMS", LAYER, pre_layer,
           catalogued("Pre-LN with a LayerNorm after the residual too (both norms on every sublayer)"),
           says="Pre-LN has no LayerNorm after the residual sums"),

    Stored("ENC_POST_OUT", ENCODER, encoder),
    Stored("ENC_PRE_OUT", ENCODER, pre_encoder),
    Stored("ENC_PRE_MASKED", ENCODER, lambda cls: encoder(cls, norm_first=True, mask=C.CAUSAL)),
    Stored("ENC_PRE_NO_NORM", ENCODER, pre_encoder, says="the final LayerNorm is missing", mistake=kept_here(
        "self.norm built but not applied (the catalogue's variant has none, which the parameter count catches)", '''\
_Reference = Encoder


class Encoder(_Reference):
    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return x
''')),
    Stored("ENC_POST_SAME_INPUT", ENCODER, encoder,
           catalogued("every layer gets the encoder input instead of the previous layer's output"),
           says="every layer received the encoder input"),
    Stored("ENC_PRE_SAME_INPUT", ENCODER, pre_encoder,
           catalogued("every layer gets the encoder input instead of the previous layer's output"),
           says="every layer received the encoder input"),
]

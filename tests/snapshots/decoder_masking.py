"""The numbers course/checks/decoder_masking.py stores (chapter 06), and how each is computed."""
import torch

import course.checks.decoder_masking as C
from tests.catalogue.decoder_masking import _DECODER_INIT
from tests.snapshots import Stored, catalogued, kept_here


def decoder_layer(cls):
    layer = cls(4, 2, 6)
    C._set_params(layer)
    layer.eval()
    return layer, layer(C.DEC_X, C.DEC_MEMORY, C.DEC_TGT_MASK, C.DEC_MEMORY_MASK)


def row0(cls):
    model = cls(7, 4, 2, 1, 6, max_len=16, pad_id=0).eval()
    C._set_params(model)
    with torch.no_grad():
        return model(C.TR_SRC, C.TR_TGT)[0]


def greedy(fn):
    return fn(C._ChainModel(C._CHAINS).eval(), C._SOURCE, 10, 1, 2)


def smoothed(fn):
    return fn(C.SMOOTHING_TARGETS, 4, 0.2)


def smoothed_loss(fn):
    return fn(C.LOSS_LOGITS, C.LOSS_TARGETS, 0.2)


def noam_at_step_1(fn):
    return float(fn(1, 512, 4000))


LAYER, SMOOTHING = "DecoderLayer", "label_smoothing_distribution"
LOSS, NOAM = "label_smoothed_loss", "noam_learning_rate"

STORED = [
    Stored("DEC_OUT", LAYER, lambda cls: decoder_layer(cls)[1]),
    Stored("DEC_NO_CROSS_RESIDUAL", LAYER, lambda cls: decoder_layer(cls)[1],
           catalogued("no residual connection around cross-attention"),
           says="the cross-attention sublayer has no residual connection"),
    Stored("DEC_PRE_LN", LAYER, lambda cls: decoder_layer(cls)[1],
           catalogued("Pre-LN order (norm before each sublayer) instead of the paper's Post-LN"),
           says="this is the Pre-LN order"),
    Stored("DEC_NORMS_SWAPPED", LAYER, lambda cls: decoder_layer(cls)[1], catalogued("norm2 and norm3 swapped"),
           says="norm2 and norm3 are swapped"),
    Stored("DEC_NO_MEMORY_MASK", LAYER, lambda cls: decoder_layer(cls)[1], catalogued("memory_mask never used"),
           says="memory_mask is not used"),
    Stored("DEC_NO_TGT_MASK", LAYER, lambda cls: decoder_layer(cls)[1], says="tgt_mask is not used",
           mistake=kept_here("tgt_mask never used", _DECODER_INIT + '''
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x)[0]))
        context, w = self.cross_attn(x, memory, memory, memory_mask)
        self.cross_weights = w.detach()
        x = self.norm2(x + self.dropout2(context))
        return self.norm3(x + self.dropout3(self.ffn(x)))
''')),
    Stored("DEC_CROSS", LAYER, lambda cls: decoder_layer(cls)[0].cross_weights[0]),

    Stored("TR_ROW0", "Transformer", row0),
    Stored("TR_ROW0_UNSCALED", "Transformer", row0,
           catalogued("embeddings looked up without the sqrt(d_model) scale"), says="the embeddings are not scaled"),

    Stored("_EXPECTED", "greedy_decode", greedy),

    Stored("SMOOTHED", SMOOTHING, smoothed),
    Stored("SMOOTHED_OVER_C", SMOOTHING, smoothed, catalogued("smoothing / C on every class (torch's convention)"),
           says="you spread smoothing / C over every class"),
    Stored("SMOOTHED_TARGET_INCREASED", SMOOTHING, smoothed,
           catalogued("adds 1 - smoothing to the target instead of setting it"),
           says="the target entry should be SET to 1 - smoothing"),
    Stored("SMOOTHED_SWAPPED", SMOOTHING, smoothed, says="you swapped them", mistake=kept_here(
        "target and the other classes swapped", '''\
def label_smoothing_distribution(targets, num_classes, smoothing):
    q = torch.full((len(targets), num_classes), 1 - smoothing)
    q[torch.arange(len(targets)), targets] = smoothing / (num_classes - 1)
    return q
''')),

    Stored("SMOOTHED_LOSS", LOSS, smoothed_loss),
    Stored("SMOOTHED_LOSS_ALL_ROWS", LOSS, smoothed_loss, catalogued("averages over the ignored rows too"),
           says="you averaged over all N rows"),
    Stored("SMOOTHED_LOSS_NO_ENTROPY", LOSS, smoothed_loss,
           catalogued("cross-entropy with the smoothed target (no entropy term), not the KL"),
           says="this is the cross-entropy -sum q log p"),

    Stored("NOAM_512_4000", NOAM, lambda fn: {step: float(fn(step, 512, 4000)) for step in C.NOAM_STEPS}, sig=7),
    Stored("NOAM_MAX_STEP_1", NOAM, noam_at_step_1, catalogued("max instead of min of the two branches"),
           says="you took the max of the two branches", sig=7),
    Stored("NOAM_WARMUP_EXPONENT_STEP_1", NOAM, noam_at_step_1,
           catalogued("warm-up branch step * warmup**-0.5 (wrong exponent)"), says="you used the exponent -0.5", sig=7),
]

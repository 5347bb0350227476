"""The numbers course/checks/gpt_generation.py stores (chapter 08), and how each is computed."""
import torch

import course.checks.gpt_generation as C
from tests.snapshots import Stored, catalogued


def logits(cls):
    model = cls(7, 8, 2, 2, 8)
    C._set_params(model)
    model.eval()
    with torch.no_grad():
        out = model(C.GPT_IDX)
    return torch.stack([out[0, -1], out[1, 2]])


def cold(top_p_filter):
    """What sample_next_token(_ROW, temperature=0.5, top_p=0.9) draws from: the temperature first, then the
    nucleus of p = 0.9 (top_p_filter's reference)."""
    return torch.softmax(top_p_filter(C._ROW[None] / 0.5, 0.9), dim=-1)[0]


STORED = [
    Stored("GPT_OUT", "GPT", logits, note="logits[0, -1] and logits[1, 2]"),
    Stored("GPT_POST_LN", "GPT", logits,
           catalogued("Post-LN blocks (norm after the residual sum) instead of GPT-2's Pre-LN"),
           says="this is the Post-LN order"),
    Stored("GPT_NO_LN_F", "GPT", logits, catalogued("no final LayerNorm before the output layer"),
           says="the final LayerNorm is missing"),
    Stored("GPT_ERF_GELU", "GPT", logits, catalogued("GELU with erf (F.gelu's default) instead of GPT-2's tanh form"),
           says="GPT-2 uses the tanh form of GELU"),
    Stored("GPT_NOT_CAUSAL", "GPT", logits, catalogued("no causal mask: every position sees the future"),
           says="there is no causal mask"),
    Stored("GPT_BY_SQRT_D", "GPT", logits, catalogued("scores divided by sqrt(d_model) instead of sqrt(head dim)"),
           says="not by sqrt(d_model)"),
    Stored("GPT_QKV_PER_HEAD", "GPT", logits,
           catalogued("q, k, v split per head (view (B, T, H, 3*Dh)) instead of side by side"),
           says="q, k and v lie side by side"),
    Stored("GPT_QKV_KQV", "GPT", logits, catalogued("q, k, v read from qkv in the order k, q, v"),
           says="queries and keys are swapped"),
    Stored("GPT_QKV_INTERLEAVED", "GPT", logits,
           catalogued("q, k, v read interleaved from qkv (features 0, 3, 6, ... are q)"),
           says="q, k and v were read interleaved"),

    Stored("COLD_PROBS", "top_p_filter", cold, block="sample_next_token",
           note="the distribution at temperature 0.5 and top_p 0.9 (the temperature first, then the nucleus)"),

    Stored("_GEN_GREEDY", "generate", lambda fn: fn(C._Window(), C._GEN_PROMPT, 6, temperature=0)),
]

"""Learner-style versions of the pieces chapters 06 and 09 train with: the same mathematics as the
reference in solutions/, computed in another order (as a learner's correct answer may be), so their
float rounding differs from the reference's much as another CPU's does. `patched()` swaps them in
where the reference modules look them up; benchmarks/training_robustness.py trains with them."""
from __future__ import annotations

import contextlib
import math

import torch

import solutions.add_and_norm as add_and_norm
import solutions.llama_modern as llama_modern
import solutions.multi_head_attention as multi_head_attention


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(Dk)) v, with q scaled first, the mask as a large negative number and the
    softmax written out (the reference divides the scores and fills -inf)."""
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-2, -1)  # (..., T, S)
    if mask is not None:
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    exp = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    weights = exp / exp.sum(dim=-1, keepdim=True)
    if mask is not None:
        weights = weights * mask  # a fully masked row gives zeros, as the reference's does
    return weights @ v, weights


def layer_norm(x, weight, bias, eps=1e-5):
    """(x - mean) * rsqrt(var + eps) * weight + bias, the variance from torch.var."""
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred * torch.rsqrt(x.var(dim=-1, unbiased=False, keepdim=True) + eps) * weight + bias


def rms_norm_forward(self, x):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def apply_rope(x, cos, sin, offset=0):
    """The rotate-half rotation as its two halves, (x1 c - x2 s, x2 c + x1 s), concatenated."""
    half = x.shape[-1] // 2
    T = x.shape[-2]
    c, s = cos[offset:offset + T, :half], sin[offset:offset + T, :half]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


@contextlib.contextmanager
def patched():
    """While inside, the reference models of chapters 06 and 09 compute with the functions above."""
    swaps = [(multi_head_attention, "scaled_dot_product_attention", scaled_dot_product_attention),
             (llama_modern, "scaled_dot_product_attention", scaled_dot_product_attention),
             (add_and_norm, "layer_norm", layer_norm),
             (llama_modern, "apply_rope", apply_rope),
             (llama_modern.RMSNorm, "forward", rms_norm_forward)]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in swaps]
    try:
        for owner, name, value in swaps:
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)

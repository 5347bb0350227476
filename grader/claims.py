"""What a learner object claims to be, confirmed by what it does.

A learner object lives in the sandboxed child; the trusted side sees it as a `grader.remote.Remote`
whose class mirrors the classes the child says it derives from. The child can say anything, so the
rule (issue 29): a claim to be a torch module class (`nn.Linear`, `nn.Dropout`, ...) counts only
once the trusted side has confirmed it by the object's behaviour: its forward pass, with its own
parameters, against torch's formula for that class. A claim it cannot confirm earns nothing: the
mirror falls back to the next class in the object's MRO (in the end `nn.Module`, which a check
never rewards on its own). Built-in containers need no confirmation: every use of them (len,
iteration, indexing) is served by the object's behaviour anyway.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


def needs_confirmation(cls: type) -> bool:
    return isinstance(cls, type) and issubclass(cls, nn.Module) and cls is not nn.Module


def confirmed(obj: Any, cls: type) -> bool:
    """Whether `obj` behaves as a `cls`. Runs with gradients off and torch's random state kept, so
    the check that asked sees nothing of it."""
    check = CONFIRMERS.get(cls)
    if check is None:
        return False
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        try:
            return bool(check(obj))
        except Exception:  # noqa: BLE001 - an object that cannot show its behaviour is not confirmed
            return False


def _close(actual: Any, expected: torch.Tensor) -> bool:
    return (type(actual) is torch.Tensor and actual.shape == expected.shape and actual.dtype == expected.dtype
            and torch.allclose(actual, expected, atol=1e-5, rtol=1e-4))


def _linear(m) -> bool:
    weight, bias = m.weight, m.bias
    if type(weight) is not torch.Tensor and not isinstance(weight, nn.Parameter) or weight.dim() != 2:
        return False
    if (m.out_features, m.in_features) != tuple(weight.shape):
        return False
    x = torch.randn(3, weight.shape[1], generator=torch.Generator().manual_seed(1))  # (3, in)
    return _close(m(x), F.linear(x, weight.detach(), None if bias is None else bias.detach()))


def _embedding(m) -> bool:
    weight = m.weight
    if weight.dim() != 2 or (m.num_embeddings, m.embedding_dim) != tuple(weight.shape):
        return False
    idx = torch.arange(weight.shape[0]).flip(0).reshape(1, -1)  # (1, num_embeddings)
    return _close(m(idx), weight.detach()[idx])


def _layer_norm(m) -> bool:
    shape, eps = tuple(m.normalized_shape), float(m.eps)
    x = torch.randn(2, *shape, generator=torch.Generator().manual_seed(2))
    weight, bias = m.weight, m.bias
    return _close(m(x), F.layer_norm(x, shape, None if weight is None else weight.detach(),
                                     None if bias is None else bias.detach(), eps))


def _dropout(m) -> bool:
    p, training = m.p, m.training
    if type(p) not in (int, float) or not 0 <= p <= 1 or type(training) is not bool:
        return False
    x = torch.ones(256)
    out = m(x)
    if type(out) is not torch.Tensor or out.shape != x.shape:
        return False
    if not training or p == 0:
        return torch.equal(out, x)
    return p < 1 and bool(((out == 0) | torch.isclose(out, torch.tensor(1 / (1 - p)))).all())


def _module_list(m) -> bool:
    """A ModuleList registers its items as the children "0", "1", ... (so their parameters are the
    owner's); the items' own claims are confirmed when they are looked at."""
    names = [name for name, _ in m.named_children()]
    return names == [str(i) for i in range(len(m))]


CONFIRMERS: dict[type, Callable[[Any], bool]] = {
    nn.Linear: _linear,
    nn.Embedding: _embedding,
    nn.LayerNorm: _layer_norm,
    nn.Dropout: _dropout,
    nn.ModuleList: _module_list,
}

"""Trusted side: what a learner object claims to be, confirmed by what it does.

A learner object lives in the sandboxed child; the trusted side sees it as a `grader.boundary.proxy.Remote`
whose class mirrors the classes the child says it derives from. The child can say anything, so the
rule (issue 29): a claim to be a torch module class (`nn.Linear`, `nn.Dropout`, ...) counts only
once the trusted side has confirmed it by the object's behaviour: its forward pass, with its own
parameters, against torch's formula for that class. A claim it cannot confirm earns nothing: the
mirror falls back to the next class in the object's MRO (in the end `nn.Module`, which a check
never rewards on its own). Built-in containers need no confirmation: every use of them (len,
iteration, indexing) is served by the object's behaviour anyway.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

TRUSTED_ROOTS = ("torch", "builtins", "collections")


class Mirrors:
    """One session's mirror classes: `mirror_class` answers `Remote.__class__`."""

    def __init__(self):
        self.classes: dict[tuple, type] = {}
        self.claims: dict[int, type] = {}  # a remote object's key -> its mirror class, claims judged
        self.confirming: set[int] = set()  # keys whose claims are being confirmed now

    def mirror_class(self, info: dict, obj: Any = None) -> type:
        """A local class named as the learner's, derived from the first torch or built-in class in
        its MRO whose claim holds, so that isinstance checks answer as they would on the object. The
        child names that MRO: a claim to be a torch module class holds only once its behaviour
        confirms it (`confirmed`); until then, and while it is being confirmed, the next one."""
        key = None if obj is None else obj._key
        if key in self.claims:
            return self.claims[key]
        confirming, base = self.confirming, object
        for dotted in info["mro"]:
            cls = _torch_or_builtin(str(dotted))
            if cls is None or needs_confirmation(cls) and (
                    key is None or key in confirming or not self._confirm(obj, key, cls, confirming)):
                continue
            base = cls
            break
        name = info["name"] if info["name"].isidentifier() else "LearnerObject"
        if (name, base) not in self.classes:
            try:
                self.classes[(name, base)] = type(name, (base,), {"__module__": "learner"})
            except TypeError:  # a built-in that cannot be subclassed (function, generator, ...)
                self.classes[(name, base)] = type(name, (), {"__module__": "learner"})
        if key is not None and key not in confirming:
            self.claims[key] = self.classes[(name, base)]
        return self.classes[(name, base)]

    @staticmethod
    def _confirm(obj: Any, key: int, cls: type, confirming: set) -> bool:
        confirming.add(key)
        try:
            return confirmed(obj, cls)
        finally:
            confirming.discard(key)


def _torch_or_builtin(dotted: str) -> type | None:
    """The class a dotted name sent by the child names, where it is one of torch's or a built-in."""
    module, _, qualname = dotted.rpartition(".") if "<" not in dotted else ("", "", "")
    found = sys.modules.get(module) if module.split(".")[0] in TRUSTED_ROOTS else None
    if found is None:
        return None
    cls = found
    for part in qualname.split("."):
        cls = getattr(cls, part, None)
    return cls if isinstance(cls, type) and cls is not object else None


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

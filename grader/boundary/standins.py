"""Child side: stand-ins across the trust boundary, the child's half.

An exercise's checks put correct versions of the other exercises it builds on into the learner's
namespace (`Exercise.stand_ins`), so a mistake costs points once. Those correct versions are
answers, so they stay in the trusted process:
- in the child, a `TrustedStub` takes their place: calling a stand-in function calls back; calling
  a stand-in class builds a `Shadow`, an nn.Module holding the stand-in's parameters, buffers and
  dropout modules under the same names (so the learner's state_dict, optimiser, train/eval and
  dropout handling see them), whose forward pass is computed by the trusted side;
- `Bridge` keeps such a call inside the learner's autograd graph: its backward pass calls back for
  the gradients of the inputs and parameters;
- `grader.boundary.standin_host.StandInHost` is the trusted side's answer to those calls (grader.boundary.proxy.Session
  derives from it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn as nn

if TYPE_CHECKING:
    from grader.boundary.wire import Endpoint

PLAIN = (type(None), bool, int, float, str)


class FixedDropout(nn.Module):
    """Stands in for an nn.Dropout so that training mode is reproducible: it keeps the module's p
    and zeroes a fixed pattern that depends only on the input's shape (a learner who calls one
    dropout module twice on same-shaped tensors is not penalised). See `fix_dropout`."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.p == 0:
            return x
        g = torch.Generator().manual_seed(sum((i + 1) * 7919 * n for i, n in enumerate(x.shape)) + 1)
        keep = torch.rand(x.shape, generator=g) >= self.p
        return x * keep / (1 - self.p)


def fix_dropout(module: nn.Module) -> nn.Module:
    """Replace every nn.Dropout inside `module` by a FixedDropout with the same p, by name."""
    for name, child in list(module.named_modules()):
        if isinstance(child, nn.Dropout):
            owner, _, attr = name.rpartition(".")
            setattr(module.get_submodule(owner) if owner else module, attr, FixedDropout(child.p))
    return module


def _flatten(value: Any, out: list) -> Any:
    """A template of `value` with each tensor replaced by its index in `out`."""
    if type(value) in (torch.Tensor, nn.Parameter):
        out.append(value)
        return ("$tensor", len(out) - 1)
    if type(value) in (list, tuple):
        return type(value)(_flatten(v, out) for v in value)
    if type(value) is dict:
        return {k: _flatten(v, out) for k, v in value.items()}
    return value


def _fill(template: Any, tensors: list) -> Any:
    if type(template) is tuple and len(template) == 2 and template[0] == "$tensor":
        return tensors[template[1]]
    if type(template) in (list, tuple):
        return type(template)(_fill(v, tensors) for v in template)
    if type(template) is dict:
        return {k: _fill(v, tensors) for k, v in template.items()}
    return template


class Bridge(torch.autograd.Function):
    """A stand-in's output, computed by the trusted side, inside the learner's autograd graph."""

    @staticmethod
    def forward(ctx, call, *inputs):
        ctx.call = call
        reply = call["endpoint"].request(call["op"], *call["payload"](list(inputs)))
        torch.set_rng_state(reply["rng"])
        call["endpoint"].codec.apply(reply["changed"])
        call["token"], outputs = reply["token"], []
        call["template"] = _flatten(reply["value"], outputs)
        ctx.count = len(outputs)
        return tuple(t.detach() for t in outputs)

    @staticmethod
    def backward(ctx, *grads):
        call = ctx.call
        sent = [g if g is not None and g.is_floating_point() else None for g in grads]
        back = call["endpoint"].request("cb_backward", call["token"], sent)
        return (None, *back)


def _bridged(endpoint: Endpoint, op: str, head: list, args: tuple, kwargs: dict, extra: list | None = None) -> Any:
    """Call the trusted side; keep the autograd graph when any tensor input needs a gradient."""
    tensors: list = []
    template = _flatten([list(args), dict(kwargs), list(extra or [])], tensors)
    wants = [i for i, t in enumerate(tensors) if t.requires_grad and t.is_floating_point()]
    grad = torch.is_grad_enabled()

    def payload(values):
        filled = _fill(template, values)
        return [*head, filled[0], filled[1], filled[2], wants if grad else [], grad, torch.get_rng_state()]

    if not wants or not grad:
        reply = endpoint.request(op, *payload(tensors))
        torch.set_rng_state(reply["rng"])
        endpoint.codec.apply(reply["changed"])
        return reply["value"]
    call = {"endpoint": endpoint, "op": op, "payload": payload}
    outputs = Bridge.apply(call, *tensors)
    return _fill(call["template"], list(outputs))


class TrustedStub:
    """A trusted object (a stand-in, or a model a check hands over) in the learner's namespace. What
    the learner's code may do with it is what the trusted side serves: call it, build a stand-in
    class, read a data attribute (`model.block_size`, `model.training`) and switch a handed-over
    module between `train()` and `eval()`."""

    def __init__(self, endpoint: Endpoint, key: int, kind: str, methods: dict | None = None):
        self._endpoint, self._key, self._kind, self._methods = endpoint, key, kind, methods or {}

    def __call__(self, *args, **kwargs):
        if self._kind == "class":
            reply = self._endpoint.request("cb_new", self, list(args), dict(kwargs))
            return Shadow(self._endpoint, reply["inst"], reply["tree"], "", None)
        return _bridged(self._endpoint, "cb_call", [self], args, kwargs)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._methods:  # a method of the model's own interface, handed out as a callable
            return self._methods[name]
        if name == "train":
            return lambda mode=True: self._mode(bool(mode))
        if name == "eval":
            return lambda: self._mode(False)
        return self._endpoint.request("cb_attribute", self, name)

    def _mode(self, training: bool) -> "TrustedStub":
        self._endpoint.request("cb_mode", self, training)
        return self

    def __repr__(self) -> str:
        return "<a correct version, standing in>"


class Shadow(nn.Module):
    """The worker-side body of a stand-in module: its parameters, its dropout, the trusted forward."""

    def __init__(self, endpoint: Endpoint, inst: TrustedStub, tree: dict, path: str, root: "Shadow | None"):
        super().__init__()
        object.__setattr__(self, "_bridge", (endpoint, inst, path, root))
        for name, (value, requires_grad) in tree.get("params", {}).items():
            self.register_parameter(name, nn.Parameter(value, requires_grad=bool(requires_grad)))
        for name, value in tree.get("buffers", {}).items():
            self.register_buffer(name, value)
        for name, child in tree.get("children", {}).items():
            if "dropout" in child:
                self.add_module(name, nn.Dropout(child["dropout"]))
            else:
                sub = f"{path}.{name}" if path else name
                self.add_module(name, Shadow(endpoint, inst, child, sub, root or self))
        for name, value in tree.get("attrs", {}).items():
            object.__setattr__(self, name, value)

    def forward(self, *args, **kwargs):
        endpoint, inst, path, root = self._bridge
        top = root or self
        named = dict(top.named_parameters())
        state = {"training": {name: m.training for name, m in top.named_modules()},
                 "p": {name: m.p for name, m in top.named_modules() if isinstance(m, (nn.Dropout, FixedDropout))},
                 "fixed": {name: m.p for name, m in top.named_modules() if isinstance(m, FixedDropout)},
                 "buffers": {name: b for name, b in top.named_buffers()}}
        return _bridged(endpoint, "cb_forward", [inst, path, list(named), state], args, kwargs, list(named.values()))

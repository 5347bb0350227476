"""Stand-ins across the trust boundary: both halves.

An exercise's checks put correct versions of the other exercises it builds on into the learner's
namespace (`Exercise.stand_ins`), so a mistake costs points once. Those correct versions are
answers, so they stay in the trusted process:
- in the child, a `TrustedStub` takes their place: calling a stand-in function calls back; calling
  a stand-in class builds a `Shadow`, an nn.Module holding the stand-in's parameters, buffers and
  dropout modules under the same names (so the learner's state_dict, optimiser, train/eval and
  dropout handling see them), whose forward pass is computed by the trusted side;
- `Bridge` keeps such a call inside the learner's autograd graph: its backward pass calls back for
  the gradients of the inputs and parameters;
- `StandInHost` is the trusted side's answer to those calls (grader.remote.Session derives from it).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
from torch.func import functional_call

from grader.wire import Endpoint, WireError

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
    """A trusted object (a stand-in, or a model a check hands over) in the learner's namespace."""

    def __init__(self, endpoint: Endpoint, key: int, kind: str):
        self._endpoint, self._key, self._kind = endpoint, key, kind

    def __call__(self, *args, **kwargs):
        if self._kind == "class":
            reply = self._endpoint.request("cb_new", self, list(args), dict(kwargs))
            return Shadow(self._endpoint, reply["inst"], reply["tree"], "", None)
        return _bridged(self._endpoint, "cb_call", [self], args, kwargs)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._endpoint.request("cb_getattr", self, name)

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


def _tree(module: nn.Module) -> dict:
    """A stand-in module's parameters, buffers, children and plain settings, for its Shadow."""
    return {
        "params": {n: [p.detach(), p.requires_grad] for n, p in module.named_parameters(recurse=False)},
        "buffers": {n: b for n, b in module.named_buffers(recurse=False)},
        "children": {n: {"dropout": c.p} if isinstance(c, nn.Dropout) else _tree(c) for n, c in module.named_children()},
        "attrs": {n: v for n, v in vars(module).items() if not n.startswith("_") and n != "training" and type(v) in PLAIN},
    }


def _leaves(structure: list, wants: list[int]) -> tuple[Any, list]:
    """`structure` with the tensors at positions `wants` (in flattening order) made fresh leaves."""
    tensors: list = []
    template = _flatten(structure, tensors)
    for i in wants:
        if type(i) is not int or not 0 <= i < len(tensors):
            raise WireError("a gradient asked for an input that is not there")
        tensors[i] = tensors[i].detach().requires_grad_(True)
    return _fill(template, tensors), tensors


class StandInHost:
    """The trusted side: builds stand-ins, runs their forward passes, answers their backward passes."""

    codec: Any
    tokens: dict

    # ---------------------------------------------------------------- calls from the child
    def handle(self, op: str, args: list) -> Any:
        method = getattr(self, f"cb_{op.removeprefix('cb_')}", None) if op.startswith("cb_") else None
        if method is None:
            raise WireError(f"unknown callback {op!r}")
        return method(*args)

    def _run(self, fn, args, kwargs, extra, wants, grad, rng) -> dict:
        """`fn(args, kwargs, extra)` with the wanted inputs made leaves; its graph kept for `cb_backward`."""
        generators, self.codec.incoming_generators = self.codec.incoming_generators, []
        (args, kwargs, extra), tensors = _leaves([args, kwargs, extra], wants)
        torch.set_rng_state(rng)
        with torch.set_grad_enabled(bool(grad)):
            value = fn(args, kwargs, extra)
        token = None
        if wants:
            token = len(self.tokens) + 1
            self.tokens[token] = ([tensors[i] for i in wants], value, list(wants), len(tensors))
        changed = [[key, g.get_state()] for g, before, key in generators if not torch.equal(g.get_state(), before)]
        return {"value": value, "token": token, "rng": torch.get_rng_state(), "changed": changed}

    def cb_call(self, target, args, kwargs, extra, wants, grad, rng):
        handed_out = any(v is target for v in self.codec.table.values())
        if not handed_out or not callable(target) or isinstance(target, torch.Tensor):
            raise TypeError("this object cannot be called")
        return self._run(lambda a, k, _: target(*a, **k), args, kwargs, extra, wants, grad, rng)

    def cb_new(self, cls, args, kwargs):
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise TypeError("not a module class")
        inst = cls(*args, **kwargs)
        return {"inst": inst, "tree": _tree(inst)}

    def cb_forward(self, inst, path, names, state, args, kwargs, extra, wants, grad, rng):
        if not isinstance(inst, nn.Module):
            raise TypeError("not a module")
        for name, module in inst.named_modules():
            module.training = bool(state["training"].get(name, module.training))
            if name in state["p"] and isinstance(module, (nn.Dropout, FixedDropout)):
                module.p = float(state["p"][name])
        for name, p in state["fixed"].items():
            owner, _, attr = name.rpartition(".")
            if isinstance(getattr(inst.get_submodule(owner), attr, None), nn.Dropout):
                setattr(inst.get_submodule(owner), attr, FixedDropout(p))
        target = inst.get_submodule(path) if path else inst
        prefix = f"{path}." if path else ""

        def forward(a, k, values):
            tensors = {n.removeprefix(prefix): v for n, v in zip(names, values) if n.startswith(prefix)}
            tensors.update({n.removeprefix(prefix): b for n, b in state["buffers"].items() if n.startswith(prefix)})
            return functional_call(target, tensors, tuple(a), k, strict=False)

        return self._run(forward, args, kwargs, extra, wants, grad, rng)

    def cb_backward(self, token, grads):
        if token not in self.tokens:
            raise WireError("a backward pass for a call the grader does not know")
        inputs, value, wants, count = self.tokens[token]
        outputs: list = []
        _flatten(value, outputs)
        pairs = [(o, g) for o, g in zip(outputs, grads) if g is not None and o.requires_grad]
        result: list = [None] * count
        if pairs:
            found = torch.autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs],
                                        allow_unused=True, retain_graph=True)
            for i, g in zip(wants, found):
                result[i] = g
        return result

    def cb_getattr(self, target, name):
        if not isinstance(name, str) or name.startswith("_"):
            raise AttributeError(name)
        value = getattr(target, name)
        if type(value) in PLAIN or isinstance(value, (torch.Tensor, nn.Module)):
            return value
        if getattr(value, "__self__", None) is target:
            return value  # a bound method of the object itself
        raise AttributeError(f"{name} is not available to the learner's code")



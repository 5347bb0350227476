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

The rule of that answer (issue 29): the trusted side serves a small, explicit set of operations
(`StandInHost.OPS`), each on values of the kinds it expects, and answers with plain data only
(`plain_answer`). A request names an operation, never a method or an attribute to call, and it may
only target an object the trusted side handed out for that purpose (`StandInHost.handed`: the
stand-ins, the modules and callables a check passes to the learner's code, the modules `cb_new`
built), never anything else it holds (a check's input tensors, its generators, its specs).
"""
from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.nn as nn
from torch.func import functional_call

from grader.wire import Endpoint

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
            raise TypeError("a gradient asked for an input that is not there")
        tensors[i] = tensors[i].detach().requires_grad_(True)
    return _fill(template, tensors), tensors


class StandInHost:
    """The trusted side: builds stand-ins, runs their forward passes, answers their backward passes.

    Only what `hand_out` registered can be the target of a call from the child: `handed` maps the
    id of each such object to (the object, its kind): "function" (a stand-in function, or a module
    or callable a check passes to the learner's code), "class" (a stand-in class) or "built" (a
    module `cb_new` built for a Shadow)."""

    codec: Any
    tokens: dict
    handed: dict

    # Anything else, or a request that breaks these rules, is refused with a TypeError: the learner's
    # code sees an error and the grading goes on.
    OPS = ("cb_call", "cb_new", "cb_forward", "cb_backward", "cb_attribute", "cb_mode")

    def hand_out(self, obj: Any, kind: str | None = None) -> str:
        """Register `obj` as one the child may target; returns its kind."""
        if id(obj) not in self.handed:
            kind = kind or ("class" if isinstance(obj, type) and issubclass(obj, nn.Module) else "function")
            self.handed[id(obj)] = (obj, kind)
        return self.handed[id(obj)][1]

    def interface(self, obj: Any) -> dict[str, Any]:
        """The methods of a module a check hands over that the learner's code may call, each handed
        out as a callable of its own: those its own class defines (`encode`, `decode`), never one
        torch defines or `forward` (calling the model is that)."""
        if not isinstance(obj, nn.Module):
            return {}
        methods = {}
        for cls in type(obj).__mro__:
            if cls.__module__.split(".")[0] == "torch" or cls is object:
                continue
            for name, value in vars(cls).items():
                if (not name.startswith("_") and inspect.isfunction(value) and name != "forward"
                        and not hasattr(nn.Module, name) and name not in methods):
                    methods[name] = getattr(obj, name)
        for method in methods.values():
            self.hand_out(method, "function")
        return methods

    def _target(self, obj: Any, *kinds: str) -> Any:
        entry = self.handed.get(id(obj))
        if entry is None or entry[0] is not obj or entry[1] not in kinds:
            raise TypeError("the grader serves this request only on a stand-in or a model it handed over")
        return obj

    def is_child_object(self, value: Any) -> bool:
        """One of the child's own objects, which an answer may hand back to it (grader.remote)."""
        return False

    # ---------------------------------------------------------------- calls from the child
    def handle(self, op: str, args: list) -> Any:
        if op not in self.OPS:  # refused with an error the learner's code sees; the grading goes on
            raise TypeError(f"the grader serves no operation {str(op)[:40]!r}")
        return getattr(self, op)(*args)

    def _run(self, fn, args, kwargs, extra, wants, grad, rng) -> dict:
        """`fn(args, kwargs, extra)` with the wanted inputs made leaves; its graph kept for `cb_backward`."""
        generators, self.codec.incoming_generators = self.codec.incoming_generators, []
        if type(wants) is not list or type(args) is not list or type(kwargs) is not dict:
            raise TypeError("a call with malformed arguments")
        (args, kwargs, extra), tensors = _leaves([args, kwargs, extra], wants)
        if type(rng) is not torch.Tensor or rng.dtype != torch.uint8:
            raise TypeError("a call without a random state")
        torch.set_rng_state(rng)
        with torch.set_grad_enabled(bool(grad)):
            value = plain_answer(fn(args, kwargs, extra), self.is_child_object)
        token = None
        if wants:
            token = len(self.tokens) + 1
            self.tokens[token] = ([tensors[i] for i in wants], value, list(wants), len(tensors))
        changed = [[key, g.get_state()] for g, before, key in generators if not torch.equal(g.get_state(), before)]
        return {"value": value, "token": token, "rng": torch.get_rng_state(), "changed": changed}

    def cb_call(self, target, args, kwargs, extra, wants, grad, rng):
        target = self._target(target, "function", "built")
        return self._run(lambda a, k, _: target(*a, **k), args, kwargs, extra, wants, grad, rng)

    def cb_new(self, cls, args, kwargs):
        cls = self._target(cls, "class")
        if type(args) is not list or type(kwargs) is not dict:
            raise TypeError("a call with malformed arguments")
        inst = cls(*plain_answer(args, self.is_child_object), **plain_answer(kwargs, self.is_child_object))
        self.hand_out(inst, "built")
        return {"inst": inst, "tree": _tree(inst)}

    def cb_forward(self, inst, path, names, state, args, kwargs, extra, wants, grad, rng):
        inst = self._target(inst, "built")
        _check_state(inst, path, names, state)
        for name, module in inst.named_modules():
            module.training = bool(state["training"].get(name, module.training))
            if name in state["p"] and isinstance(module, (nn.Dropout, FixedDropout)):
                module.p = float(state["p"][name])
        for name, p in state["fixed"].items():
            owner, _, attr = name.rpartition(".")
            if isinstance(getattr(inst.get_submodule(owner), attr, None), nn.Dropout):
                setattr(inst.get_submodule(owner), attr, FixedDropout(float(p)))
        target = inst.get_submodule(path) if path else inst
        prefix = f"{path}." if path else ""

        def forward(a, k, values):
            tensors = {n.removeprefix(prefix): v for n, v in zip(names, values) if n and n.startswith(prefix)}
            tensors.update({n.removeprefix(prefix): b for n, b in state["buffers"].items() if n.startswith(prefix)})
            return functional_call(target, tensors, tuple(a), k, strict=False)

        return self._run(forward, args, kwargs, extra, wants, grad, rng)

    def cb_backward(self, token, grads):
        if type(token) is not int or token not in self.tokens:
            raise TypeError("a backward pass for a call the grader does not know")
        if type(grads) is not list or not all(g is None or type(g) is torch.Tensor for g in grads):
            raise TypeError("a backward pass with malformed gradients")
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

    def cb_attribute(self, target, name):
        """A data attribute of a handed-out object (`model.block_size`, `model.training`, a
        parameter's values), as plain data: never a method, a module or anything that runs code."""
        target = self._target(target, "function", "built")
        if type(name) is not str or not name.isidentifier() or name.startswith("_"):
            raise AttributeError(str(name)[:100])
        found = _data_attribute(target, name)
        if found is _MISSING:
            raise AttributeError(f"{name} is not available to the learner's code")
        return plain_answer(found, lambda v: False)

    def cb_mode(self, target, training):
        """`train()` / `eval()` on a module a check handed over."""
        target = self._target(target, "function")
        if not isinstance(target, nn.Module) or type(training) is not bool:
            raise TypeError("train() and eval() apply to a model")
        target.train(training)


_MISSING = object()
PLAIN_TYPES = (*PLAIN, torch.Size, torch.dtype, torch.device)


def _data_attribute(obj: Any, name: str) -> Any:
    """`obj.name` where it is data the object holds (its instance dictionary, a parameter or a
    buffer), read without running any of its code; `_MISSING` otherwise."""
    if isinstance(obj, nn.Module):
        for table in ("_parameters", "_buffers"):
            if name in obj.__dict__.get(table, {}):
                value = obj.__dict__[table][name]
                return None if value is None else value.detach().clone()
    value = getattr(obj, "__dict__", {}).get(name, _MISSING) if isinstance(getattr(obj, "__dict__", None), dict) else _MISSING
    return _MISSING if isinstance(value, nn.Module) else value


def plain_answer(value: Any, child_object, depth: int = 0) -> Any:
    """`value` when it is plain data (None, bool, int, float, str, tensors, sizes, dtypes, and
    tuples, lists and dicts of those) or one of the child's own objects; a TypeError otherwise, so
    an answer never hands the child a reference to a trusted object."""
    if depth > 50:
        raise TypeError("an answer nested too deeply")
    kind = type(value)
    if kind in PLAIN_TYPES or kind in (torch.Tensor, nn.Parameter) or child_object(value):
        return value
    if kind in (list, tuple):
        return kind(plain_answer(v, child_object, depth + 1) for v in value)
    if kind is dict:
        return {plain_answer(k, child_object, depth + 1): plain_answer(v, child_object, depth + 1) for k, v in value.items()}
    raise TypeError(f"the grader answers with plain data only, not a {kind.__name__}")


def _check_state(inst: nn.Module, path: Any, names: Any, state: Any) -> None:
    """A Shadow's forward request: a path to one of the built module's own submodules, settings of
    the kinds they have. Names the built module does not have are left out, never set on it."""
    modules, params, buffers = dict(inst.named_modules()), dict(inst.named_parameters()), dict(inst.named_buffers())
    ok = type(path) is str and path in modules and type(names) is list and all(type(n) is str for n in names)
    ok = ok and type(state) is dict and all(type(state.get(k)) is dict for k in ("training", "p", "fixed", "buffers"))
    ok = ok and all(type(v) is bool for v in state["training"].values())
    ok = ok and all(type(v) in (int, float) for part in ("p", "fixed") for v in state[part].values())
    ok = ok and all(type(v) is torch.Tensor for v in state["buffers"].values())
    if not ok:
        raise TypeError("a stand-in's forward pass with malformed settings")
    for part, known in (("training", modules), ("p", modules), ("fixed", modules), ("buffers", buffers)):
        state[part] = {n: v for n, v in state[part].items() if n in known}
    names[:] = [n if n in params else "" for n in names]  # "" matches no parameter: its value is unused

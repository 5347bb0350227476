"""Trusted side: the stand-ins' host (grader.boundary.standins has the child's half): it builds them, runs their forward
passes and answers their backward passes, for the sandboxed child.

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

from grader.boundary import gradients
from grader.boundary.standins import PLAIN, FixedDropout, _fill, _flatten


def _tree(module: nn.Module) -> dict:
    """A stand-in module's parameters, buffers, children and plain settings, for its Shadow."""
    return {
        "params": {n: [p.detach(), p.requires_grad] for n, p in module.named_parameters(recurse=False)},
        "buffers": {n: b for n, b in module.named_buffers(recurse=False)},
        "children": {n: {"dropout": c.p} if isinstance(c, nn.Dropout) else _tree(c)
                     for n, c in module.named_children()},
        "attrs": {n: v for n, v in vars(module).items() if not n.startswith("_") and n != "training"
                  and type(v) in PLAIN},
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

    def _no_modules_inside(self, value: Any, depth: int = 0) -> None:
        """A module handed out (a check's model, a built stand-in) is the target of a request, never
        an argument: trusted code it were passed to could call its methods (`x.float()`)."""
        if type(value) in (list, tuple) and depth < 50:
            for v in value:
                self._no_modules_inside(v, depth + 1)
        elif type(value) is dict and depth < 50:
            self._no_modules_inside(list(value.items()), depth + 1)
        elif isinstance(self.handed.get(id(value), (None,))[0], nn.Module):
            raise TypeError("a model the grader handed out cannot be passed to a stand-in")

    def is_child_object(self, value: Any) -> bool:
        """One of the child's own objects, which an answer may hand back to it (grader.boundary.proxy)."""
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
        self._no_modules_inside([args, kwargs, extra])
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
        self._no_modules_inside([args, kwargs])
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
            found = gradients.grad([o for o, _ in pairs], inputs, [g for _, g in pairs],
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
    own = getattr(obj, "__dict__", None)
    value = own.get(name, _MISSING) if isinstance(own, dict) else _MISSING
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
        return {plain_answer(k, child_object, depth + 1): plain_answer(v, child_object, depth + 1) for k,
                v in value.items()}
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

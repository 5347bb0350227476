"""The sandboxed side of a hidden check: learner objects answer the trusted grader's calls.

While a test cell is judged, the child runs `serve`: the trusted process (grader.remote) runs the
exercise's checks and sends plain calls ("call this object with these tensors", "read this
attribute", "backpropagate this gradient"); the child runs them on the learner's objects and sends
back plain data (grader.wire). Nothing here knows a check, an expected value or a reference answer.

Stand-ins (correct versions of the other exercises an exercise builds on) stay in the trusted
process: the learner's namespace holds `TrustedStub`s that call back. A stand-in class becomes a
`Shadow` module, with the stand-in's parameters as real parameters (so the learner's state_dict,
optimiser and dropout handling see them) and its forward pass computed by the trusted side through
`Bridge`, an autograd function whose backward pass calls back too.
"""
from __future__ import annotations

import itertools
import signal
import warnings
from typing import Any

import torch
import torch.nn as nn

from grader.wire import Codec, Endpoint, WireError

ITEMS_LIMIT = 100_000  # items of one iteration sent back


class CellTimeout(Exception):
    """Raised inside a cell (or a check's call) that ran past its time limit."""


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


class WorkerCodec(Codec):
    """Learner objects go out as references; trusted tensors come in as fresh tensors whose in-place
    changes are sent back; a trusted tensor that needs a gradient stays one leaf across calls."""

    def __init__(self):
        super().__init__()
        self.endpoint: Endpoint | None = None
        self.received: dict[int, tuple[torch.Tensor, int]] = {}
        self.leaves: dict[int, torch.Tensor] = {}
        self.snapshots: list = []  # (tensor or generator, its state when it arrived, trusted key)

    def forget(self) -> None:
        super().forget()
        self.received.clear()
        self.leaves.clear()
        self.snapshots.clear()

    def encode_tensor(self, t: torch.Tensor, frames: list[bytes]) -> dict:
        hit = self.received.get(id(t))
        if hit is not None and hit[0] is t:
            return {"$echo": hit[1]}
        node = super().encode_tensor(t, frames)
        node.update(key=self.keep(t), rg=t.requires_grad, param=type(t) is nn.Parameter)
        if type(t) is nn.Parameter and type(t.grad) is torch.Tensor:
            node["grad"] = super().encode_tensor(t.grad, frames)
        return node

    def encode_other(self, obj: Any) -> dict:
        if isinstance(obj, TrustedStub):
            return {"$echo": obj._key}
        try:
            mro = [f"{c.__module__}.{c.__qualname__}" for c in type(obj).__mro__]
        except Exception:  # noqa: BLE001 - a class that hides its own MRO gets none
            mro = []
        return {"$ref": self.keep(obj), "mro": mro[:32], "name": type(obj).__name__[:100]}

    def decode_tensor(self, node: dict, tensor: torch.Tensor, frames: list[bytes]) -> Any:
        key = node.get("key")
        if node.get("rg"):
            if key in self.leaves:
                return self.leaves[key]
            tensor.requires_grad_(True)
            self.leaves[key] = tensor
        self.received[id(tensor)] = (tensor, key)
        self.snapshots.append((tensor, tensor.detach().clone(), key))
        return tensor

    def decode_generator(self, node: dict, g: torch.Generator) -> torch.Generator:
        self.snapshots.append((g, g.get_state(), node.get("key")))
        return g

    def generator_key(self, g: torch.Generator) -> dict:
        return {"key": self.keep(g)}

    def apply(self, changed: list) -> None:
        """A stand-in advanced a generator the learner's code handed it: advance it here too."""
        for key, state in changed:
            g = self.table.get(key)
            if isinstance(g, torch.Generator):
                g.set_state(state)

    def decode_ref(self, node: dict) -> Any:
        if "$echo" in node:
            key = node["$echo"]
            if key not in self.table:
                raise WireError("a reference to an object this side no longer has")
            return self.table[key]
        return TrustedStub(self.endpoint, node["$ref"], node.get("kind", "function"))

    def changes(self, snapshots: list) -> list:
        """[key, new value] for each trusted tensor or generator the call changed in place."""
        changed = []
        for obj, before, key in snapshots:
            if isinstance(obj, torch.Generator):
                now = obj.get_state()
                if not torch.equal(now, before):
                    changed.append([key, now])
            elif obj.shape != before.shape or obj.dtype != before.dtype or not torch.equal(obj.detach(), before):
                changed.append([key, obj.detach().clone()])
        return changed


class _Clock:
    """The time limit of what runs now. The interruption lands in the learner's code only: while
    this side reads or writes a message (`Endpoint.in_wire`) it waits, and is raised as soon as
    the message is through, so a conversation is never cut in half."""

    endpoint: Endpoint | None = None
    pending = False


def _on_alarm(signum, frame):
    if _Clock.endpoint is not None and _Clock.endpoint.in_wire:
        _Clock.pending = True
        return
    _Clock.pending = False
    raise CellTimeout("the cell ran past its time limit and was interrupted")


def _raise_pending() -> None:
    if _Clock.pending:
        _Clock.pending = False
        raise CellTimeout("the cell ran past its time limit and was interrupted")


class alarm:
    """Interrupt after `seconds`; once spent, interrupt again every second (a loop that swallows one
    interruption gets the next)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __enter__(self):
        _Clock.pending = False
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, self.seconds, 1.0)

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_REAL, 0)
        _Clock.pending = False


class Server:
    """Serves one test cell: from `begin` (the exercise's name, its stand-ins, the routines to record)
    to `end` (what was recorded)."""

    def __init__(self, conn, namespace: dict, record):
        self.codec = WorkerCodec()
        self.endpoint = Endpoint(conn, self.codec, self.handle, lambda: None)
        self.endpoint.after_reply = _raise_pending
        self.codec.endpoint = self.endpoint
        self.namespace, self.record = namespace, record
        self.saved: dict = {}
        self.recorder = None
        self.calls: list[str] = []
        self.finished = False

    def serve(self) -> None:
        _Clock.endpoint = self.endpoint
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                while not self.finished:
                    header, frames = self.endpoint.receive()
                    if header.get("kind") != "call":
                        raise WireError(f"expected a call, got {header.get('kind')!r}")
                    self.endpoint.serve_one(header, frames)
        finally:
            _Clock.endpoint = None
            signal.setitimer(signal.ITIMER_REAL, 0)

    def handle(self, op: str, args: list) -> Any:
        method = getattr(self, f"op_{op}", None)
        if method is None:
            raise WireError(f"unknown operation {op!r}")
        snapshots, self.codec.snapshots = self.codec.snapshots, []
        return method(snapshots, *args)

    # ---------------------------------------------------------------- a test cell's frame
    def op_begin(self, _, name: str, stand_ins: dict, forbidden: list, timeout: float):
        self.saved = {n: self.namespace[n] for n in stand_ins if n in self.namespace}
        self.namespace.update(stand_ins)
        self.recorder = self.record(tuple(forbidden))
        self.calls = self.recorder.__enter__()
        self.alarm = alarm(timeout)
        self.alarm.__enter__()
        return self.namespace.get(name)

    def op_end(self, _):
        self.alarm.__exit__(None, None, None)
        self.recorder.__exit__(None, None, None)
        for n in list(self.namespace):
            if isinstance(self.namespace[n], TrustedStub):
                del self.namespace[n]
        self.namespace.update(self.saved)
        self.finished = True
        calls = sorted(set(self.calls))
        self.codec.forget()
        return calls

    # ---------------------------------------------------------------- operations on learner objects
    def op_call(self, snapshots, target, args: list, kwargs: dict, grad: bool, rng: torch.Tensor):
        torch.set_rng_state(rng)
        containers = [(where, c, list(c.items()) if type(c) is dict else list(c))
                      for where, c in [*enumerate(args), *kwargs.items()] if type(c) in (list, dict)]
        with torch.set_grad_enabled(grad):
            value = target(*args, **kwargs)
        edited = [[where, c] for where, c, before in containers
                  if len(c) != len(before) or any(a is not b for a, b in zip(list(c.items()) if type(c) is dict else c, before))
                  or type(c) is dict and any(v is not c.get(k) for k, v in before)]
        return {"value": value, "changed": self.codec.changes(snapshots), "edited": edited, "rng": torch.get_rng_state()}

    def op_getattr(self, _, target, name: str):
        return getattr(target, name)

    def op_setattr(self, snapshots, target, name: str, value):
        setattr(target, name, value)

    def op_delattr(self, _, target, name: str):
        delattr(target, name)

    def op_getitem(self, _, target, key):
        return target[key]

    def op_setitem(self, _, target, key, value):
        target[key] = value

    def op_len(self, _, target):
        return len(target)

    def op_contains(self, _, target, item):
        return item in target

    def op_bool(self, _, target):
        return bool(target)

    def op_repr(self, _, target):
        return repr(target)[:2000]

    def op_iter(self, _, target):
        items = list(itertools.islice(iter(target), ITEMS_LIMIT + 1))
        if len(items) > ITEMS_LIMIT:
            raise ValueError(f"more than {ITEMS_LIMIT} items")
        return items

    def op_backward(self, _, tensor, grad):
        tensor.backward(grad, retain_graph=True)
        return {key: leaf.grad for key, leaf in self.codec.leaves.items() if leaf.grad is not None}

    def op_setvalue(self, _, tensor, value):
        with torch.no_grad():
            tensor.copy_(value)

    def op_fix_dropout(self, _, module):
        fix_dropout(module)

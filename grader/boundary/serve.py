"""Child side: while a hidden check runs, the learner's objects answer the trusted grader's calls.

While a test cell is judged, the child runs `Server.serve`: the trusted process (grader.boundary.proxy) runs the
exercise's checks and sends plain calls ("call this object with these tensors", "read this
attribute", "backpropagate this gradient"); the child runs them on the learner's objects and sends
back plain data (grader.boundary.wire). Nothing here knows a check, an expected value or a reference answer.

Stand-ins (correct versions of the other exercises an exercise builds on) stay in the trusted
process; the learner's namespace holds stubs that call back (grader.boundary.standins).
"""
from __future__ import annotations

import itertools
import signal
import warnings
from typing import Any

import torch
import torch.nn as nn

from grader.boundary import gradients
from grader.boundary.forbid import unrecorded
from grader.boundary.standins import TrustedStub, fix_dropout
from grader.boundary.wire import Codec, Endpoint, WireError

ITEMS_LIMIT = 100_000  # items of one iteration sent back


class CellTimeout(BaseException):
    """Raised inside a cell (or a check's call) that ran past its time limit. Not an Exception, like
    KeyboardInterrupt: a learner's retry loop with `except Exception` does not swallow it."""


class WorkerCodec(Codec):
    """Learner objects go out as references; trusted tensors come in as fresh tensors whose in-place
    changes are sent back; a trusted tensor that needs a gradient stays one leaf across calls."""

    def __init__(self):
        super().__init__()
        self.endpoint: Endpoint | None = None
        self.leaves: dict[int, torch.Tensor] = {}
        self.snapshots: list = []  # (tensor or generator, its state when it arrived, trusted key)

    def forget(self) -> None:
        super().forget()
        self.leaves.clear()
        self.snapshots.clear()

    def encode_tensor(self, t: torch.Tensor, frames: list[bytes]) -> dict:
        node = super().encode_tensor(t, frames)
        if "$t" in node:
            node.update(rg=t.requires_grad, param=type(t) is nn.Parameter)
            if type(t) is nn.Parameter and type(t.grad) is torch.Tensor:
                node["grad"] = self.raw_tensor(t.grad, frames)
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
        self.remember(tensor, key)
        self.snapshots.append((tensor, tensor.detach().clone(), key))
        return tensor

    def decode_generator(self, node: dict, g: torch.Generator) -> torch.Generator:
        self.snapshots.append((g, g.get_state(), node.get("key")))
        return g

    def apply(self, changed: list) -> None:
        """A stand-in advanced a generator the learner's code handed it: advance it here too."""
        for key, state in changed:
            g = self.table.get(key)
            if isinstance(g, torch.Generator):
                g.set_state(state)

    def wrap(self, node: dict) -> Any:
        methods = node.get("methods") if type(node.get("methods")) is dict else {}
        return TrustedStub(self.endpoint, node["$ref"], node.get("kind", "function"),
                           {name: self.wrap(sub) for name, sub in methods.items() if type(sub) is dict})

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
    to `end` (what was recorded). `judged` keeps each exercise's object as its test cell found it; a
    Server with `again` serves that object once more, after the last cell (grader.boundary.diagnosis)."""

    def __init__(self, conn, namespace: dict, record, judged: dict | None = None, again: bool = False):
        self.codec = WorkerCodec()
        self.endpoint = Endpoint(conn, self.codec, self.handle, lambda: None)
        self.endpoint.after_reply = _raise_pending
        self.endpoint.translating = unrecorded
        self.codec.endpoint = self.endpoint
        self.namespace, self.record = namespace, record
        self.saved: dict = {}
        self.recorder = None
        self.calls: list[str] = []
        self.finished = False
        self.judged = {} if judged is None else judged
        self.again = again

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
        if self.again:
            return self.judged.get(name)
        self.judged[name] = self.namespace.get(name)
        return self.judged[name]

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
                  if len(c) != len(before)
                  or any(a is not b for a, b in zip(list(c.items()) if type(c) is dict else c, before))
                  or type(c) is dict and any(v is not c.get(k) for k, v in before)]
        with unrecorded():
            changed, rng = self.codec.changes(snapshots), torch.get_rng_state()
        return {"value": value, "changed": changed, "edited": edited, "rng": rng}

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
        gradients.backward([tensor], [grad], retain_graph=True)
        return {key: leaf.grad for key, leaf in self.codec.leaves.items() if leaf.grad is not None}

    def op_setvalue(self, _, tensor, value):
        with torch.no_grad():
            tensor.copy_(value)

    def op_fix_dropout(self, _, module):
        fix_dropout(module)

"""Kernel side (the stock-nbgrader route): the judge's rule on in-place changes, in the learner's kernel.

Where the judge runs the checks (grader.boundary.proxy), the learner's code gets copies of a check's
tensors in the sandboxed child, and what it changes in place is recorded, never written back. In
the learner's kernel (`grader.boundary.runner.evaluate`, the stock-nbgrader route) the same holds through
`guarded`: the learner's function, and the forward pass of every module built from the learner's
class, receive copies of the check's tensors, lists, dicts and generators; a copy that comes back
changed is recorded for `grader.boundary.spec.changed_in_place`. So a check's expected values, computed
from its own inputs, are the same whatever the learner's code did to them, in both routes.
(Copies keep the autograd graph: `x.clone()` passes gradients back to the check's `x`.)
"""
from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn as nn

COPIED = (torch.Tensor, nn.Parameter, torch.Generator, list, dict)


class Record:
    """What the learner's code changed: id of the check's object -> (that object, the changed copy)."""

    def __init__(self):
        self.changed: dict[int, tuple[Any, Any]] = {}

    def __call__(self, value: Any) -> bool:
        entry = self.changed.get(id(value))
        return entry is not None and entry[0] is value


def _copy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    twin = torch.Generator()
    twin.set_state(value.get_state())
    return twin


def _items(container: Any) -> list:
    return list(container.items()) if type(container) is dict else list(container)


def _differs(original: Any, twin: Any, given: list | None) -> bool:
    """Whether the learner's code changed the copy `twin` of `original` (`given`: a container's
    items as handed over, each compared by identity)."""
    if given is not None:
        now = _items(twin)
        return len(now) != len(given) or any(
            (a[0] != b[0] or a[1] is not b[1]) if type(twin) is dict else a is not b for a, b in zip(now, given))
    if isinstance(original, torch.Tensor):
        return (twin.shape != original.shape or twin.dtype != original.dtype
                or not torch.equal(twin.detach(), original.detach()))
    return not torch.equal(original.get_state(), twin.get_state())


class _Copies:
    """The copies handed to one call, and what they stand for."""

    def __init__(self, record: Record):
        self.record, self.pairs = record, []

    def give(self, value: Any, depth: int = 0) -> Any:
        """A copy of `value` for the learner's code; tensors inside lists, tuples and dicts too."""
        if depth > 20 or type(value) not in (*COPIED, tuple):
            return value
        if type(value) in (list, tuple, dict):
            items = value.items() if type(value) is dict else enumerate(value)
            inner = {k: self.give(v, depth + 1) for k, v in items}
            twin = inner if type(value) is dict else type(value)(inner.values())
            if type(value) is not tuple:
                self.pairs.append((value, twin, _items(twin)))
            return twin
        twin = _copy(value)
        self.pairs.append((value, twin, None))
        return twin

    def settle(self, result: Any) -> Any:
        """Record what changed in place, on the copies only."""
        for original, twin, given in self.pairs:
            if _differs(original, twin, given):
                self.record.changed[id(original)] = (original, twin)
            if result is twin and given is None:
                result = original  # an argument handed back is the check's own object, as in the judge's route
        return result


def guarded(obj: Any, record: Record) -> Any:
    """`obj` (a learner's function or class) as the checks should call it in the learner's kernel."""
    if isinstance(obj, type) and issubclass(obj, nn.Module):
        return _guarded_class(obj, record)
    if callable(obj) and not isinstance(obj, type):
        @functools.wraps(obj)
        def call(*args, **kwargs):
            copies = _Copies(record)
            args, kwargs = [copies.give(a) for a in args], {k: copies.give(v) for k, v in kwargs.items()}
            return copies.settle(obj(*args, **kwargs))
        return call
    return obj


def _guarded_class(cls: type, record: Record) -> Any:
    """Build instances of `cls` as it does; each instance's forward pass gets copies."""
    @functools.wraps(cls, updated=())
    def build(*args, **kwargs):
        module = cls(*args, **kwargs)
        pending: list[_Copies] = []

        def before(_, args, kwargs):
            copies = _Copies(record)
            pending.append(copies)
            return tuple(copies.give(a) for a in args), {k: copies.give(v) for k, v in kwargs.items()}

        def after(_, args, kwargs, output):
            return pending.pop().settle(output)

        module.register_forward_pre_hook(before, with_kwargs=True)
        module.register_forward_hook(after, with_kwargs=True, always_call=True)
        return module
    return build

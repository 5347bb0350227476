"""Public checks: fast, no reference code, and on a wrong answer they name the likely mistake.

Each chapter module stores a few expected values (computed once from fixed inputs) and the
outputs that known mistakes produce on the same inputs.

Every `check_<name>` function of a chapter module carries the decorator `@public_check`, so a
check run on an exercise that still raises NotImplementedError says "not implemented yet: write
`<name>` above" instead of ending in a bare traceback.

Every message a learner reads is written here and in the chapter modules as `tr("template with {fields}",
fields=...)` (from `course`): English in the repository and in an English chapter folder, the
translation in a translated one (guides/maintaining.md: The Chinese edition).
"""
from __future__ import annotations

import ast
import functools
import inspect
import math
import textwrap
import zlib
from contextvars import ContextVar
from typing import Any

import torch

from course import tr


class CheckFailed(AssertionError):
    """A public check failed; the message says which mistake the output matches. Shown as the message
    alone: the frames would be the check's own code, which the learner did not write."""

    known = False  # it names a mistake the check knows (`mistake`): graded feedback repeats it

    def _render_traceback_(self) -> list[str]:  # IPython shows these lines instead of a traceback
        return [f"{type(self).__name__}: {self}"]


# True while the grader runs a check on its own side, on proxies of a submission's objects, to name the
# likely mistake (grader.boundary.diagnosis): no source to read there, and a check that passes prints nothing.
ON_GRADERS_SIDE: ContextVar[bool] = ContextVar("on_graders_side", default=False)


class NotWrittenYet(CheckFailed):
    """The exercise still raises NotImplementedError; shown as one line, without a traceback."""


def _unwritten_part(err: BaseException) -> str | None:
    """`Class.method` or `function` that raised NotImplementedError, if any in err's chain."""
    while err is not None and not isinstance(err, NotImplementedError):
        err = err.__cause__ or err.__context__
    if err is None:
        return None
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return ""
    frame = tb.tb_frame
    owner = frame.f_locals.get("self")
    return f"{type(owner).__name__}.{frame.f_code.co_name}" if owner is not None else frame.f_code.co_name


def public_check(check):
    """Decorator for a chapter's `check_<name>` function (the name of the exercise it checks follows
    `check_`): run on an exercise that still raises NotImplementedError, the check says so in one line
    that names the exercise; anything else it does is unchanged."""
    name = check.__name__.removeprefix("check_")
    if name == check.__name__:
        raise ValueError(f"@public_check goes on a function named check_<exercise>, not {check.__name__}")

    @functools.wraps(check)
    def run(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except Exception as err:  # re-raised unless it is the skeleton's NotImplementedError
            part = _unwritten_part(err)
            if part is None:
                raise
            if part and part != name:
                message = tr("not implemented yet: write `{name}` above (`{part}` still raises "
                             "NotImplementedError), run its cell, then run this check again", name=name, part=part)
            else:
                message = tr("not implemented yet: write `{name}` above, run its cell, then run this check again",
                             name=name)
            raise NotWrittenYet(message) from None

    run.exercise = name
    return run


def name_wave(name: str, shape: tuple[int, ...]) -> torch.Tensor:
    """Fixed values in [-1, 1] made from a parameter's name by formula: weights a check loads by name,
    so they never depend on the order in which the learner created the layers."""
    numel = math.prod(shape)
    return torch.sin(torch.arange(numel, dtype=torch.float32) * 0.37 + zlib.crc32(name.encode()) % 997).reshape(shape)


def fail(message: str) -> None:
    raise CheckFailed(message)


def mistake(message: str) -> None:
    """Fail naming a mistake the check knows (the output matched the numbers it stores for it, or a sign
    only that mistake leaves): the grader's feedback repeats it beside the hidden tests' report."""
    err = CheckFailed(message)
    err.known = True
    raise err


def passed(name: str) -> None:
    if not ON_GRADERS_SIDE.get():
        print(tr("✅ {name}: the public checks pass. The hidden tests check more cases.", name=name))


def close(actual: Any, expected: Any, atol: float = 1e-4) -> bool:
    expected = torch.as_tensor(expected, dtype=torch.float32)
    return (type(actual) is torch.Tensor and actual.shape == expected.shape
            and torch.allclose(actual.detach().float(), expected, atol=atol, rtol=1e-4))


def expect_tensor(actual: Any, shape: tuple[int, ...], what: str | None = None) -> None:
    what = tr("the output") if what is None else what
    if type(actual) is not torch.Tensor:
        fail(tr("{what} should be a torch.Tensor, got {type}", what=what, type=type(actual).__name__))
    if tuple(actual.shape) != tuple(shape):
        fail(tr("{what} has shape {shape}; expected {expected}", what=what, shape=tuple(actual.shape),
                expected=tuple(shape)))


def diagnose(actual: Any, expected: Any, mistakes: dict[str, Any], what: str | None = None,
             atol: float = 1e-4) -> None:
    """Pass if `actual` matches `expected`; else fail with the hint of the mistake it matches."""
    what = tr("the output") if what is None else what
    if close(actual, expected, atol):
        return
    expect_tensor(actual, torch.as_tensor(expected).shape, what)
    for hint, wrong in mistakes.items():
        if close(actual, wrong, atol):
            mistake(hint)
    fail(tr("{what} differs from the expected values {expected}; got {got}", what=what,
            expected=torch.as_tensor(expected).tolist(), got=actual.detach().tolist()))


def expect_value_error(fn, *args, what: str | None = None, **kwargs) -> None:
    what = tr("bad arguments") if what is None else what
    try:
        fn(*args, **kwargs)
    except ValueError:
        return
    except Exception as err:  # noqa: BLE001 - the learner's code failed in another way
        fail(tr("{what} should raise a ValueError that says what was wrong; got {error}: {message}", what=what,
                error=type(err).__name__, message=err))
    fail(tr("{what} should raise a ValueError that says what was wrong; nothing was raised", what=what))


def expect_dropouts(layer: torch.nn.Module, p: float, names: tuple[str, ...]) -> None:
    """Each named submodule of `layer` is an nn.Dropout with the layer's dropout probability p."""
    found = {name: module.p for name, module in layer.named_modules() if isinstance(module, torch.nn.Dropout)}
    for name in names:
        if found.get(name) != p:
            fail(tr("`{name}` should be an nn.Dropout with p = dropout = {p}: build every part with the layer's "
                    "dropout (MultiHeadAttention(d_model, num_heads, dropout), ...); your dropouts: {found}",
                    name=name, p=p, found=found))


def dropout_calls(model: torch.nn.Module, *args: Any) -> list[tuple[str, int]]:
    """(module name, input dimensions) of every nn.Dropout call during one training-mode forward
    pass `model(*args)`; the model's mode is restored afterwards."""
    calls: list[tuple[str, int]] = []
    hooks = [module.register_forward_pre_hook(lambda _, inputs, name=name: calls.append((name, inputs[0].dim())))
             for name, module in model.named_modules() if isinstance(module, torch.nn.Dropout)]
    was_training = model.training
    try:
        with torch.no_grad():
            model.train()(*args)
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    return calls


def expect_pair(result: Any, what: str) -> tuple[Any, Any]:
    """Attention functions return (output, weights)."""
    if not isinstance(result, tuple) or len(result) != 2:
        fail(tr("{what} should return a tuple (output, weights), got {type}", what=what, type=type(result).__name__))
    return result


def _library_names(obj: Any) -> set[str]:
    """Attribute names and imported names in the code of a function, or of a class's methods."""
    if inspect.isclass(obj):
        functions = [f for f in vars(obj).values() if inspect.isfunction(f)]
    else:
        functions = [obj] if inspect.isfunction(obj) else []
    used: set[str] = set()
    for fn in functions:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError, SyntaxError):  # no source to read: the hidden tests still check
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                used.update((node.module or "").split("."))
                used.update(alias.name for alias in node.names)
    return used


def avoid_library_call(obj: Any, names: tuple[str, ...], hint: str) -> None:
    """Fail with `hint` when the code reaches a library routine the exercise asks you to write
    (`F.softmax`, `x.softmax`, `from torch.distributions import ...`); calling your own is fine."""
    if ON_GRADERS_SIDE.get():  # a proxy has no source; the grader records the calls themselves
        return
    if _library_names(obj) & set(names):
        fail(hint)

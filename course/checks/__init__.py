"""Public checks: fast, no reference code, and on a wrong answer they name the likely mistake.

Each chapter module stores a few expected values (computed once from fixed inputs) and the
outputs that known mistakes produce on the same inputs.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

import torch


class CheckFailed(AssertionError):
    """A public check failed; the message says which mistake the output matches."""


def fail(message: str) -> None:
    raise CheckFailed(message)


def passed(name: str) -> None:
    print(f"✅ {name}: the public checks pass. The hidden tests check more cases.")


def close(actual: Any, expected: Any, atol: float = 1e-4) -> bool:
    expected = torch.as_tensor(expected, dtype=torch.float32)
    return (type(actual) is torch.Tensor and actual.shape == expected.shape
            and torch.allclose(actual.detach().float(), expected, atol=atol, rtol=1e-4))


def expect_tensor(actual: Any, shape: tuple[int, ...], what: str = "the output") -> None:
    if type(actual) is not torch.Tensor:
        fail(f"{what} should be a torch.Tensor, got {type(actual).__name__}")
    if tuple(actual.shape) != tuple(shape):
        fail(f"{what} has shape {tuple(actual.shape)}; expected {tuple(shape)}")


def diagnose(actual: Any, expected: Any, mistakes: dict[str, Any], what: str = "the output",
             atol: float = 1e-4) -> None:
    """Pass if `actual` matches `expected`; else fail with the hint of the mistake it matches."""
    if close(actual, expected, atol):
        return
    expect_tensor(actual, torch.as_tensor(expected).shape, what)
    for hint, wrong in mistakes.items():
        if close(actual, wrong, atol):
            fail(hint)
    fail(f"{what} differs from the expected values {torch.as_tensor(expected).tolist()}; "
         f"got {actual.detach().tolist()}")


def expect_value_error(fn, *args, what: str = "bad arguments", **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except ValueError:
        return
    except Exception as err:  # noqa: BLE001 - the learner's code failed in another way
        fail(f"{what} should raise a ValueError that says what was wrong; got {type(err).__name__}: {err}")
    fail(f"{what} should raise a ValueError that says what was wrong; nothing was raised")


def expect_pair(result: Any, what: str) -> tuple[Any, Any]:
    """Attention functions return (output, weights)."""
    if not isinstance(result, tuple) or len(result) != 2:
        fail(f"{what} should return a tuple (output, weights), got {type(result).__name__}")
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
    if _library_names(obj) & set(names):
        fail(hint)

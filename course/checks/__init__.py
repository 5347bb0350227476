"""Public checks: fast, no reference code, and on a wrong answer they name the likely mistake.

Each chapter module stores a few expected values (computed once from fixed inputs) and the
outputs that known mistakes produce on the same inputs.
"""
from __future__ import annotations

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
    fail(f"{what} should raise a ValueError that says what was wrong")

"""Both sides: a backward pass from given gradients, as `torch.autograd.backward(outputs, grads)` or
`torch.autograd.grad(outputs, inputs, grads)` compute it, without importing torch's symbolic shapes.

torch checks a given gradient's shape with torch.fx.experimental.symbolic_shapes, whose first import (sympy)
costs about a second of CPU: in the grading process at a check's first backward through a learner's tensor,
and in the fork server, which preloaded it for every child. The same pass, seeded by a scalar instead:
the gradient of sum(output * grad) with respect to output is grad exactly (1 * grad), so the leaves get
the same gradients, and a gradient that does not fit its output is refused as torch refuses it.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch


def seed(outputs: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """One scalar whose backward pass sends `grads[i]` into `outputs[i]` (built with grad mode on: a
    backward pass runs its hooks, and a served call its operation, with it off)."""
    total = None
    for out, grad in zip(outputs, grads, strict=True):
        if grad.shape != out.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output has a shape of {tuple(grad.shape)} and output "
                               f"has a shape of {tuple(out.shape)}.")
        if grad.dtype.is_complex != out.dtype.is_complex:
            raise RuntimeError(f"Mismatch in dtype: grad_output has a dtype of {grad.dtype} and output has a "
                               f"dtype of {out.dtype}.")
        with torch.enable_grad():
            term = (out * grad.detach()).sum()
            total = term if total is None else total + term
    if total is None:
        raise RuntimeError("a backward pass needs at least one output")
    return total


def backward(outputs: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], retain_graph: bool = False) -> None:
    """`torch.autograd.backward(outputs, grads, retain_graph=retain_graph)`."""
    seed(outputs, grads).backward(retain_graph=retain_graph)


def grad(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor], grads: Sequence[torch.Tensor],
         allow_unused: bool = False, retain_graph: bool = False) -> tuple:
    """`torch.autograd.grad(outputs, inputs, grads, allow_unused=..., retain_graph=...)`."""
    return torch.autograd.grad(seed(outputs, grads), inputs, allow_unused=allow_unused, retain_graph=retain_graph)

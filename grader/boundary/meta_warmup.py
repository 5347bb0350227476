"""Child side, imported by the fork server only (grader.boundary.forkserver.META_WARMUP), after the shell:
a few operations on the meta device. Chapter 09's checks call the learner's code there (its device checks),
and the first call of PyTorch's Python meta kernels imports what they need (torch._dynamo, sympy), 1.3 s
in each child; made here once, every child inherits it, frozen with the rest (grader.boundary.heap)."""
import contextlib

import torch

from grader.boundary import heap

heap.defer()
with contextlib.suppress(Exception):  # an exception here would stop the fork server itself
    _positions = torch.arange(2, device="meta")
    _ = (_positions[:, None] - _positions[None, :] >= 0) & torch.ones(2, 2, dtype=torch.bool, device="meta").tril()
    del _positions, _
heap.settle()

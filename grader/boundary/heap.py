"""Both sides: the garbage collector's full passes kept off a grading process's start.

Importing torch, nbgrader, matplotlib and IPython leaves about a million long-lived objects. CPython 3.11
runs a full (generation 2) pass, which scans every one of them, each time the heap has grown by a quarter:
four in the grading process while it imports (0.36 s of a cold grade of chapter 06), three in the fork
server (0.19 s), then more while notebooks are judged, each scanning the same modules again (0.15 s a pass,
in the grading process and in the child, during 06's checks of `Transformer`). `defer` holds full passes
off while a process imports; `settle`, once its imports are done, moves every object then alive to the
permanent generation (`gc.freeze`), which no later pass scans, and gives full passes back. Cycles among
young objects are collected throughout, and every object made after `settle` as before. A child forked
after `settle` inherits the frozen heap.
"""
from __future__ import annotations

import gc

_NEVER = 1 << 30  # passes of generation 1 before a full pass: none while deferred
_saved: tuple[int, int, int] | None = None  # the thresholds `defer` replaced, until `settle`


def defer() -> None:
    """No full pass until `settle` (idempotent); young generations are collected as usual."""
    global _saved
    if _saved is None:
        _saved = gc.get_threshold()
        gc.set_threshold(_saved[0], _saved[1], _NEVER)


def settle() -> None:
    """After `defer` and the imports: freeze what is alive, and full passes resume. Once per process; a
    process that never deferred is left as it is."""
    global _saved
    if _saved is not None:
        gc.freeze()
        gc.set_threshold(*_saved)
        _saved = None

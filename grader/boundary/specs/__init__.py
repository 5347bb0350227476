"""Trusted side (and the learner's kernel, in the stock-nbgrader route): the hidden tests, one module per chapter.

Never shipped to learners, never imported where learner code runs (the sandboxed child). `exercises`
loads a chapter's, with the installed reference packages even in a kernel whose working folder is a
release folder (`full_packages`).
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path

from grader.boundary.spec import Exercise, collect
from grader.chapters import GENERATED_MARK, RELEASE_PACKAGES


def _carries_subset(entry: str, package: str) -> bool:
    init = Path(entry or os.getcwd()) / package / "__init__.py"
    try:
        return init.is_file() and init.read_text().startswith(GENERATED_MARK)
    except OSError:
        return False


@contextlib.contextmanager
def full_packages():
    """Import with the installed `course` and `solutions`, not the parts of them a release folder
    carries: a grading kernel runs in that folder, which comes first on sys.path, and a spec may
    use a reference piece the notebook does not import."""
    def ours(name: str) -> bool:
        return name.split(".")[0] in RELEASE_PACKAGES

    shadowing = [e for e in sys.path if any(_carries_subset(e, p) for p in RELEASE_PACKAGES)]
    if not shadowing:
        yield
        return
    saved_modules = {name: module for name, module in sys.modules.items() if ours(name)}
    saved_path = sys.path[:]
    for name in saved_modules:
        del sys.modules[name]
    sys.path[:] = [e for e in sys.path if e not in shadowing]
    try:
        yield
    finally:
        sys.path[:] = saved_path
        for name in [n for n in sys.modules if ours(n)]:
            del sys.modules[name]
        sys.modules.update(saved_modules)


def exercises(chapter_name: str) -> dict[str, Exercise]:
    """The chapter's exercises (its module here), in definition order, keyed by name."""
    with full_packages():
        return collect(vars(importlib.import_module(f"{__name__}.{chapter_name}")))

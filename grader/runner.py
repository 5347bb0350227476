"""Run one exercise's hidden checks against learner code and turn them into a score.

`run_checks` is the one line in every hidden-test region. It never lets the learner's
warnings or stderr reach the cell (nbgrader gives zero to a test cell that wrote to stderr),
records calls to forbidden library routines, and returns the partial credit as the cell's
last expression. With no check passing it raises, so the cell shows an error.
"""
from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import os
import re
import sys
import tempfile
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from grader.spec import Exercise, collect

GRADER_DIR = str(Path(__file__).resolve().parent)
TORCH_DIR = str(Path(torch.__file__).resolve().parent)


class NoCredit(AssertionError):
    """Raised in a hidden-test cell when not a single check passed."""


@dataclass
class Result:
    name: str
    points: float
    passed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (check, why)
    zero_reason: str | None = None

    @property
    def score(self) -> float:
        total = len(self.passed) + len(self.failed)
        if self.zero_reason or total == 0:
            return 0.0
        return round(self.points * len(self.passed) / total, 3)

    def report(self) -> str:
        lines = [f"{self.name}: {self.score:g} / {self.points:g} points"]
        if self.zero_reason:
            lines.append(f"  no credit: {self.zero_reason}")
        lines += [f"  ok    {c}" for c in self.passed]
        lines += [f"  FAIL  {c}: {why}" for c, why in self.failed]
        return "\n".join(lines)


def exercises(chapter_name: str) -> dict[str, Exercise]:
    return collect(vars(importlib.import_module(f"grader.specs.{chapter_name}")))


def _resolve(dotted: str) -> tuple[Any, str]:
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:-1]:
            owner = getattr(owner, attr)
        return owner, parts[-1]
    raise ValueError(f"cannot resolve {dotted}")


def _called_by_learner() -> bool:
    """The nearest caller outside torch decides: grader code is an oracle, anything else is the learner."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(TORCH_DIR):
            return not filename.startswith(GRADER_DIR)
        frame = frame.f_back
    return False


@contextlib.contextmanager
def recording(routines: tuple[str, ...]):
    """Wrap each routine so a call from learner code is recorded; restore them afterwards."""
    calls: list[str] = []
    restore = []
    for dotted in routines:
        owner, attr = _resolve(dotted)
        had_own = attr in vars(owner)
        original = getattr(owner, attr)

        def wrapper(*args, _original=original, _dotted=dotted, **kwargs):
            if _called_by_learner():
                calls.append(_dotted)
            return _original(*args, **kwargs)

        setattr(owner, attr, wrapper)
        restore.append((owner, attr, original if had_own else None))
    try:
        yield calls
    finally:
        for owner, attr, original in reversed(restore):
            if original is None:
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)


@contextlib.contextmanager
def quiet():
    """Swallow warnings and everything written to stderr, at the Python and the file-descriptor level."""
    sys.stderr.flush()
    saved_fd = os.dup(2)
    with tempfile.TemporaryFile() as sink, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        os.dup2(sink.fileno(), 2)
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                yield
        finally:
            os.dup2(saved_fd, 2)
            os.close(saved_fd)


@contextlib.contextmanager
def standing_in(namespace: dict, stand_ins: dict[str, Any]):
    """Put correct versions of the other exercises into the learner's namespace for a while."""
    saved = {name: namespace[name] for name in stand_ins if name in namespace}
    namespace.update(stand_ins)
    try:
        yield
    finally:
        for name in stand_ins:
            if name in saved:
                namespace[name] = saved[name]
            else:
                namespace.pop(name, None)


def _imports_reference(obj: Any) -> bool:
    module = getattr(obj, "__module__", "") or ""
    if module.split(".")[0] == "solutions":
        return True
    try:
        source = inspect.getsource(obj)
    except (OSError, TypeError):
        return False
    return re.search(r"\bsolutions\b", source) is not None


def evaluate(exercise: Exercise, namespace: dict) -> Result:
    """Every check of `exercise` against `namespace[exercise.name]`; learner errors become failures."""
    result = Result(exercise.name, exercise.points)
    obj = namespace.get(exercise.name)
    if obj is None:
        result.zero_reason = f"`{exercise.name}` is not defined"
        return result
    if _imports_reference(obj):
        result.zero_reason = "the solution uses the reference package `solutions`"
        return result
    with quiet(), standing_in(namespace, exercise.stand_ins), recording(exercise.forbidden) as calls:
        for check in exercise.checks:
            try:
                check.run(obj)
            except NotImplementedError:
                result.failed.append((check.description, "not implemented yet"))
            except AssertionError as err:
                result.failed.append((check.description, str(err) or "assertion failed"))
            except Exception as err:  # noqa: BLE001 - the learner's code raised
                where = traceback.extract_tb(err.__traceback__)[-1]
                result.failed.append((check.description,
                                      f"{type(err).__name__}: {err} (line {where.lineno})"))
            else:
                result.passed.append(check.description)
    if calls:
        forbidden = ", ".join(sorted(set(calls)))
        result.zero_reason = f"the solution calls {forbidden}, which this exercise asks you to write yourself"
    return result


def run_checks(chapter_name: str, exercise_name: str, namespace: dict) -> float:
    """The hidden-test cell's one line: print the report, return the partial credit."""
    result = evaluate(exercises(chapter_name)[exercise_name], namespace)
    print(result.report())
    if result.score == 0:
        raise NoCredit(f"{exercise_name}: no check passed" if not result.zero_reason else result.zero_reason)
    return result.score

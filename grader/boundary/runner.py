"""Kernel side (the stock-nbgrader route): run one exercise's hidden checks in the learner's kernel.

`run_checks` is the one line in every hidden-test region. nbgrader's own autograde runs it in the kernel
that ran the learner's cells, with none of the sandbox's protections; `grader autograde` never runs it
(there the trusted side judges: grader.boundary.pool, grader.boundary.proxy). It never lets the
learner's warnings or stderr reach the cell (nbgrader gives zero to a test cell that wrote to stderr),
records calls to forbidden library routines, and returns the partial credit as the cell's last
expression. With no check passing it raises, so the cell shows an error.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import io
import os
import sys
import tempfile
import textwrap
import warnings
from typing import Any

from grader.boundary import seeds
from grader.boundary.forbid import recording
from grader.boundary.kept import Record, guarded
from grader.boundary.score import Result, forbidden_reason, run_each
from grader.boundary.spec import Exercise, hidden_inputs, in_place_record
from grader.boundary.specs import exercises


class NoCredit(AssertionError):
    """Raised in a hidden-test cell when not a single check passed."""


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
    """The object comes from the reference package, or its source imports from it: the rule of a
    kernel where the answers are importable (stock nbgrader running the hidden cells). In the
    judge's sandbox the answers are not importable at all, and nothing is looked at."""
    module = getattr(obj, "__module__", "") or ""
    if module.split(".")[0] == "solutions":
        return True
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    except (OSError, TypeError, SyntaxError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "solutions":
            return True
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "solutions" for a in node.names):
            return True
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and any(isinstance(a, ast.Constant)
                                                       and str(a.value).startswith("solutions")
                                                        for a in node.args):
            return True
    return False


def kernel_secret() -> int:
    """The hidden inputs' secret in a kernel: $COURSE_GRADING_SEED (grader.boundary.seeds), else 0 (the seeds as
    written)."""
    return seeds.fixed() or 0


def evaluate(exercise: Exercise, namespace: dict, secret: int | None = None) -> Result:
    """Every check of `exercise` against `namespace[exercise.name]`; learner errors become failures.
    Hidden inputs come from `secret` (default: $COURSE_GRADING_SEED, else the seeds as written)."""
    result = Result(exercise.name, exercise.points)
    obj = namespace.get(exercise.name)
    if obj is None:
        result.zero_reason = f"`{exercise.name}` is not defined"
        return result
    if _imports_reference(obj):
        result.zero_reason = "the solution uses the reference package `solutions`"
        return result
    record = Record()  # the learner's code gets copies of the checks' inputs (grader.boundary.kept)
    with quiet(), standing_in(namespace, exercise.stand_ins), recording(exercise.forbidden) as calls, \
            in_place_record(record), hidden_inputs(kernel_secret() if secret is None else secret):
        run_each(exercise, guarded(obj, record), result)
    if calls:
        result.zero_reason = forbidden_reason(calls)
    return result


def run_checks(chapter_name: str, exercise_name: str, namespace: dict) -> float:
    """The hidden-test cell's one line: print the report, return the partial credit."""
    result = evaluate(exercises(chapter_name)[exercise_name], namespace)
    print(result.report())
    if result.score == 0:
        raise NoCredit(f"{exercise_name}: no check passed" if not result.zero_reason else result.zero_reason)
    return result.score

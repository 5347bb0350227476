"""Data, plotting and training helpers the chapter notebooks import (no reference code)."""
import ast
import inspect
import os
import textwrap

from course import tr
from course.toolkit import fonts  # noqa: F401 - registers a translated folder's CJK font

GRADING_ENV = "TRANSFORMERS_COURSE_GRADING"


def grading_run() -> bool:
    """True while the grader re-runs a notebook to score it.

    Hidden tests never look at training results, so a long training cell may then take a
    few steps only; a learner running the notebook always gets the full run.
    """
    return os.environ.get(GRADING_ENV) == "1"


def pretrained_unavailable(repo_id: str) -> str | None:
    """Why the optional "real weights" cell at the end of a chapter must skip, or None if it may run.

    It runs only for a learner who has `transformers` installed and can reach the Hugging Face
    hub; never in CI (`CI` set) or while grading, so nothing is downloaded there.
    """
    import importlib.util
    import socket

    if os.environ.get("CI") or grading_run():
        return tr("skipped: no downloads in CI or while grading")
    if importlib.util.find_spec("transformers") is None:
        return tr("skipped: `pip install transformers` to load {repo_id}", repo_id=repo_id)
    try:
        socket.create_connection(("huggingface.co", 443), timeout=3).close()
    except OSError:
        return tr("skipped: the Hugging Face hub is not reachable, so {repo_id} cannot be downloaded", repo_id=repo_id)
    return None


class WaitingForExercise(RuntimeError):
    """A demo cell needs an exercise that still holds its skeleton; shown as one line."""

    def _render_traceback_(self) -> list[str]:  # IPython shows these lines instead of a traceback
        return [f"{type(self).__name__}: {self}"]


def _skeleton(fn) -> bool:
    """True when the body of `fn` still has the skeleton's top-level `raise NotImplementedError`."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):  # no source to read: assume it is written
        return False
    body = tree.body[0].body if tree.body and hasattr(tree.body[0], "body") else []
    for node in body:
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == "NotImplementedError":
                return True
    return False


def unwritten(obj) -> bool:
    """Whether an exercise (a function, or a class with methods) still has a skeleton part."""
    if inspect.isclass(obj):
        return any(_skeleton(f) for f in vars(obj).values() if inspect.isfunction(f))
    return inspect.isfunction(obj) and _skeleton(obj)


def waits_for(*exercises) -> None:
    """Stop a demo cell with a clear message when an exercise it uses is not written yet."""
    missing = [getattr(obj, "__name__", str(obj)) for obj in exercises if unwritten(obj)]
    if missing:
        names = ", ".join(f"`{name}`" for name in missing)
        if len(missing) == 1:
            message = tr("this cell waits for {names}: write it above (the check should pass), then run this cell "
                         "again", names=names)
        else:
            message = tr("this cell waits for {names}: write them above (the check should pass), then run this "
                         "cell again", names=names)
        raise WaitingForExercise(message)

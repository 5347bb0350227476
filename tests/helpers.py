"""What the tests share: namespaces that stand in for a learner's notebook (the reference, the skeleton,
a variant), judging one through the same path as a graded notebook, and what a sample learner must score."""
from __future__ import annotations

import linecache
import multiprocessing
import os
import traceback

import nbformat
import torch

from grader.boundary.forbid import in_sandbox
from grader.boundary.proxy import evaluate
from grader.boundary.serve import Server
from grader.boundary.spec import Exercise
from grader.chapters import Chapter
from grader.classroom import phrasebook

PRELUDE = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def run_source(source: str, namespace: dict | None = None) -> dict:
    namespace = {"__name__": "submission"} if namespace is None else namespace
    exec(compile(source, "<submission>", "exec"), namespace)
    return namespace


def reference_namespace(chapter: Chapter) -> dict:
    """The reference module's code executed as if typed into a notebook (not imported)."""
    return run_source(PRELUDE + chapter.solutions_file.read_text())


def skeleton_namespace(chapter: Chapter) -> dict:
    """The prelude plus every exercise cell of the learner notebook, untouched."""
    nb = nbformat.read(chapter.course_notebook, as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")]
    return run_source(PRELUDE + "\n\n".join(cells))


def as_a_cell(source: str, namespace: dict) -> dict:
    """Run `source` as a notebook cell runs: its text readable by inspect.getsource (the public checks
    read the code of the exercise to name a forbidden library call)."""
    source = PRELUDE + source
    filename = f"<cell {abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def evaluate_in_child(exercise: Exercise, namespace: dict, timeout: float = 60.0, secret: int = 0, record=in_sandbox):
    """grader.boundary.proxy.evaluate against a forked child that serves `namespace` (no sandbox): how
    the tests put every catalogued submission through the same path as a graded notebook. `record`:
    the child's recorder of forbidden calls (the sandbox's, unless a benchmark compares another)."""
    ours, theirs = multiprocessing.Pipe(duplex=True)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            ours.close()
            torch.set_num_threads(1)  # a thread pool the parent used does not survive fork
            Server(theirs, namespace, record).serve()
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    theirs.close()
    try:
        return evaluate(exercise, ours, timeout, secret)
    finally:
        ours.close()
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


def adversarial_expected(points: dict[str, float]) -> float:
    """What grader.authoring.samples.adversarial must score: everything but the first two exercises."""
    return sum(list(points.values())[2:])


def english_left(text: str, assignment: str) -> list[str]:
    """The English of a chapter's feedback texts that `text` (a translated report) still shows: each
    literal piece, of two words or more, of its check names, hidden messages and the shared texts."""
    pieces = set()
    for catalogue in (assignment, phrasebook.COMMON):
        chinese = phrasebook.load(catalogue, "zh")
        for _, _, english in phrasebook.units(catalogue):
            pieces |= {piece.strip() for piece in phrasebook.Template.of(english, "").pieces
                       if phrasebook.has_prose(piece) and len(piece.strip()) > 10
                       and piece.strip() not in chinese.get(english, "")}  # code a translation keeps
    return sorted(piece for piece in pieces if piece in text)

"""Sample students for the demo and the end-to-end tests, made from the release and the reference."""
from __future__ import annotations

import copy
import importlib
import sys

import nbformat

from grader.chapters import REPO, Chapter, exercise_of, is_answer_cell, is_test_cell


def _solutions(chapter: Chapter, written: bool = False) -> dict[str, str]:
    """grade_id -> the source notebook's answer: the exercises' code, or (`written`) the model answers."""
    nb = nbformat.read(chapter.source_notebook, as_version=4)
    return {c.metadata.nbgrader["grade_id"]: c.source for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution") and is_answer_cell(c) == written}


def released(chapter: Chapter) -> nbformat.NotebookNode:
    return nbformat.read(chapter.course_notebook, as_version=4)


def with_answers(chapter: Chapter, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The learner notebook with the given exercise cells filled in (the rest untouched)."""
    nb = copy.deepcopy(released(chapter))
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers and cell.metadata.nbgrader.get("solution"):
            cell.source = answers[grade_id]
    return nb


def reference(chapter: Chapter) -> nbformat.NotebookNode:
    return with_answers(chapter, {**_solutions(chapter), **_solutions(chapter, written=True)})


def wrong_variants(chapter: Chapter):
    """The catalogue of realistic mistakes kept in tests/catalogue (a repository checkout)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module(f"tests.catalogue.{chapter.name}").WRONG


def partly_wrong(chapter: Chapter, mistakes: int = 2) -> nbformat.NotebookNode:
    """The reference with the first catalogued mistake of `mistakes` exercises swapped in."""
    answers = _solutions(chapter)
    chosen = {}
    for variant in wrong_variants(chapter):
        if variant.exercise not in chosen and len(chosen) < mistakes:
            chosen[variant.exercise] = variant.source
    answers.update(chosen)
    return with_answers(chapter, answers)


NOISY = """
import sys as _sys, warnings as _warnings
_quiet_{name} = {name}
{wrapper}
"""
NOISY_FUNCTION = """def {name}(*args, **kwargs):
    _warnings.warn("a harmless warning"); print("noise", file=_sys.stderr)
    return _quiet_{name}(*args, **kwargs)"""
NOISY_CLASS = """class {name}(_quiet_{name}):
    def __init__(self, *args, **kwargs):
        _warnings.warn("a harmless warning"); print("noise", file=_sys.stderr)
        super().__init__(*args, **kwargs)"""


def adversarial(chapter: Chapter) -> nbformat.NotebookNode:
    """Games the grader. Exercise 1 imports the reference (0 points); exercise 2 is left undone but
    its test cell is edited to claim the points (0: nbgrader restores the cell); exercise 3 is correct
    but noisy on stderr, and its test cell is deleted (full points: restored); the test cell of
    exercise 4, if any, is pasted twice (full points: the copy is ignored)."""
    answers = _solutions(chapter)
    names = list(answers)
    answers[names[0]] = f"from solutions.{chapter.name} import {names[0]}"
    answers.pop(names[1])
    wrapper = NOISY_CLASS if answers[names[2]].lstrip().startswith("class") else NOISY_FUNCTION
    answers[names[2]] += NOISY.format(name=names[2], wrapper=wrapper.format(name=names[2]))
    nb = with_answers(chapter, answers)
    tests = {exercise_of(c): c for c in nb.cells if is_test_cell(c)}
    tests[names[1]].source = "1e9  # claim every point"
    nb.cells.remove(tests[names[2]])
    if len(names) > 3:
        nb.cells.append(copy.deepcopy(tests[names[3]]))
    return nb


def corrupt(chapter: Chapter) -> str:
    text = nbformat.writes(reference(chapter))
    return text[: len(text) // 2]

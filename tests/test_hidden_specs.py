"""Invariant 3: every hidden test passes on the reference, fails on the skeleton and on each
catalogued wrong implementation, and gives full marks to correct code written differently.

Every submission goes the way a graded notebook goes: the checks run in this process, the
learner's code in a forked child that answers their calls (grader.remote.evaluate_in_child).
The reference and the skeleton also go through the in-kernel `evaluate` that stock nbgrader's
hidden cells call (grader.runner.run_checks)."""
import importlib

import pytest

from grader.chapters import CHAPTERS
from grader.remote import evaluate_in_child
from grader.runner import evaluate, exercises
from tests.helpers import reference_namespace, run_source, skeleton_namespace

SPECS = [(c, name) for c in CHAPTERS for name in exercises(c.name)]


def catalogue(chapter):
    return importlib.import_module(f"tests.catalogue.{chapter.name}")


def variants(kind):
    return [(c, v) for c in CHAPTERS for v in getattr(catalogue(c), kind)]


def ids(params):
    return [f"{c.number}-{v.exercise}-{v.label}" for c, v in params]


def in_kernel(exercise, namespace):
    return evaluate(exercise, namespace)


PATHS = {"judged": evaluate_in_child, "in-kernel": in_kernel}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("chapter,name", SPECS, ids=[f"{c.number}-{n}" for c, n in SPECS])
def test_reference_gets_full_marks(chapter, name, path):
    result = PATHS[path](exercises(chapter.name)[name], reference_namespace(chapter))
    assert not result.failed and result.zero_reason is None, result.report()
    assert result.score == result.points


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("chapter,name", SPECS, ids=[f"{c.number}-{n}" for c, n in SPECS])
def test_skeleton_scores_zero(chapter, name, path):
    result = PATHS[path](exercises(chapter.name)[name], skeleton_namespace(chapter))
    assert result.score == 0, result.report()


WRONG = variants("WRONG")
CORRECT = variants("CORRECT")


@pytest.mark.parametrize("chapter,variant", WRONG, ids=ids(WRONG))
def test_wrong_implementation_loses_points(chapter, variant):
    namespace = run_source(variant.source, reference_namespace(chapter))
    result = evaluate_in_child(exercises(chapter.name)[variant.exercise], namespace)
    assert result.score < result.points, f"{variant.label} kept full marks:\n{result.report()}"


@pytest.mark.parametrize("chapter,variant", CORRECT, ids=ids(CORRECT))
def test_different_correct_implementation_gets_full_marks(chapter, variant):
    namespace = run_source(variant.source, reference_namespace(chapter))
    result = evaluate_in_child(exercises(chapter.name)[variant.exercise], namespace)
    assert result.score == result.points, f"{variant.label} lost points:\n{result.report()}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.assignment for c in CHAPTERS])
def test_catalogue_is_large_enough(chapter):
    module = catalogue(chapter)
    assert len(module.WRONG) >= 8 and len(module.CORRECT) >= 2
    assert {v.exercise for v in module.WRONG} <= set(exercises(chapter.name))

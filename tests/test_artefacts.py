"""Invariants 1 and 2: generated source notebooks are fresh, and nbgrader's release is course/."""
from grader.build import build, release
from grader.chapters import CHAPTERS


def test_source_notebooks_are_fresh():
    assert build(CHAPTERS, check=True) == [], "run `grader build` and commit the result"


def test_release_is_the_learner_notebook():
    assert release(CHAPTERS) == [], "run `grader build && grader release --write` and commit"


def test_release_carries_no_solutions_or_hidden_tests():
    for chapter in CHAPTERS:
        text = chapter.course_notebook.read_text()
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "run_checks", "solutions."):
            assert marker not in text, f"{chapter.course_notebook.name} contains {marker!r}"

"""Invariants 1 and 2: generated source notebooks are fresh, and nbgrader's release is course/."""
from grader.authoring.build import build, release
from grader.authoring.bundle import folder_files
from grader.authoring.corpus import generated_files
from grader.chapters import CHAPTERS


def test_source_notebooks_are_fresh():
    assert build(CHAPTERS, check=True) == [], "run `grader build` and commit the result"


def test_generated_data_is_fresh():
    # e.g. chapter 08's course_text.txt, the narrative of chapters 01-06 as their notebooks say it now
    for chapter in CHAPTERS:
        for path, text in generated_files(chapter).items():
            assert path.is_file() and path.read_text(encoding="utf-8") == text, f"{path} is stale: run `grader build`"


def test_release_is_the_learner_notebook():
    assert release(CHAPTERS) == [], "run `grader build && grader release --write` and commit"


def test_release_carries_no_solutions_or_hidden_tests():
    # Importing earlier chapters' reference pieces is fine; this chapter's own reference is not.
    for chapter in CHAPTERS:
        for rel, path in folder_files(chapter.course_dir).items():
            if path.suffix not in (".py", ".ipynb", ".md", ".txt"):
                continue
            text = path.read_text()
            for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "run_checks",
                           f"solutions.{chapter.name}", f"solutions import {chapter.name}"):
                assert marker not in text, f"{chapter.assignment}/{rel} contains {marker!r}"

"""Invariants 1 and 2: the build goes one way (chapters/ -> grader/source/ -> course/), and both
generated layers are what the build and nbgrader's release make of the text sources now: the source
folders, built by this very run (`make test` runs `grader build` first; they are not committed), and the
committed learner folders course/, which must be what nbgrader releases from them."""
import jupytext
import pytest

from grader.authoring.build import build, build_source_notebook, release
from grader.authoring.bundle import folder_files
from grader.authoring.corpus import generated_files
from grader.authoring.text import FORMAT, filled_by, read_text_source, write_text
from grader.chapters import CHAPTERS, LANGUAGES, REPO


def test_source_notebooks_are_fresh():
    # Every folder compared, whatever its stamp says (grader.sources): a stamp that missed an input the
    # build reads would leave a stale folder that the other tests then read.
    assert build(CHAPTERS, check=True) == [], "run `grader build --force`, and say which input the stamp missed"


def test_generated_data_is_fresh():
    # e.g. chapter 08's course_text.txt, the narrative of chapters 01-06 as their text sources say it now
    for chapter in CHAPTERS:
        for rel, text in generated_files(chapter).items():
            path = chapter.source_dir / rel
            assert path.is_file() and path.read_text(encoding="utf-8") == text, f"{path} is stale: run `grader build`"


def test_text_sources_are_canonical_and_carry_no_generated_code():
    # What jupytext writes back is the file itself, so a reviewer's diff shows only what an author
    # changed; a graded cell's body says where the build takes it from, and nothing else.
    for chapter in CHAPTERS:
        text = chapter.text_source.read_text(encoding="utf-8")
        assert write_text(jupytext.reads(text, fmt=FORMAT)) == text, f"{chapter.text_source}: not jupytext's form"
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "run_checks"):
            assert marker not in text, f"{chapter.text_source} holds {marker!r}"
        graded = [c for c in read_text_source(chapter).cells if filled_by(chapter, c)]
        assert graded and all(c.source == filled_by(chapter, c) for c in graded)


def test_the_build_refuses_code_written_into_a_generated_cell(tmp_path, monkeypatch):
    chapter = CHAPTERS[1]
    text = chapter.text_source.read_text(encoding="utf-8")
    placeholder = f"# grader build fills this cell from solutions/{chapter.name}.py: softmax"
    fake = tmp_path / chapter.text_source.name
    fake.write_text(text.replace(placeholder, "def softmax(x, dim=-1):\n    return x.softmax(dim)"))
    monkeypatch.setattr(type(chapter), "text_source", property(lambda self: fake))
    with pytest.raises(ValueError, match="the body of cell softmax is generated"):
        build_source_notebook(chapter)


def test_nothing_generated_lives_among_the_authored_files():
    # The one-way build: chapters/ holds text sources, figures and data; never a notebook or the
    # bundled modules, which would be a second copy to drift.
    for path in (REPO / "chapters").rglob("*"):
        assert path.suffix not in (".ipynb", ".py"), f"{path}: generated files belong to grader/source/ and course/"


def test_release_is_the_learner_notebook():
    assert release(CHAPTERS) == [], "run `grader release --write` and commit course/"


def test_release_carries_no_solutions_or_hidden_tests():
    # Importing earlier chapters' reference pieces is fine; this chapter's own reference is not.
    for chapter in CHAPTERS + [c.edition(lang) for lang in LANGUAGES for c in CHAPTERS]:
        assert chapter.course_notebook.is_file(), f"{chapter.course_dir}: no release (grader release --write)"
        for rel, path in folder_files(chapter.course_dir).items():
            if path.suffix not in (".py", ".ipynb", ".md", ".txt"):
                continue
            text = path.read_text()
            for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "run_checks",
                           f"solutions.{chapter.name}", f"solutions import {chapter.name}"):
                assert marker not in text, f"{chapter.assignment}/{rel} contains {marker!r}"

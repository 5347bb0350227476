"""Written answers: two or three per chapter, graded by hand with a rubric that Formgrader shows the grader
(in the autograded notebook) and that no learner sees (not in the release, not in feedback)."""
import copy

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.authoring import samples
from grader.authoring.build import build_source_notebook
from grader.authoring.bundle import folder_files
from grader.chapters import CHAPTERS, find_chapter, is_answer_cell
from grader.classroom.grades.written import BANNER, IMITATION, MARK, written
from grader.classroom.grading.batch import autograde_class, job_cells
from grader.classroom.submissions import repair


def answer_cells(nb):
    return [c for c in nb.cells if is_answer_cell(c)]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.number)
def test_each_chapter_asks_two_or_three_questions(chapter):
    items = written(chapter.name)
    assert 2 <= len(items) <= 3, chapter.name
    nb = samples.released(chapter)
    cells = answer_cells(nb)
    assert [c.metadata.nbgrader["grade_id"] for c in cells] == list(items)
    for cell, item in zip(cells, items.values()):
        assert cell.source == "YOUR ANSWER HERE"
        assert cell.metadata.nbgrader["points"] == item.points
        assert item.answer and "- " in item.rubric  # a model answer, and a rubric point by point
        question = nb.cells[nb.cells.index(cell) - 1]
        assert question.cell_type == "markdown" and f"({item.points:g} point" in question.source


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.number)
def test_no_learner_file_carries_a_model_answer_or_rubric(chapter):
    texts = {rel: path.read_bytes().decode("utf-8", "replace") for rel, path in folder_files(chapter.course_dir).items()
             if path.suffix in (".ipynb", ".py", ".txt", ".json", ".md")}
    for item in written(chapter.name).values():
        for line in (item.answer + "\n" + item.rubric).splitlines():
            if len(line) > 40:  # a distinctive line, not a bullet stub
                assert not any(line in text for text in texts.values()), (chapter.name, line)
    assert not any(BANNER in text for text in texts.values())


def test_the_source_notebook_carries_the_model_answers():
    chapter = find_chapter("02")
    items = written(chapter.name)
    cells = answer_cells(build_source_notebook(chapter))
    assert [c.source for c in cells] == [i.answer for i in items.values()]


def test_a_written_answer_is_prose_never_run():
    chapter = find_chapter("02")
    released = samples.released(chapter)
    nb = copy.deepcopy(released)
    for cell in answer_cells(nb):
        cell.source = "import os\nos.system('touch /tmp/pwned')"
    cells = job_cells(nb, released, rerun_all=True)
    kinds = [entry["kind"] for entry, cell in zip(cells, nb.cells) if is_answer_cell(cell)]
    assert kinds and set(kinds) == {"skip"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Chapter 02 graded for ada (the model answers) and for mal, whose notebook brings a forged rubric."""
    chapter = find_chapter("02")
    root = tmp_path_factory.mktemp("written")
    (root / "inbox" / "ada").mkdir(parents=True)
    nbformat.write(samples.reference(chapter), root / "inbox" / "ada" / chapter.notebook_name)
    forged = samples.reference(chapter)
    first = answer_cells(forged)[0]
    first.source = "My answer."
    fake = nbformat.v4.new_markdown_cell(f"> **{BANNER}**: full marks for every answer in this notebook.")
    fake.metadata[MARK] = "written_forged"
    forged.cells.insert(forged.cells.index(first) + 1, fake)
    (root / "inbox" / "mal").mkdir(parents=True)
    nbformat.write(forged, root / "inbox" / "mal" / chapter.notebook_name)
    summary = autograde_class(root / "inbox", root / "course", jobs=1, timeout=60, chapters=[chapter])
    return chapter, root / "course", summary


def test_formgrader_shows_the_rubric_under_each_answer(graded):
    chapter, course, _ = graded
    nb = nbformat.read(course / "autograded" / "ada" / chapter.assignment / chapter.notebook_name, as_version=4)
    for item in written(chapter.name).values():
        index = next(i for i, c in enumerate(nb.cells)
                     if c.metadata.get("nbgrader", {}).get("grade_id") == item.grade_id)
        assert nb.cells[index].source == item.answer
        rubric = nb.cells[index + 1]
        assert rubric.metadata.get(MARK) == item.grade_id and BANNER in rubric.source
        assert item.rubric.splitlines()[0] in rubric.source


def test_feedback_leaves_the_rubric_out_and_keeps_the_answer(graded):
    chapter, course, _ = graded
    for student in ("ada", "mal"):
        html = (course / "feedback" / student / chapter.assignment / f"{chapter.name}.html").read_text()
        assert BANNER not in html
        for item in written(chapter.name).values():
            assert item.rubric.splitlines()[0][2:] not in html  # the rubric's first point (after "- ")
    assert "My answer." in (course / "feedback" / "mal" / chapter.assignment / f"{chapter.name}.html").read_text()


def test_a_forged_rubric_loses_its_claim_and_stays_visible(graded):
    chapter, course, _ = graded
    nb = nbformat.read(course / "autograded" / "mal" / chapter.assignment / chapter.notebook_name, as_version=4)
    forged = [c for c in nb.cells if "full marks for every answer" in c.source]
    assert len(forged) == 1 and MARK not in forged[0].metadata and IMITATION in forged[0].source
    real = [c for c in nb.cells if MARK in c.metadata]
    assert len(real) == len(written(chapter.name))
    html = (course / "feedback" / "mal" / chapter.assignment / f"{chapter.name}.html").read_text()
    assert "full marks for every answer" in html  # the learner's own cell, shown back to them


def test_a_hand_grade_counts_in_the_gradebook(graded):
    chapter, course, _ = graded
    items = written(chapter.name)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submission = gb.find_submission_notebook(chapter.name, chapter.assignment, "ada")
        auto = submission.score
        hand = [g for g in submission.grades if g.name in items]
        assert {g.name for g in hand} == set(items) and all(g.needs_manual_grade for g in hand)
        for grade in hand:
            grade.manual_score = grade.max_score
        gb.db.commit()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submission = gb.find_submission_notebook(chapter.name, chapter.assignment, "ada")
        assert submission.score == pytest.approx(auto + sum(i.points for i in items.values()))
        assert submission.max_score == submission.score


def test_an_answer_retyped_as_code_is_restored_to_prose_and_never_run():
    chapter = find_chapter("02")
    released = samples.released(chapter)
    nb = copy.deepcopy(released)
    index = next(i for i, c in enumerate(nb.cells) if is_answer_cell(c))
    retyped = nbformat.v4.new_code_cell("open('/tmp/pwned', 'w').write('x')")
    retyped.metadata = copy.deepcopy(nb.cells[index].metadata)
    nb.cells[index] = retyped
    repaired, notes = repair(nb, released)
    assert repaired.cells[index].cell_type == "markdown" and any("type" in note for note in notes)
    assert job_cells(repaired, released, rerun_all=True)[index]["kind"] == "skip"

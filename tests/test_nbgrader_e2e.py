"""The instructor path with real nbgrader: release, autograde a class into the SQLite gradebook,
feedback and CSV export; a re-run keeps every score; `grader grade --json` keeps its contract."""
import csv
import json
import os
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.authoring import samples
from grader.authoring.demo import write_class
from grader.boundary import seeds
from grader.boundary.specs import exercises
from grader.chapters import CHAPTERS, find_chapter
from grader.classroom.grades.written import written
from grader.classroom.grading import batch
from grader.classroom.grading.batch import autograde_class
from grader.classroom.grading.nbgrader_helper import NbgraderHelper
from grader.classroom.grading.recording import feedback_and_export
from grader.coursedir import CourseDir
from tests.helpers import adversarial_expected


def points(chapter):
    return {name: ex.points for name, ex in exercises(chapter.name).items()}


def expected_scores(chapter):
    total = sum(points(chapter).values())
    return {"ada": total, "ben": 0.0, "dee": adversarial_expected(points(chapter))}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    write_class(root / "inbox", CHAPTERS)
    summary = autograde_class(root / "inbox", root / "course", jobs=2, timeout=60, chapters=CHAPTERS)
    return root, summary


def scores(course_root):
    with Gradebook(f"sqlite:///{course_root / 'gradebook.db'}") as gb:
        return {(s.student.id, s.assignment.name): s.score for a in gb.assignments for s in a.submissions}


def test_gradebook_holds_the_expected_scores(graded_class):
    root, summary = graded_class
    recorded = scores(root / "course")
    for chapter in CHAPTERS:
        total = sum(points(chapter).values())
        for student, score in expected_scores(chapter).items():
            assert recorded[(student, chapter.assignment)] == pytest.approx(score), (student, chapter, summary)
        assert 0 < recorded[("cy", chapter.assignment)] < total
    # A corrupt notebook is recorded as zero (never an old score), with the reason in the summary.
    assert recorded[("eve", CHAPTERS[0].assignment)] == 0
    assert "eve" in summary and "not a readable Jupyter notebook" in summary


def test_feedback_and_export(graded_class):
    root, _ = graded_class
    feedback = list((root / "course" / "feedback").glob("*/*/*.html"))
    assert len(feedback) == 4 * len(CHAPTERS) + 1  # eve's corrupt notebook gets feedback saying why it scored 0
    rows = list(csv.DictReader((root / "course" / "grades.csv").open()))
    assert {(r["student_id"], r["assignment"]) for r in rows} >= {("ada", c.assignment) for c in CHAPTERS}


def feedback_pages(course_root) -> dict[str, bytes]:
    return {str(p.relative_to(course_root)): p.read_bytes() for p in (course_root / "feedback").glob("*/*/*.html")}


def test_the_helpers_pages_are_those_the_grading_process_makes(graded_class, tmp_path, capsys):
    """A batch's nbgrader work is done by a second process (grader.classroom.grading.nbgrader_helper): every
    autograde (the scores above), then every other chapter's feedback pages; the same pages as this process makes.
    A helper that fails costs no page: its chapters are made here, and stderr says so."""
    root, _ = graded_class
    course_root = tmp_path / "course"
    shutil.copytree(root / "course", course_root)
    made_by_the_batch = feedback_pages(course_root)
    shutil.rmtree(course_root / "feedback")
    course = CourseDir(course_root, CHAPTERS)
    chapters = CHAPTERS[:4]
    feedback_and_export(course, chapters)  # no helper: this process makes them all
    pages = feedback_pages(course_root)
    assert len(pages) == 4 * len(chapters) + 1
    assert pages == {k: v.replace(str(root / "course").encode(), str(course_root).encode())
                     for k, v in made_by_the_batch.items() if k.split("/")[2] in {c.assignment for c in chapters}}

    for fails in ("import sys; sys.exit(3)",  # before its share: this process makes it all
                  "import sys; sys.stdin.read(); print('no gradebook', file=sys.stderr); sys.exit(1)"):
        shutil.rmtree(course_root / "feedback")
        with NbgraderHelper(course.root, course.db_url) as helper:
            helper.proc.kill()
            helper.proc = subprocess.Popen([sys.executable, "-c", fails], stdin=subprocess.PIPE, stderr=helper.errors)
            feedback_and_export(course, chapters, helper=helper)
        assert feedback_pages(course_root) == pages
    assert "the nbgrader helper failed (no gradebook)" in capsys.readouterr().err


def test_a_helper_that_stops_mid_batch_costs_no_grade(tmp_path, monkeypatch, capsys):
    chapter = CHAPTERS[1]
    write_class(tmp_path / "inbox", [chapter])
    monkeypatch.setattr(batch, "HELPED", 1)  # a helper even for this class of five
    answered = NbgraderHelper.autograde

    def stops_after_one(self, assignment, student):
        outcome = answered(self, assignment, student)
        self.proc.kill()
        return outcome

    monkeypatch.setattr(NbgraderHelper, "autograde", stops_after_one)
    autograde_class(tmp_path / "inbox", tmp_path / "course", jobs=2, timeout=60, chapters=[chapter], progress=False)
    recorded = scores(tmp_path / "course")
    for student, score in expected_scores(chapter).items():
        assert recorded[(student, chapter.assignment)] == pytest.approx(score), student
    assert recorded[("eve", chapter.assignment)] == 0
    assert len(feedback_pages(tmp_path / "course")) == 5
    assert "the nbgrader helper stopped" in capsys.readouterr().err


def test_regrading_keeps_every_score(graded_class, tmp_path):
    root, _ = graded_class
    before = scores(root / "course")
    chapter = CHAPTERS[0]
    inbox = tmp_path / "inbox"
    (inbox / "ada").mkdir(parents=True)
    nbformat.write(samples.reference(chapter), inbox / "ada" / chapter.notebook_name)
    kept = seeds.load(root / "course", chapter.assignment)  # the hidden inputs' secret of each grading
    autograde_class(inbox, root / "course", jobs=1, timeout=60, chapters=[chapter])
    assert scores(root / "course") == before
    now = seeds.load(root / "course", chapter.assignment)
    assert {"ada", "ben", "cy", "dee"} <= set(kept) and now["ada"] != kept["ada"]  # a fresh draw per autograde
    assert {k: v for k, v in now.items() if k != "ada"} == {k: v for k, v in kept.items() if k != "ada"}


def test_grade_of_nothing_a_chapter_names_opens_no_gradebook(tmp_path):
    """No path is a chapter's notebook: each result says why and the command ends with status 0. No gradebook is
    opened (nbgrader would create one, shelling out to `alembic`, which a learner's PATH need not hold: this
    failed with FileNotFoundError)."""
    missing, notes = tmp_path / "missing.ipynb", tmp_path / "notes.txt"
    notes.write_text("not a notebook")
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", "--json", str(missing), str(notes)],
                          capture_output=True, text=True, env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout)
    assert [r["notebook"] for r in results] == [str(missing), str(notes)]
    assert all(r["score"] == 0 and "cannot tell which chapter" in r["error"] for r in results)


def test_grade_json_contract(tmp_path):
    chapter = find_chapter("02")
    good, empty, broken = tmp_path / "good", tmp_path / "empty", tmp_path / "broken"
    for folder in (good, empty, broken):
        folder.mkdir()
    nbformat.write(samples.reference(chapter), good / chapter.notebook_name)
    nbformat.write(samples.released(chapter), empty / chapter.notebook_name)
    (broken / chapter.notebook_name).write_text(samples.corrupt(chapter))
    paths = [str(f / chapter.notebook_name) for f in (good, empty, broken)]
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", "--json", *paths],
                          capture_output=True, text=True, check=True)
    results = json.loads(proc.stdout)
    total = sum(points(chapter).values())
    assert [r["notebook"] for r in results] == paths
    assert [r["score"] for r in results] == [total, 0, 0]
    hand = sum(item.points for item in written(chapter.name).values())  # written answers: graded by hand
    assert all(r["max_score"] == total + hand for r in results)
    for r in results:
        assert set(r["tests"]) == {f"test_{n}" for n in points(chapter)}
        for t in r["tests"].values():
            assert set(t) == {"score", "max_score", "error"}
    assert all(t["error"] is None for t in results[0]["tests"].values())
    assert all(t["error"] for t in results[1]["tests"].values())
    assert "not a readable Jupyter notebook" in results[2]["error"]

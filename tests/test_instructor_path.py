"""The instructor's path of guides/teaching.md, by its commands, on a late class: `grader autograde` with a term,
hand grades (written into the gradebook as Formgrader's grade box does), a resubmission that rewrites
one answer, `grader regrade`, Formgrader's Generate feedback (`nbgrader generate_feedback` in the course
directory), `grader export`, `grader report`: one total everywhere, pending answers pending everywhere."""
import csv
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.authoring import samples
from grader.chapters import find_chapter, is_answer_cell
from grader.classroom.total import late_policy, totals

pytestmark = pytest.mark.integration
CHAPTER = find_chapter("02")
DUE = datetime(2026, 11, 20, 23, 59, tzinfo=timezone.utc)


def run(*args, cwd=None) -> str:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def submit(inbox: Path, student: str, nb, late: timedelta) -> None:
    folder = inbox / student
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / CHAPTER.notebook_name)
    (folder / "timestamp.txt").write_text(f"{DUE + late:%Y-%m-%d %H:%M:%S.%f} UTC")


def hand_grade(course: Path, student: str) -> None:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for grade in gb.find_submission_notebook(CHAPTER.name, CHAPTER.assignment, student).grades:
            if grade.name.startswith("written_"):
                grade.manual_score, grade.needs_manual_grade = grade.max_score / 2, False
                gb.find_comment(grade.name, CHAPTER.name, CHAPTER.assignment, student).manual_comment = "half"
        gb.db.commit()


def test_hand_grade_resubmit_regrade_export_one_total(tmp_path):
    inbox, course = tmp_path / "inbox", tmp_path / "course"
    course.mkdir()
    (course / "term.toml").write_text(f'[due]\n"02" = {DUE:%Y-%m-%dT%H:%M:%SZ}\n[late]\nper_day = 20\n')
    submit(inbox, "ada", samples.reference(CHAPTER), timedelta(hours=12))  # a day late: 20%
    submit(inbox, "ben", samples.reference(CHAPTER), timedelta(hours=-1))
    run("grader", "autograde", str(inbox), "--course-dir", str(course), "--jobs", "1", "--quiet")
    hand_grade(course, "ada")
    hand_grade(course, "ben")
    rewritten = samples.reference(CHAPTER)
    answer = next(c for c in rewritten.cells if is_answer_cell(c))
    answer.source = "Another answer, after the grade."
    submit(inbox, "ben", rewritten, timedelta(hours=-1))
    summary = run("grader", "autograde", str(inbox), "--course-dir", str(course), "--jobs", "1", "--quiet")
    regrade = run("grader", "regrade", "02", "--course-dir", str(course), "--jobs", "1", "--quiet")
    run("nbgrader", "generate_feedback", CHAPTER.assignment, "--force", cwd=course)  # Formgrader's button
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nAda,1,1,ada,A\nBen,2,2,ben,A\n")
    exported = run("grader", "export", "--lms", "canvas", "--roster", str(roster), "--course-dir", str(course))
    run("grader", "report", "02", "--course-dir", str(course))

    found = totals(f"sqlite:///{course / 'gradebook.db'}", late_policy(course))
    ada, ben = found[("ada", CHAPTER.assignment)], found[("ben", CHAPTER.assignment)]
    assert ada.complete and ada.penalty == pytest.approx(0.2 * ada.raw) and ada.hand > 0  # a share of all points
    assert ben.pending == (answer.metadata.nbgrader["grade_id"],) and ben.penalty == 0
    lines = {line.split()[0]: line for line in summary.splitlines()[2:4]}
    assert "to grade by hand" not in summary and "pending" not in lines["ada"]
    assert "1 written answer pending" in lines["ben"]
    assert "0 of 2 learner(s) changed" in regrade
    rows = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert float(rows["ada"]["score"]) == ada.score and float(rows["ben"]["score"]) == ben.score
    canvas = {r["SIS Login ID"]: r for r in csv.DictReader((course / "canvas-grades.csv").open())}
    assert float(canvas["ada"][CHAPTER.assignment]) == ada.score and canvas["ben"][CHAPTER.assignment] == ""
    assert "ben: 02_self_attention" in exported
    for student, total in (("ada", ada), ("ben", ben)):
        page = (course / "feedback" / student / CHAPTER.assignment / f"{CHAPTER.name}.html").read_text()
        assert f"(Score: {round(total.score, 2)} / {round(total.max_score, 2)}" in page, student
        assert "<math" in page and ">Test cell<" not in page and "mathjax/2" not in page
    assert "pending: not yet graded by hand" in (course / "feedback" / "ben" / CHAPTER.assignment
                                                 / f"{CHAPTER.name}.html").read_text()
    report = (course / "reports" / f"{CHAPTER.assignment}.html").read_text()
    assert f"{ben.score:g} / " in report and "1 written answer(s) pending" in report

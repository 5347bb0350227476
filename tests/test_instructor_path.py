"""The instructor's path of guides/teaching.md, by its commands, on a late class: `grader autograde` with a term,
hand grades (written into the gradebook as Formgrader's grade box does), a resubmission that rewrites
one answer, `grader regrade`, Formgrader's Generate feedback (`nbgrader generate_feedback` in the course
directory), `grader export`, `grader report`: one total everywhere, pending answers pending everywhere.
The instructor's week: the same with grading on submit (the service's rounds), each step published in one
action, one number in every place a learner, a TA or the LMS reads it."""
import csv
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.utils import notebook_hash

from grader.authoring import samples
from grader.boundary.confine import Limits
from grader.boundary.pool import Pool
from grader.chapters import find_chapter, is_answer_cell
from grader.classroom.grades.requests import hand_score
from grader.classroom.grades.total import late_policy, totals
from grader.classroom.onsubmit.service import Service
from grader.classroom.policy.visibility import learner_view, policy_for
from grader.coursedir import COURSE_ID
from tests.test_onsubmit import submit as submit_inbound

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


# ---------------------------------------------------------------- the instructor's week (issue 45's table)

LATE_CHAPTER = find_chapter("06")
SCORE = re.compile(r"<h4>[^<]*\(Score: ([\d.]+) / ")


def submit_to_exchange(exchange: Path, student: str, chapter, nb, when: datetime) -> Path:
    """One submission, as `nbgrader submit` leaves it in the exchange's inbound folder."""
    return submit_inbound(exchange, student, nb, when, chapter=chapter)


def grade_by_hand(course: Path, student: str, chapter, scores: dict[str, float]) -> None:
    """Formgrader's grade boxes: each named answer's hand score, as its API writes it."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for name, score in scores.items():
            grade = gb.find_grade(name, chapter.name, chapter.assignment, student)
            grade.manual_score, grade.needs_manual_grade = score, False
        gb.db.commit()


def page_score(path: Path) -> float | None:
    found = SCORE.search(path.read_text()) if path.is_file() else None
    return float(found[1]) if found else None


def every_place(service: Service, exchange: Path, folder: Path, chapter, roster: Path) -> dict[str, float | None]:
    """The learner's total of `chapter` wherever it is read (folder: the attempt the gradebook holds)."""
    course, student = service.course_dir, "ada"
    total = service.totals()[(student, chapter.assignment)]
    [entry] = [e for e in service.ledger.of(student, chapter.assignment) if e.counted]
    view = learner_view(entry, policy_for(service.term(), entry), datetime.now(timezone.utc), total)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:  # Formgrader's view of the gradebook
        submission = gb.find_submission(chapter.assignment, student)
        formgrader = round(submission.score - submission.late_submission_penalty, 3)
    rows = [r for r in csv.DictReader((course / "grades.csv").open())
            if r["student_id"] == student and r["assignment"] == chapter.assignment]
    run("grader", "export", "--lms", "canvas", "--roster", str(roster), "--course-dir", str(course))
    [canvas] = [r for r in csv.DictReader((course / "canvas-grades.csv").open()) if r["SIS Login ID"] == student]
    secret = (folder / "submission_secret.txt").read_text()
    released = exchange / COURSE_ID / "feedback" / f"{notebook_hash(secret=secret, notebook_id=chapter.name)}.html"
    name = f"{chapter.name}.html"
    return {"total": total.score, "learner page": view.score, "Formgrader": formgrader,
            "grades.csv": float(rows[0]["score"]),
            "Canvas": float(canvas[chapter.assignment]) if canvas[chapter.assignment] else None,
            "feedback": page_score(course / "feedback" / student / chapter.assignment / name),
            "exchange": page_score(released),
            "attempt's link": page_score(course / "on-submit" / "feedback" / entry.key / name)}


def test_the_instructors_week_one_total_in_every_place_after_every_step(tmp_path):
    course, exchange = tmp_path / "course", tmp_path / "exchange"
    (exchange / COURSE_ID / "inbound").mkdir(parents=True)
    (exchange / COURSE_ID / "feedback").mkdir(parents=True)
    course.mkdir()
    start = datetime.now(timezone.utc)
    due, overdue = start + timedelta(days=7), start - timedelta(hours=1)
    (course / "term.toml").write_text(f'[due]\n"02" = {due:%Y-%m-%dT%H:%M:%SZ}\n"06" = {overdue:%Y-%m-%dT%H:%M:%SZ}\n'
                                      '[late]\nper_day = 20\n[on_submit]\nchapters = ["02", "06"]\n')
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nAda,1,1,ada,A\n")
    written = [c.metadata.nbgrader["grade_id"] for c in samples.reference(CHAPTER).cells if is_answer_cell(c)]
    seen = {}

    def one_total(step: str, folder: Path, chapter=CHAPTER, pending: bool = False) -> float:
        places = every_place(service, exchange, folder, chapter, roster)
        total = places.pop("total")
        assert places.pop("Canvas") == (None if pending else total), step  # pending: no grade for the LMS yet
        assert places == dict.fromkeys(places, total), step
        seen[step] = total
        return total

    with Pool(jobs=1, timeout=120, limits=Limits()) as pool:
        service = Service(course, exchange, pool)
        first = submit_to_exchange(exchange, "ada", CHAPTER, samples.reference(CHAPTER), start)
        [graded] = service.step()
        auto = graded.score
        one_total("graded on submit, written answers pending", first, pending=True)

        grade_by_hand(course, "ada", CHAPTER, dict(zip(written, (2, 1, 2))))  # the TA, in Formgrader
        service.step()  # a round of the service publishes it
        assert one_total("TA hand-grades 2+1+2", first) == auto + 5

        rewritten = samples.reference(CHAPTER)
        next(c for c in rewritten.cells if is_answer_cell(c)).source = "Another answer, after the grade."
        second = submit_to_exchange(exchange, "ada", CHAPTER, rewritten, datetime.now(timezone.utc))
        service.step()
        assert one_total("resubmits, one answer changed", second, pending=True) == auto + 3

        grade_by_hand(course, "ada", CHAPTER, {written[0]: 1})
        run("nbgrader", "generate_feedback", CHAPTER.assignment, cwd=course)  # Formgrader's button, no --force
        course_page = course / "feedback" / "ada" / CHAPTER.assignment / f"{CHAPTER.name}.html"
        assert page_score(course_page) == auto + 4  # without the service: the one button
        rows = {r["assignment"]: r for r in csv.DictReader((course / "grades.csv").open())}
        assert float(rows[CHAPTER.assignment]["score"]) == auto + 4
        service.step()  # the service releases it
        assert one_total("TA grades the changed answer", second) == auto + 4

        hand_score(course, "ada", CHAPTER.assignment, written[1], 2, late_policy(course))  # a request accepted, +1
        service.step()
        assert one_total("a regrade request accepted (+1)", second) == auto + 5

        late = submit_to_exchange(exchange, "ada", LATE_CHAPTER, samples.reference(LATE_CHAPTER), start)
        service.step()  # an hour late: 20% of all the chapter's points, hand-graded ones included
        late_written = [c.metadata.nbgrader["grade_id"] for c in samples.reference(LATE_CHAPTER).cells
                        if is_answer_cell(c)]
        grade_by_hand(course, "ada", LATE_CHAPTER, dict.fromkeys(late_written, 1))
        service.step()
        total = service.totals()[("ada", LATE_CHAPTER.assignment)]
        assert total.complete and total.penalty == pytest.approx(0.2 * total.raw) and total.hand == len(late_written)
        one_total("chapter 06, late, after hand grades", late, LATE_CHAPTER)
    assert len(seen) == 6, seen

"""What the trusted side's own people write, attacked where the harm happens (issue 44: sanitise last, staff least
privilege, no unsandboxed grading).

- A grader's comment, written as markup, must be text in the instructor's Formgrader (the "Earlier hand grades"
  cell a resubmission adds under the answer) and in the learner's feedback page, in real Chromium.
- A value no grader may give (a million points, NaN, unbounded extra credit), once in the gradebook, must not
  become a learner's total, grades.csv row or LMS export cell.
- Stock `nbgrader autograde` (the command, Formgrader's Autograde button, the hub's config) must not run a
  learner's code outside the sandbox: it refuses, naming `grader autograde`.
(tests/test_shared_formgrader.py has the shared Formgrader's side: a TA's grade refused at the route.)
"""
from __future__ import annotations

import csv
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.authoring import samples
from grader.chapters import REPO, find_chapter, is_answer_cell
from grader.classroom.grades import export
from grader.classroom.grades.total import PENDING, chapter_total
from grader.classroom.grading.batch import autograde_class
from grader.coursedir import CourseDir
from tests.adversarial.test_pages import browser, formgrader_html, open_page, scripts_that_ran  # noqa: F401
from tests.test_browser import OUTPUT

CHAPTER = find_chapter("02")


def pwn(name: str) -> str:
    return f"document.title+=' PWNED-{name}'"


# Each a grader's comment; each carries its name, which must show as text (inside <pre> or <code>) and nowhere else.
COMMENT_ATTACKS = {
    "c-img": f'<img src="x" onerror="{pwn("c-img")}"> c-img',
    "c-script": f"<script>{pwn('c-script')}</script> c-script",
    "c-meta": '<meta http-equiv="refresh" content="0;url=about:blank#c-meta"> c-meta',
    "c-jslink": f"[see the model answer c-jslink](javascript:void({pwn('c-jslink').replace(' ', '%20')}))",
    "c-notice": '<div style="position:fixed;top:0;left:0;width:100%;height:100%;background:#fff;z-index:99999">'
                "c-notice: your grade was withdrawn, see the instructor</div>",
    "c-mathjax": r"$\href{javascript:void(0)}{\style{position:fixed;top:0}{\text{c-mathjax}}}$",
}
COMMENT = "\n\n".join(COMMENT_ATTACKS.values())
AS_TEXT = """(names => Object.fromEntries(names.map(name => {
  const places = [], walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) if (walk.currentNode.textContent.includes(name))
    places.push(!!walk.currentNode.parentElement.closest('pre, code'));
  return [name, places.length > 0 && places.every(Boolean)];
})))(%s)"""


@pytest.fixture(scope="module")
def commented(tmp_path_factory):
    """mal hands in the reference; a grader grades both written answers with the attack as the comment; mal
    rewrites the first and is graded again: its old grade and comment move under it (Formgrader), the second
    keeps its comment (the feedback)."""
    root = tmp_path_factory.mktemp("staff")
    inbox, course = root / "inbox", root / "course"
    (inbox / "mal").mkdir(parents=True)
    nb = samples.reference(CHAPTER)
    nbformat.write(nb, inbox / "mal" / CHAPTER.notebook_name)
    autograde_class(inbox, course, jobs=1, timeout=120, chapters=[CHAPTER], progress=False)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for grade in gb.find_submission_notebook(CHAPTER.name, CHAPTER.assignment, "mal").grades:
            if grade.name.startswith("written_"):
                grade.manual_score, grade.needs_manual_grade = grade.max_score, False
                gb.find_comment(grade.name, CHAPTER.name, CHAPTER.assignment, "mal").manual_comment = COMMENT
        gb.db.commit()
    next(c for c in nb.cells if is_answer_cell(c)).source = "A different answer, written after the grade."
    nbformat.write(nb, inbox / "mal" / CHAPTER.notebook_name)
    autograde_class(inbox, course, jobs=1, timeout=120, chapters=[CHAPTER], progress=False)
    return course


def _attacked_page(page, url: str, shot: str) -> tuple[str, bool, dict]:
    open_page(page, url)
    stayed = page.js("location.href") == url
    page.js("(e => e && e.scrollIntoView({block: 'center'}))([...document.querySelectorAll('pre, code')]"
            ".find(e => e.textContent.includes('c-notice'))); true")
    page.screenshot(OUTPUT / shot)
    return scripts_that_ran(page), stayed, page.js(AS_TEXT % list(COMMENT_ATTACKS))


def test_a_graders_comment_is_text_in_the_instructors_formgrader(commented, browser, tmp_path):  # noqa: F811
    nb = nbformat.read(commented / "autograded" / "mal" / CHAPTER.assignment / CHAPTER.notebook_name, as_version=4)
    assert any("Earlier hand grades" in c.source and "c-notice" in c.source for c in nb.cells)
    view = tmp_path / "formgrade.html"
    view.write_text(formgrader_html(commented))
    ran, stayed, as_text = _attacked_page(browser, view.as_uri(), "formgrade-comment.png")
    assert not ran and stayed, (ran, stayed)
    assert all(as_text.values()), as_text


def test_a_graders_comment_is_text_in_the_learners_feedback(commented, browser):  # noqa: F811
    feedback = commented / "feedback" / "mal" / CHAPTER.assignment / f"{CHAPTER.name}.html"
    assert "c-notice" in feedback.read_text()
    ran, stayed, as_text = _attacked_page(browser, feedback.as_uri(), "feedback-comment.png")
    assert not ran and stayed, (ran, stayed)
    assert all(as_text.values()), as_text


# Values the shared Formgrader now refuses, as a stock route (or the database) would still store them.
# (A NaN: SQLite stores it as NULL, so it is tried on the rule itself below; PostgreSQL keeps it.)
UNBOUNDED = {"a million points of extra credit": ("extra_credit", 1e6),
             "an infinite hand grade": ("manual_score", math.inf),
             "a million hand-graded points": ("manual_score", 1e6),
             "a negative hand grade": ("manual_score", -50.0)}


@pytest.mark.parametrize("attempt", list(UNBOUNDED))
def test_an_unbounded_grade_never_becomes_a_total_or_an_export(commented, tmp_path, attempt):
    field, value = UNBOUNDED[attempt]
    course = tmp_path / "course"
    shutil.copytree(commented, course, symlinks=True)
    url = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(url) as gb:
        before = chapter_total(gb, "mal", CHAPTER.assignment)
        grades = gb.find_submission_notebook(CHAPTER.name, CHAPTER.assignment, "mal").grades
        target = next(g for g in grades if g.name.startswith("written_") and g.manual_score is not None) \
            if field == "manual_score" else next(g for g in grades if g.name.startswith("test_"))  # a graded one
        setattr(target, field, value)
        name = target.name
        gb.db.commit()
        total = chapter_total(gb, "mal", CHAPTER.assignment)
        export.write_course_csv(gb, course / "grades.csv")
    assert total.score <= before.score <= total.max_score and math.isfinite(total.score), total
    assert name in total.pending and dict((p.name, p.state) for p in total.parts)[name] == PENDING
    [row] = [r for r in csv.DictReader((course / "grades.csv").open()) if r["assignment"] == CHAPTER.assignment]
    assert float(row["score"]) == total.score and name in row["pending"], row
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nMal,1,1,mal,A\n")
    lms = export.build(url, [CHAPTER], roster, "canvas", pending="partial")
    [cell] = [r.get(CHAPTER.assignment) for r in lms.rows if r.get("SIS Login ID") == "mal"]
    assert float(cell) == total.score, cell


@pytest.mark.parametrize("kind, field", [("markdown", "manual_score"), ("code", "manual_score"),
                                         ("code", "extra_credit")])
def test_a_nan_in_the_gradebook_is_pending_not_a_total(kind, field):
    from types import SimpleNamespace

    from grader.classroom.grades.total import _part

    grade = SimpleNamespace(auto_score=1.0, needs_manual_grade=False, extra_credit=None, manual_score=1.0,
                            cell_type=kind)  # nbgrader's Grade: its cell's type a column of its own
    setattr(grade, field, math.nan)
    assert _part(grade, "x", 2.0).state == PENDING and _part(grade, "x", 2.0).score is None


# ---------------------------------------------------------------- no grading outside the sandbox

MARKER = "learner-code-ran.txt"


def _evil_submission(course: Path, student: str = "eve") -> Path:
    """A learner's notebook whose first code answer copies the solutions beside the course directory."""
    nb = samples.reference(CHAPTER)
    code = next(c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution"))
    stolen = REPO / "solutions" / "self_attention.py"
    code.source = (f"import pathlib\npathlib.Path({str(course.parent / MARKER)!r}).write_text("
                   f"pathlib.Path({str(stolen)!r}).read_text())\n" + code.source)
    folder = course / "submitted" / student / CHAPTER.assignment
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / CHAPTER.notebook_name)
    return course.parent / MARKER


@pytest.fixture
def course(commented, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(commented, course, symlinks=True)
    CourseDir(course, [CHAPTER])  # its nbgrader_config.py names this copy
    return course


def test_nbgrader_autograde_in_a_course_directory_refuses(course):
    ran = _evil_submission(course)
    proc = CourseDir(course, [CHAPTER]).nbgrader("autograde", CHAPTER.assignment, "--student", "eve", "--force",
                                                 check=False)  # as the instructor would type it
    assert not ran.exists(), "the learner's code ran outside the sandbox"
    assert proc.returncode != 0 and "grader autograde" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_formgraders_autograde_button_refuses(course, monkeypatch):
    """What the instructor's Formgrader calls for its Autograde button: nbgrader's API, with the config it loads
    from the course directory (nbgrader.server_extensions.formgrader.FormgradeExtension.load_config)."""
    from nbgrader.apps import NbGrader, NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    ran = _evil_submission(course)
    monkeypatch.chdir(course)
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    app = NbGrader()
    app.load_cwd_config = True
    app.load_config_file()
    coursedir = CourseDirectory(config=app.config)
    outcome = NbGraderAPI(coursedir, config=app.config).autograde(CHAPTER.assignment, "eve")
    assert not ran.exists(), "the learner's code ran outside the sandbox"
    assert not outcome["success"] and "grader autograde" in outcome["log"] + outcome.get("error", ""), outcome


def test_the_hubs_nbgrader_config_refuses_in_a_course_directory_of_its_own(course):
    """A course directory the instructor made with nbgrader alone (no config of ours), on the hub: the hub's
    nbgrader_config.py (on every server's Jupyter config path) refuses stock autograde too."""
    (course / "nbgrader_config.py").write_text(f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\n")
    ran = _evil_submission(course)
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(REPO / "deploy" / "jupyterhub"), "COURSE_DIRECTORY": str(course),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", CHAPTER.assignment, "--student", "eve",
                           "--force"], cwd=course, env=env, capture_output=True, text=True, timeout=300)
    assert not ran.exists(), "the learner's code ran outside the sandbox"
    assert proc.returncode != 0 and "grader autograde" in proc.stdout + proc.stderr, proc.stdout + proc.stderr

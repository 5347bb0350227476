"""The instructor's term on one graded class of chapter 02 (real nbgrader): renamed and duplicated
notebooks, due dates with a late policy and an extension, a regrade after a hidden check changes
(with --never-lower and undo), the class report, and the Canvas and Moodle exports."""
import csv
import json
import os
import re
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.authoring import samples
from grader.authoring.demo import write_class
from grader.boundary import seeds
from grader.boundary.spec import Check
from grader.boundary.specs import exercises
from grader.chapters import find_chapter
from grader.classroom.grades import export
from grader.classroom.grades.report import write_report
from grader.classroom.grades.total import late_policy
from grader.classroom.grades.written import written
from grader.classroom.grading import batch
from grader.classroom.grading.batch import autograde_class
from grader.classroom.grading.regrade import format_changes, regrade, undo
from grader.classroom.policy.term import LatePolicy, load_term
from grader.classroom.submissions import Submission
from grader.cli import main

CHAPTER = find_chapter("02")
DUE = datetime(2026, 11, 20, 23, 59, tzinfo=timezone.utc)
TERM = """\
extensions = "extensions.csv"
[due]
"02" = 2026-11-20T23:59:00Z
[late]
per_day = 10
cap = 50
grace_minutes = 15
"""


def stamp(folder, moment):
    (folder / "timestamp.txt").write_text(f"{moment:%Y-%m-%d %H:%M:%S.%f} UTC")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """ada: the reference as `self_attention (1).ipynb`, 2 days late with a 3-day extension;
    ben: the skeleton as `homework.ipynb`, no submission time; cy: two mistakes, 1.5 days late,
    with a `-Copy1` duplicate (the reference) beside it; dee: on time; eve: a corrupt notebook. Recorded by an
    nbgrader helper (grader.classroom.grading.nbgrader_helper), as a large class is."""
    root = tmp_path_factory.mktemp("term")
    inbox, course = root / "inbox", root / "course"
    write_class(inbox, [CHAPTER])
    name = CHAPTER.notebook_name
    (inbox / "ada" / name).rename(inbox / "ada" / "self_attention (1).ipynb")
    (inbox / "ben" / name).rename(inbox / "ben" / "homework.ipynb")
    nbformat.write(samples.reference(CHAPTER), inbox / "cy" / "self_attention-Copy1.ipynb")
    stamp(inbox / "ada", DUE + timedelta(days=2))
    stamp(inbox / "cy", DUE + timedelta(days=1, hours=12))
    stamp(inbox / "dee", DUE - timedelta(hours=1))
    course.mkdir()
    (course / "term.toml").write_text(TERM)
    (course / "extensions.csv").write_text(f"student,chapter,due\nada,02,{DUE + timedelta(days=3):%Y-%m-%dT%H:%M}Z\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batch, "HELPED", 1)  # nbgrader's autograde in the helper process, the late policy handed over
        summary = autograde_class(inbox, course, jobs=2, timeout=60, chapters=[CHAPTER], progress=False,
                                  term=load_term(course))
    return course, summary


def gradebook(course):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: (s.score, s.late_submission_penalty, s.timestamp)
                for s in gb.find_assignment(CHAPTER.assignment).submissions}


def total():
    return float(sum(ex.points for ex in exercises(CHAPTER.name).values()))


def test_renamed_and_duplicated_notebooks(graded):
    course, summary = graded
    scores = gradebook(course)
    assert scores["ada"][0] == total()  # "self_attention (1).ipynb": the chapter from its name
    assert "recognised as chapter 02_self_attention (its name less a copy suffix)" in summary
    assert "ben" in scores and "homework.ipynb: recognised as chapter 02_self_attention by its graded cells" in summary
    # cy's two notebooks: the one named as the chapter graded (two mistakes), the copy reported
    assert 0 < scores["cy"][0] < total()
    assert "not graded: cy handed in 2 notebooks of 02_self_attention; self_attention.ipynb was graded" in summary


def test_late_penalty_and_extension(graded):
    course, summary = graded
    scores = gradebook(course)
    raw, penalty, _ = scores["cy"]
    assert penalty == pytest.approx(0.2 * raw, abs=1e-3)  # 1.5 days late: two started days at 10 %
    assert scores["ada"][1] == 0  # 2 days after the due date, within her extension
    assert scores["dee"][1] == 0
    assert scores["ben"][2] is None and "no submission time known" in summary
    row = next(r for r in csv.DictReader((course / "grades.csv").open()) if r["student_id"] == "cy")
    assert float(row["raw_score"]) == raw and float(row["late_submission_penalty"]) == pytest.approx(penalty)
    feedback = (course / "feedback" / "cy" / CHAPTER.assignment / "self_attention.html").read_text()
    assert "Late submission penalty" in feedback


def test_late_policy():
    policy = LatePolicy(per_day=10, cap=50, zero_after_days=7, grace_minutes=15)
    assert [policy.fraction(s) for s in (0, 600, 3600, 86400 * 1.5, 86400 * 6, 86400 * 8)] == [0, 0, .1, .2, .5, 1]


def test_term_file_errors(tmp_path, capsys):
    (tmp_path / "term.toml").write_text('[due]\n"02" = 2026-11-20T23:59:00Z\n[late]\nper_dya = 10\n')
    with pytest.raises(ValueError, match="unknown late key"):
        load_term(tmp_path)
    (tmp_path / "term.toml").write_text('extensions = "x.csv"\n[due]\n"02" = 2026-11-20T23:59:00Z\n')
    (tmp_path / "x.csv").write_text("student,chapter,due\nada,05,2026-11-22T00:00Z\n")
    with pytest.raises(ValueError, match="05_add_and_norm, which has no due date"):
        load_term(tmp_path)
    with pytest.raises(ValueError, match="no such term file"):
        load_term(tmp_path, tmp_path / "missing.toml")
    assert main(["autograde", str(tmp_path), "--course-dir", str(tmp_path), "--submitted-at", "yesterday"]) == 2
    assert "--submitted-at: 'yesterday' is not a date and time" in capsys.readouterr().err


def test_a_named_term_file_is_kept_in_the_course_directory(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "t.toml").write_text(TERM)
    (tmp_path / "elsewhere" / "extensions.csv").write_text("student,chapter,due\nada,2,2026-11-23T00:00Z\n")
    load_term(tmp_path / "course", tmp_path / "elsewhere" / "t.toml")
    kept = load_term(tmp_path / "course")  # a later run without --term
    assert kept.policy == LatePolicy(per_day=10, cap=50, grace_minutes=15)
    assert kept.extensions == {("ada", CHAPTER.assignment): datetime(2026, 11, 23, tzinfo=timezone.utc)}


def test_a_named_term_file_that_replaces_the_courses_says_so_and_keeps_the_old_one(tmp_path, capsys):
    # `regrade --term FILE` changes the course's policy for every later run: never silently
    course = tmp_path / "course"
    course.mkdir()
    (course / "term.toml").write_text('[due]\n"02" = 2026-11-20T23:59:00Z\n')
    (tmp_path / "stricter.toml").write_text('[due]\n"02" = 2026-11-18T23:59:00Z\n')
    load_term(course, tmp_path / "stricter.toml")
    said = capsys.readouterr().err
    assert f"{tmp_path / 'stricter.toml'} replaces the course's policy file {course / 'term.toml'}" in said
    assert "2026-11-20" in (course / "term.toml.previous").read_text()
    assert load_term(course).due[CHAPTER.assignment].day == 18
    load_term(course, tmp_path / "stricter.toml")  # the same file again: nothing replaced, nothing said
    assert capsys.readouterr().err == ""


def test_submitted_at_fills_only_unknown_times(tmp_path):
    term = load_term(tmp_path, submitted_at="2026-11-21T08:00:00+01:00")
    known, unknown = Submission(tmp_path / "a", "a", submitted_at=DUE), Submission(tmp_path / "b", "b")
    term.fill_times([known, unknown])
    assert known.submitted_at == DUE and not known.notes
    assert unknown.submitted_at == datetime(2026, 11, 21, 7, tzinfo=timezone.utc)
    assert "from --submitted-at" in unknown.notes[0]


def test_exports(graded, tmp_path):
    course, _ = graded
    db = f"sqlite:///{course / 'gradebook.db'}"
    scores = gradebook(course)
    roster = tmp_path / "canvas.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n"
                      "    Points Possible,,,,\n"
                      + "".join(f"{s.title()},{i},S{i},{s},A\n" for i,
                                s in enumerate(["ada", "ben", "cy", "dee", "zed"])))
    canvas = export.build(db, [CHAPTER], roster, "canvas", exercises=True, late=late_policy(course))
    assert canvas.not_in_roster == ["eve"] and canvas.no_submission == ["zed"]
    out = tmp_path / "out.csv"
    export.write(canvas, out)
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0])[:6] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", CHAPTER.assignment]
    hand = sum(item.points for item in written(CHAPTER.name).values())  # the written answers count too
    assert rows[0]["Student"] == "Points Possible" and float(rows[0][CHAPTER.assignment]) == total() + hand
    cy = next(r for r in rows if r["SIS Login ID"] == "cy")
    assert float(cy[CHAPTER.assignment]) == pytest.approx(scores["cy"][0] - scores["cy"][1])  # after the penalty
    assert f"{CHAPTER.assignment}: softmax" in cy
    assert next(r for r in rows if r["SIS Login ID"] == "zed")[CHAPTER.assignment] == ""
    moodle_roster = tmp_path / "moodle.csv"
    moodle_roster.write_text("First name,Last name,Username,Email address\nAda,L,ada,ada@x\nBen,B,ben,ben@x\n")
    moodle = export.build(db, [CHAPTER], moodle_roster, "moodle")
    assert moodle.columns == ["First name", "Last name", "Username", "Email address", CHAPTER.assignment]
    assert sorted(moodle.not_in_roster) == ["cy", "dee", "eve"]


def test_feedback_as_a_learner_reads_it(graded):
    course, _ = graded
    feedback = lambda student: (course / "feedback" / student / CHAPTER.assignment / f"{CHAPTER.name}.html").read_text()  # noqa: E731
    cy = feedback("cy")
    toc = cy.split('<div id="toc">')[1].split("</div>")[0]
    assert "Test cell" not in toc and all(f">{name}</a>" in toc for name in exercises(CHAPTER.name))
    assert "Out[" not in cy  # the partial credit nbgrader reads is the heading's score, not an output
    assert "white-space: pre-wrap" in cy.split("</head>")[0]  # a FAIL line wraps instead of scrolling
    eve = feedback("eve")
    assert eve.count("is not a readable Jupyter notebook") == 1, "the reason once, not in every test cell"
    assert eve.count("no credit: the same reason as above") == len(exercises(CHAPTER.name)) - 1


def test_feedback_maths_show_offline(graded):
    pytest.importorskip("latex2mathml")
    course, _ = graded
    page = (course / "feedback" / "cy" / CHAPTER.assignment / f"{CHAPTER.name}.html").read_text()
    prose = re.sub(r"<(code|pre|script|style)\b.*?</\1>|<[^>]*>", "", page.split("<body", 1)[1], flags=re.S)
    assert page.count("<math") > 20 and "$" not in prose  # MathML, no TeX left for a MathJax from a CDN


def test_report(graded):
    course, _ = graded
    page = write_report(course, CHAPTER).read_text()
    assert page.count("data:image/png;base64,") == 2
    assert "eve</b>: self_attention.ipynb is not a readable Jupyter notebook" in page
    frequent = page.split("<h2>Most frequent failures</h2>")[1].split("<h2>")[0]
    # cy's catalogued mistake, named by the check that caught it, with its message
    assert "inputs around 1e4 give finite, correct probabilities" in frequent and "exp overflows" in frequent
    assert "not implemented yet" not in frequent
    assert "1 learner(s) left <b>test_SelfAttention</b> unfinished" in frequent


@pytest.fixture
def stricter_check():
    """A hidden check added to softmax (the specs are imported once per process, as the judge uses them)."""
    softmax = exercises(CHAPTER.name)["softmax"]

    def never(_):
        raise AssertionError("the fixed check fails everyone")

    softmax.checks.append(Check("a check fixed after the deadline", never))
    yield
    softmax.checks.pop()


def test_regrade_after_a_check_changes(graded, stricter_check):
    course, _ = graded
    before = gradebook(course)
    kept = seeds.load(course, CHAPTER.assignment)
    rows = {r["student"]: r for r in regrade(course, CHAPTER, term=load_term(course), jobs=2, timeout=60)}
    after = gradebook(course)
    assert kept and seeds.load(course, CHAPTER.assignment) == kept  # a regrade asks the same hidden inputs
    assert after["ada"][0] < before["ada"][0]
    assert rows["ada"]["old"] == before["ada"][0] and rows["ada"]["new"] == after["ada"][0]
    assert list(rows["ada"]["checks"]) == ["test_softmax"]
    assert after["cy"][1] == pytest.approx(0.2 * after["cy"][0], abs=1e-3)  # the penalty recomputed, not stacked
    assert after["ben"] == before["ben"]  # a skeleton stays at zero
    report = write_report(course, CHAPTER).read_text()
    assert "a check fixed after the deadline: nobody passes" in report
    assert "eve</b>: self_attention.ipynb is not a readable" in report  # not re-graded as the staged release
    history = json.loads((course / "history" / f"{CHAPTER.assignment}.json").read_text())
    assert history[-1]["before"]["ada"]["score"] == before["ada"][0]

    undo(course, CHAPTER)
    assert gradebook(course) == before

    # one learner only (an accepted regrade request): the others keep what they had
    with pytest.raises(ValueError, match="no submission of .* for nobody"):
        regrade(course, CHAPTER, term=load_term(course), students=["nobody"])
    rows = {r["student"]: r for r in regrade(course, CHAPTER, term=load_term(course), jobs=1, timeout=60,
                                             students=["ada"])}
    assert gradebook(course)["ada"][0] < before["ada"][0] and rows["ada"]["checks"]
    assert {s: v for s, v in gradebook(course).items() if s != "ada"} == {s: v for s, v in before.items() if s != "ada"}
    undo(course, CHAPTER)
    assert gradebook(course) == before

    # cy is granted an extension after the fact: the next run lifts the penalty (nbgrader #723)
    with (course / "extensions.csv").open("a") as extensions:
        extensions.write(f"cy,02,{DUE + timedelta(days=3):%Y-%m-%dT%H:%M}Z\n")
    rows = {r["student"]: r for r in regrade(course, CHAPTER, term=load_term(course), never_lower=True,
                                             jobs=2, timeout=60)}
    assert rows["ada"]["kept_old"] and rows["ada"]["new"] < rows["ada"]["old"]
    assert gradebook(course)["ada"] == before["ada"]
    assert gradebook(course)["cy"][1] == 0 and not rows["cy"]["kept_old"]


def test_export_to_the_lms_own_columns_and_a_roster_in_another_encoding(graded, tmp_path):
    course, _ = graded
    db = f"sqlite:///{course / 'gradebook.db'}"
    roster = tmp_path / "canvas.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nAda,1,S1,ada,A\n")
    column = "Self-attention (1234)"  # the Canvas assignment the instructor made, by name and id
    mapped = export.build(db, [CHAPTER], roster, "canvas", exercises=True, pending="partial",  # ada: answers pending
                          columns=export.column_names([f"02={column}"]))
    assert CHAPTER.assignment not in mapped.columns and column in mapped.columns
    assert "Self-attention: softmax" in mapped.columns and mapped.rows[1][column] != ""  # no id: not the chapter's
    with pytest.raises(ValueError, match="CHAPTER=COLUMN"):
        export.column_names(["Self-attention"])
    with pytest.raises(ValueError, match="does not hold"):
        export.build(db, [CHAPTER], roster, "canvas", columns=export.column_names(["03=Positions"]))
    roster.write_bytes("Student,ID,SIS User ID,SIS Login ID,Section\nZoë,1,S1,ada,A\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"canvas\.csv: not UTF-8.*CSV UTF-8"):
        export.build(db, [CHAPTER], roster, "canvas")


def test_grades_csv_leaves_a_chapter_never_submitted_empty(tmp_path, monkeypatch):
    # a new gradebook runs nbgrader's `alembic`, found beside this interpreter (make test leaves PATH alone)
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        for name in ("02_self_attention", "03_positional_encoding"):
            gb.add_assignment(name)
        gb.add_student("ada", last_name="Lovelace, A.")
        gb.add_submission("02_self_attention", "ada")
        export.write_course_csv(gb, tmp_path / "grades.csv")
    rows = {r["assignment"]: r for r in csv.DictReader((tmp_path / "grades.csv").open())}
    assert rows["02_self_attention"]["score"] == "0.0" and rows["02_self_attention"]["last_name"] == "Lovelace, A."
    assert rows["03_positional_encoding"]["score"] == rows["03_positional_encoding"]["raw_score"] == ""


def test_regrade_summary_counts_kept_scores_apart():
    rows = [{"student": "ada", "old": 10.0, "new": 8.0, "checks": {"test_softmax": [2, 0]}, "kept_old": True},
            {"student": "cy", "old": 6.0, "new": 7.0, "checks": {}, "kept_old": False},
            {"student": "ben", "old": 0.0, "new": 0.0, "checks": {}, "kept_old": False}]
    first = format_changes(rows, CHAPTER).splitlines()[0]
    assert first == (f"{CHAPTER.assignment}: 1 of 3 learner(s) changed; 1 would have gone down and kept "
                     "the old score (--never-lower)")


@pytest.mark.parametrize("learners", [6, 25])
def test_report_flags_a_check_everybody_passes_only_in_a_class_large_enough(learners):
    from collections import Counter

    from grader.classroom.grades.report import render

    long_check = "inputs around 1e4 give finite, correct probabilities (exp overflows without the shift by the row max)"
    data = {"scores": {f"s{i}": (10.0, 0.0) for i in range(learners)}, "max_score": 10.0, "failed": {},
            "checks": {("test_softmax", long_check): (learners, 0), ("test_softmax", "rows sum to 1"): (0, learners)},
            "failures": Counter(), "examples": {}, "unfinished": {}, "notes": {}}
    page = render(CHAPTER, data)
    flags = page.split("<h2>Checks to look at</h2>")[1].split("<h2>")[0]
    assert f"rows sum to 1: nobody passes (0 of {learners} learners)" in flags
    assert (f"every one of {learners} learners passes" in flags) == (learners >= 20)
    assert ("a check that every one of them passes is not flagged" in flags) == (learners < 20)


def test_the_demo_prints_no_warning_and_keeps_its_folder_saying_how_to_open_it(tmp_path, monkeypatch, capsys):
    # the feedback and Formgrader the demo describes can still be opened when it has ended
    import tempfile
    import warnings

    from grader.authoring import demo
    from grader.chapters import CHAPTERS

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nbformat's DuplicateCellId for a sample that copies a cell
        write_class(tmp_path, list(CHAPTERS))
    seen = {}

    def autograde(inbox, course, **_):
        seen["root"] = course.parent
        (course / "feedback").mkdir(parents=True)
        return (f"Gradebook sqlite:///{course}/gradebook.db\nnote: {inbox}/eve/x.ipynb: unreadable\n"
                f"grades:   {course}/grades.csv")

    monkeypatch.setattr(demo, "autograde_class", autograde)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp"))
    (tmp_path / "temp").mkdir()
    demo.run_demo(None, [CHAPTER])
    out = capsys.readouterr().out
    root = seen["root"]
    assert root.parent == tmp_path / "temp" and (root / "course" / "feedback").is_dir()  # kept
    assert f"grades:   {root}/course/grades.csv" in out and f"{root}/course/feedback" in out
    assert f"cd {root}/course && jupyter lab" in out and "Formgrader" in out and "deleted" not in out

"""One grade, one truth (grader.classroom.grades.total, grader.classroom.grades.handgrades): a hand grade belongs to the
answer it graded; a regrade never un-grades it; every view (grade --json, the summary, grades.csv, the
LMS export, feedback, report, regrade) reads one total, written answers nobody graded yet pending."""
import csv
import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.authoring import samples
from grader.chapters import find_chapter, is_answer_cell
from grader.classroom.grades import export
from grader.classroom.grades.handgrades import load
from grader.classroom.grades.report import collect
from grader.classroom.grades.total import PENDING, UNANSWERED, chapter_total
from grader.classroom.grades.written import MARK
from grader.classroom.grading.batch import autograde_class, result_of
from grader.classroom.grading.regrade import format_changes, regrade
from grader.classroom.policy.term import LatePolicy
from grader.classroom.submissions import Submission
from grader.coursedir import CourseDir

CHAPTER = find_chapter("02")
DUE = datetime(2026, 11, 20, 12, 0)


def _gradebook(tmp_path, monkeypatch):
    """A chapter of two test cells (3 + 5 points) and two written answers (2 points each), one learner
    submitting a day late."""
    # a new gradebook runs nbgrader's `alembic`, found beside this interpreter (make test leaves PATH alone)
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gb:
        gb.add_assignment("a", duedate=DUE)
        gb.add_notebook("nb", "a")
        for name, points, kind in (("test_x", 3, "code"), ("test_y", 5, "code"),
                                   ("written_p", 2, "markdown"), ("written_q", 2, "markdown")):
            gb.add_grade_cell(name, "nb", "a", max_score=points, cell_type=kind)
        gb.add_student("ada")
        gb.add_submission("a", "ada", timestamp=DUE + timedelta(hours=20))
        for name, auto in (("test_x", 3.0), ("test_y", 2.5), ("written_p", None), ("written_q", 0.0)):
            grade = gb.find_grade(name, "nb", "a", "ada")
            grade.auto_score, grade.needs_manual_grade = auto, auto is None
        gb.db.commit()
    return url


def test_an_answer_nobody_graded_is_pending_and_the_penalty_is_a_share_of_the_total(tmp_path, monkeypatch):
    url = _gradebook(tmp_path, monkeypatch)
    late = LatePolicy(per_day=20)
    with Gradebook(url) as gb:
        total = chapter_total(gb, "ada", "a", late)
        states = {p.name: p.state for p in total.parts}
        assert states["written_p"] == PENDING and states["written_q"] == UNANSWERED  # answered / left blank
        assert total.pending == ("written_p",) and not total.complete
        assert (total.auto, total.hand, total.max_score) == (5.5, 0.0, 12.0)
        assert total.penalty == pytest.approx(1.1) and total.score == pytest.approx(4.4)
        assert "pending" in total.text() and "0 / 2" not in total.text()
        grade = gb.find_grade("written_p", "nb", "a", "ada")
        grade.manual_score, grade.needs_manual_grade = 2.0, False  # graded by hand (Formgrader)
        gb.db.commit()
        after = chapter_total(gb, "ada", "a", late)
        assert after.complete and after.raw == 7.5
        assert after.penalty == pytest.approx(1.5)  # the same 20%, now of automatic and hand-graded points
        grade.needs_manual_grade = True  # nbgrader's flag on a re-autograde: not graded for this answer
        gb.db.commit()
        assert chapter_total(gb, "ada", "a", late).pending == ("written_p",)


def _hand_grade(course, student, score=None, comment="clear and right"):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook(CHAPTER.name, CHAPTER.assignment, student)
        for grade in notebook.grades:
            if grade.name.startswith("written_"):
                grade.manual_score = grade.max_score if score is None else score
                grade.needs_manual_grade = False
                gb.find_comment(grade.name, CHAPTER.name, CHAPTER.assignment, student).manual_comment = comment
        gb.db.commit()


def _total(course, student):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return chapter_total(gb, student, CHAPTER.assignment)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """ada and ben hand in the reference, both hand-graded full marks; ben then resubmits with his first
    written answer rewritten; the class is autograded again, then regraded."""
    root = tmp_path_factory.mktemp("one-grade")
    inbox, course = root / "inbox", root / "course"
    for student in ("ada", "ben"):
        (inbox / student).mkdir(parents=True)
        nbformat.write(samples.reference(CHAPTER), inbox / student / CHAPTER.notebook_name)
    autograde_class(inbox, course, jobs=1, timeout=60, chapters=[CHAPTER], progress=False)
    _hand_grade(course, "ada")
    _hand_grade(course, "ben", comment="good")
    graded_once = {s: _total(course, s) for s in ("ada", "ben")}
    changed = samples.reference(CHAPTER)
    first = next(c for c in changed.cells if is_answer_cell(c))
    first.source = "A different answer, written after the grade."
    nbformat.write(changed, inbox / "ben" / CHAPTER.notebook_name)
    summary = autograde_class(inbox, course, jobs=1, timeout=60, chapters=[CHAPTER], progress=False)
    resubmitted = {s: _total(course, s) for s in ("ada", "ben")}
    rows = regrade(course, CHAPTER, jobs=1, timeout=60, reason="test")
    return {"course": course, "first": first.metadata.nbgrader["grade_id"], "once": graded_once,
            "resubmitted": resubmitted, "summary": summary, "rows": rows}


def test_a_changed_answer_is_pending_again_and_an_unchanged_one_keeps_its_grade(graded):
    course, first = graded["course"], graded["first"]
    ada, ben = graded["resubmitted"]["ada"], graded["resubmitted"]["ben"]
    assert ada.complete and ada.score == graded["once"]["ada"].score == ada.max_score
    assert ben.pending == (first,)
    assert ben.score == pytest.approx(graded["once"]["ben"].score - ben.parts[[p.name for p in ben.parts].index(
        first)].max_score)  # the rewritten answer counts nothing until graded
    history = load(course / "hand-grades", "ben", CHAPTER.assignment)[first]["history"]
    assert history and history[0]["comment"] == "good"  # the old grade and comment, kept
    nb = nbformat.read(course / "autograded" / "ben" / CHAPTER.assignment / CHAPTER.notebook_name, as_version=4)
    shown = [c.source for c in nb.cells if c.metadata.get(MARK) == first and "Earlier hand grades" in c.source]
    assert shown and "good" in shown[0]  # the grader sees it in Formgrader
    ada_line, ben_line = graded["summary"].split("\n")[2:4]
    assert ada_line.startswith("ada") and "to grade by hand" not in ada_line and "pending" not in ada_line
    assert ben_line.startswith("ben") and "1 written answer pending" in ben_line  # nothing else to grade again


def test_a_regrade_never_ungrades_a_hand_grade(graded):
    course = graded["course"]
    after = _total(course, "ada")
    assert after.complete and after.score == graded["resubmitted"]["ada"].score
    assert _total(course, "ben").pending == (graded["first"],)
    assert all(row["old"] == row["new"] and not row.get("why") for row in graded["rows"])
    assert "0 of 2 learner(s) changed" in format_changes(graded["rows"], CHAPTER)


def test_every_view_reads_one_total(graded, tmp_path):
    course = graded["course"]
    ben = _total(course, "ben")
    sub = Submission(course / "submitted" / "ben" / CHAPTER.assignment / CHAPTER.notebook_name, "ben")
    sub.chapter, sub.cells = CHAPTER, [{}]
    result = result_of(CourseDir(course, [CHAPTER]), sub)  # grade --json
    assert (result["score"], result["max_score"], result["complete"]) == (ben.score, ben.max_score, False)
    assert result["written"][graded["first"]] == {"score": None, "max_score": ben.parts[
        [p.name for p in ben.parts].index(graded["first"])].max_score, "state": PENDING}
    rows = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert float(rows["ben"]["score"]) == ben.score and rows["ben"]["pending"] == graded["first"]
    assert float(rows["ada"]["score"]) == _total(course, "ada").score
    assert collect(course, f"sqlite:///{course / 'gradebook.db'}", CHAPTER)["pending"] == {"ben": 1}
    html = (course / "feedback" / "ben" / CHAPTER.assignment / f"{CHAPTER.name}.html").read_text()
    assert "pending: not yet graded by hand" in html and ">Test cell<" not in html
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nAda,1,1,ada,A\nBen,2,2,ben,A\n")
    db = f"sqlite:///{course / 'gradebook.db'}"
    blank = export.build(db, [CHAPTER], roster, "canvas")
    scores = {r.get("SIS Login ID"): r.get(CHAPTER.assignment) for r in blank.rows}
    assert scores["ada"] == f"{_total(course, 'ada').score:g}" and scores["ben"] is None
    assert "ben" in export.summary(blank, tmp_path / "out.csv")
    partial = export.build(db, [CHAPTER], roster, "canvas", pending="partial")
    assert {r.get("SIS Login ID"): r.get(CHAPTER.assignment) for r in partial.rows}["ben"] == f"{ben.score:g}"
    assert "WARNING" in export.summary(partial, tmp_path / "out.csv")


def test_exercise_columns_follow_the_chapter_column_without_its_lms_id(graded, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nAda,1,1,ada,A\n")
    built = export.build(f"sqlite:///{graded['course'] / 'gradebook.db'}", [CHAPTER], roster, "canvas",
                         exercises=True, columns=export.column_names(["02=Self-attention (1234)"]))
    assert "Self-attention (1234)" in built.columns
    exercise_columns = [c for c in built.columns if ": " in c]
    assert exercise_columns and all(c.startswith("Self-attention: ") for c in exercise_columns)


# ---------------------------------------------------------------- what learners and instructors read

ATTACK = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"


def _entry(status, **fields):
    from grader.classroom.ledger import Entry

    stamp = f"2026-11-20T1{len(status)}:00:00+00:00"
    return Entry(f"ada+{CHAPTER.assignment}+{stamp}+{status}", "ada", CHAPTER.assignment, stamp, status=status,
                 **fields)


def _ledger(tmp_path):
    from grader.classroom.ledger import GRADED, HELD, REFUSED, Ledger

    long = "FAIL  the output: " + "15 of 15 values differ; " * 40 + "THE DECISIVE LINE " + ATTACK
    ledger = Ledger(tmp_path)
    for entry in (_entry(GRADED, score=5.0, raw_score=5.0, max_score=14.0, counted=True, feedback="f.html",
                         graded_at="2026-11-20T10:00:05+00:00", pending=["written_p"],
                         checks=[{"name": "test_SelfAttention", "score": 0.0, "max_score": 3.0, "error": long}]),
                  _entry(REFUSED, reason="not graded: 1 attempt allowed for this chapter, and you have used 1"),
                  _entry(HELD, reason="this chapter is graded by your instructor, not on submit")):
        ledger.put(entry)
    return ledger


def test_the_learner_page_shows_every_failing_check_whole_and_the_gradebook_total(tmp_path):
    from grader.classroom.grades.total import AUTOMATIC, Part, Total
    from grader.classroom.onsubmit.pages import learner_page

    total = Total("ada", CHAPTER.assignment, auto=8.0, hand=3.0, late_share=0.0, max_score=14.0,
                  parts=(Part("test_x", AUTOMATIC, 8.0, 8.0), Part("written_p", PENDING, None, 2.0)))
    page = learner_page(_ledger(tmp_path), "ada", "/s/", totals={("ada", CHAPTER.assignment): total})
    assert "THE DECISIVE LINE" in page and "<details" in page  # whole, folded
    assert "11 / 14" in page and "pending" in page  # the gradebook's total (a hand grade given since), not 5
    assert 'tr class="refused"' in page and 'tr class="held"' in page


def test_the_class_page_reads_the_totals_lists_held_and_shows_a_term_error(tmp_path):
    from grader.classroom.grades.total import AUTOMATIC, Part, Total
    from grader.classroom.onsubmit.pages import class_page

    batch = Total("ben", CHAPTER.assignment, auto=6.0, hand=0.0, late_share=0.0, max_score=8.0,
                  parts=(Part("test_x", AUTOMATIC, 6.0, 8.0),))
    page = class_page(_ledger(tmp_path), {("ben", CHAPTER.assignment): batch}, "/s/", "term.toml: not valid TOML")
    assert "your grade" not in page and "ben" in page and "6 / 8" in page  # a learner graded in batch
    assert "held" in page and "refused" in page and "term.toml: not valid TOML" in page
    assert 'href="/s/feedback/' in page


def test_a_script_in_a_check_message_does_not_run_in_chromium(tmp_path):
    from grader.classroom.onsubmit.pages import learner_page

    dom = _dom(tmp_path, learner_page(_ledger(tmp_path), "ada", "/s/"))
    assert "THE DECISIVE LINE" in dom and "<details" in dom
    assert "pwned</title>" not in dom and "<title>Your submissions</title>" in dom


def test_a_term_file_error_keeps_the_submission_waiting_on_its_row(tmp_path, capsys):
    from grader.classroom.ledger import QUEUED
    from grader.classroom.onsubmit.service import Service
    from grader.classroom.policy.term import WAITING
    from tests.test_onsubmit import course, submit

    root, exchange = course(tmp_path, "")
    good = (root / "term.toml").read_text()
    (root / "term.toml").write_text(good + "\nattempts = = 2\n")
    service = Service(root, exchange, pool=None)
    submit(exchange, "ada", samples.reference(CHAPTER))
    for _ in range(3):
        service.scan()
        assert service.step() == []
    [entry] = service.ledger.of("ada")
    assert entry.reason == WAITING and entry.status == QUEUED
    assert capsys.readouterr().out.count("not valid TOML") == 1  # logged once, not every round
    assert service.policy.problem and service.totals() == {}
    (root / "term.toml").write_text(good)
    service.scan()
    assert service.ledger.of("ada")[0].reason == "" and service.ledger.of("ada")[0].status == QUEUED


def test_a_misspelt_extension_stops_autograde_and_regrade_with_near_names(tmp_path):
    # as a misspelt accommodation does: a learner silently losing an extension is never a warning at the end
    from grader.classroom.policy.term import load_term

    course, inbox = tmp_path / "course", tmp_path / "inbox"
    for student in ("learner4", "ada"):
        for folder in (inbox / student, course / "submitted" / student / CHAPTER.assignment):
            folder.mkdir(parents=True)
            nbformat.write(samples.reference(CHAPTER), folder / CHAPTER.notebook_name)
    (course / "term.toml").write_text('extensions = "extensions.csv"\n[due]\n"02" = 2026-11-20T23:59:00Z\n')
    (course / "extensions.csv").write_text("student,chapter,due\n"
                                           "lerner4,02,2026-11-23T00:00Z\nada,02,2026-11-23T00:00Z\n")
    for grading in (lambda: autograde_class(inbox, course, jobs=1, chapters=[CHAPTER], progress=False,
                                            term=load_term(course)),
                    lambda: regrade(course, CHAPTER, term=load_term(course), jobs=1)):
        with pytest.raises(ValueError, match=r"'lerner4' \(02_self_attention; near: learner4\)") as stopped:
            grading()
        assert "ada" not in str(stopped.value) and "nothing was graded" in str(stopped.value)
    assert not (course / "gradebook.db").exists() and not (course / "autograded").exists()


def test_a_misspelt_extension_stops_the_grading_service_with_near_names(tmp_path, capsys):
    # the running service, as autograde and regrade: the submissions wait, the class page says why
    from grader.classroom.ledger import QUEUED
    from grader.classroom.onsubmit.service import Service
    from grader.classroom.policy.term import WAITING
    from tests.test_onsubmit import course, submit

    root, exchange = course(tmp_path, due='[due]\n"02" = 2026-11-20T23:59:00Z')
    good = (root / "term.toml").read_text()
    (root / "term.toml").write_text('extensions = "extensions.csv"\n' + good)
    (root / "extensions.csv").write_text("student,chapter,due\nadda,02,2026-11-23T00:00Z\n")
    service = Service(root, exchange, pool=None)
    submit(exchange, "ada", samples.reference(CHAPTER))
    service.scan()
    assert service.step() == []
    [entry] = service.ledger.of("ada")
    assert (entry.status, entry.reason) == (QUEUED, WAITING)
    assert "'adda' (02_self_attention; near: ada)" in service.policy.problem
    assert "near: ada" in capsys.readouterr().out
    submit(exchange, "adda", samples.reference(CHAPTER))  # a folder named after the typo, with the class known
    os.environ["COURSE_LEARNERS"] = "ada"
    try:
        service.scan()
        assert [e.status for e in service.ledger.of("adda")] == ["refused"] and service.term() is None
    finally:
        del os.environ["COURSE_LEARNERS"]
    service.scan()
    assert capsys.readouterr().out == ""  # logged once, not every round
    (root / "extensions.csv").write_text("student,chapter,due\nada,02,2026-11-23T00:00Z\n")
    service.scan()
    assert service.term().due_for("ada", CHAPTER.assignment).day == 23 and service.policy.problem is None


def test_an_exercise_its_cell_never_defined_says_what_python_said():
    from grader.boundary.unit import Verdict
    from grader.classroom.grading.recording import checks_of, fill

    nb = samples.released(CHAPTER)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    test = next(i for i in code if nb.cells[i].metadata.get("nbgrader", {}).get("grade_id") == "test_SelfAttention")
    before = max(i for i in code if i < test)
    error = {"output_type": "error", "ename": "IndentationError", "evalue": "unexpected indent (line 3)",
             "traceback": []}
    verdict = Verdict(cells={before: {"outputs": [error]},
                             test: {"passed": [], "failed": [], "zero_reason": "`SelfAttention` is not defined"}})
    fill(nb, CHAPTER, [{"kind": "code"}] * len(nb.cells), verdict, checks_of(CHAPTER))
    said = "".join(o.get("text", "") for o in nb.cells[test].outputs)
    assert "`SelfAttention` is not defined" in said and "IndentationError: unexpected indent (line 3)" in said


def test_partial_credit_reads_as_a_person_writes_it_in_every_view():
    # two of three equal checks of a 7-point exercise: 4.667 points kept, "4.67" shown everywhere
    from grader.boundary.score import Result
    from grader.classroom.grades.total import AUTOMATIC, Part, Total
    from grader.classroom.grading.batch import format_table
    from grader.classroom.onsubmit.pages import _check
    from grader.classroom.policy.visibility import Check

    result = Result("attention", 7.0, passed=["a", "b"], failed=[("c", "wrong")])
    assert result.score == 4.667 and result.report().splitlines()[0] == "attention: 4.67 / 7 points"
    total = Total("ada", CHAPTER.assignment, auto=4.667, hand=0.0, late_share=0.1, max_score=14.0,
                  parts=(Part("test_attention", AUTOMATIC, 4.667, 7.0),))
    assert total.text() == "4.2 / 14 (raw 4.67, late penalty −0.47)"
    table = format_table([{"notebook": "a.ipynb", "score": 4.667, "max_score": 14.0, "lang": "en",
                           "tests": {"test_attention": {"score": 4.667, "max_score": 7.0, "error": "c: wrong"}}}])
    assert "4.667" not in table and "a.ipynb: 4.67 / 14" in table and " 4.67 / 7" in table
    assert "attention: 4.67 / 7 — c: wrong" in _check(Check("test_attention", 4.667, 7.0, "c: wrong"))


def _dom(tmp_path, html: str) -> str:
    import shutil
    import subprocess

    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no Chromium")
    path = tmp_path / "page.html"
    path.write_text(html)
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=2000",
                           "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120).stdout


def test_the_learner_page_says_attempts_left_the_own_due_date_and_the_score_as_graded(tmp_path):
    # one attempt graded 5 / 14, counted; its total now 11 / 14 with a written answer pending: both shown;
    # 3 attempts allowed, 1 used; ada's extension to the 23rd; the class page lists the extensions
    from grader.classroom.grades.total import AUTOMATIC, Part, Total
    from grader.classroom.onsubmit.pages import class_page, learner_page
    from grader.classroom.policy.submitpolicy import SubmitPolicy
    from grader.classroom.policy.term import Term

    total = Total("ada", CHAPTER.assignment, auto=8.0, hand=3.0, late_share=0.0, max_score=14.0,
                  parts=(Part("test_x", AUTOMATIC, 8.0, 8.0), Part("written_p", PENDING, None, 2.0)))
    extended = datetime(2026, 11, 23, 23, 59, tzinfo=timezone.utc)
    term = Term(due={CHAPTER.assignment: datetime(2026, 11, 20, 23, 59, tzinfo=timezone.utc)},
                extensions={("ada", CHAPTER.assignment): extended, (ATTACK, CHAPTER.assignment): extended},
                on_submit={CHAPTER.assignment: SubmitPolicy(attempts=3)})
    totals = {("ada", CHAPTER.assignment): total}
    dom = _dom(tmp_path, learner_page(_ledger(tmp_path), "ada", "/s/", totals=totals, term=term))
    assert "11 / 14" in dom and "(this attempt as graded: 5 / 14)" in dom
    assert "due 2026-11-23 23:59 UTC (your extension)" in dom and "2 of 3 attempts left" in dom
    dom = _dom(tmp_path, class_page(_ledger(tmp_path), totals, "/s/", extensions=term.extensions))
    assert "<h2>Extensions</h2>" in dom and "ada · 02_self_attention: due 2026-11-23 23:59 UTC" in dom
    assert "pwned</title>" not in dom and "<title>The class</title>" in dom


def test_the_class_page_lists_the_named_mistakes_the_class_makes_most(tmp_path):
    # three learners' autograded chapter 02 (one Chinese): the mistake two of them make comes first,
    # counted once per learner, with its exercise
    from grader.boundary.specs import exercises
    from grader.classroom.grades.mistakes import class_mistakes
    from grader.classroom.grading.recording import checks_of, test_outputs
    from grader.classroom.onsubmit.pages import class_page
    from grader.classroom.phrasebook import phrasebook, public_messages

    checks = [c.description for c in exercises(CHAPTER.name)["scaled_dot_product_attention"].checks]
    unscaled = "you forgot to divide the scores by sqrt(d_k)"
    for student, lang, said in (("ada", "en", unscaled), ("ben", "en", unscaled), ("cy", "en", None),
                                ("dee", "zh", unscaled)):
        chapter = CHAPTER.edition(lang) if lang != "en" else CHAPTER
        nb = samples.released(chapter)
        message = {"passed": checks[1:], "failed": [[checks[0], "wrong values"]], "diagnosis": said}
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_scaled_dot_product_attention":
                name = "scaled_dot_product_attention"
                cell.outputs = test_outputs(checks_of(CHAPTER)[name], name, 3.0, message, None,
                                            phrasebook(lang, CHAPTER.assignment))
        folder = tmp_path / "course" / "autograded" / student / CHAPTER.assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / CHAPTER.notebook_name)
    chinese = public_messages("zh", CHAPTER.assignment).text(unscaled)
    found = class_mistakes(tmp_path / "course")
    assert found == {CHAPTER.assignment: [("scaled_dot_product_attention", unscaled, 2),
                                          ("scaled_dot_product_attention", chinese, 1)]}
    dom = _dom(tmp_path, class_page(_ledger(tmp_path), {}, "/s/", mistakes=found))
    assert "What the class gets wrong" in dom and "<td>2</td><td>scaled_dot_product_attention</td>" in dom
    assert unscaled in dom and dom.index(unscaled) < dom.index(chinese)

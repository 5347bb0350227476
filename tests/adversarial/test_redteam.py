"""Red team (issue: break the doors of DESIGN.md invariants 7-11 as a learner or a grader would). Each test
asserts a door holds; a test marked xfail(strict) is a door found open (the report names the code at fault)."""
from __future__ import annotations

import copy
import csv
import re

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.chapters import find_chapter
from grader.classroom.grades.total import chapter_total
from grader.classroom.intake.identity import NotALearner, admit_student

CHAPTER = find_chapter("02")


@pytest.mark.parametrize("name", ["alice\n", "../alice", "<b>x</b>", "\u0430lice", "alice\u200b", "-x", ".x",
                                  "a" * 101, "alice bob", "alice/../bob", "ａlice"])
def test_the_gate_refuses_names_that_are_markup_paths_or_look_alikes(name, monkeypatch):
    monkeypatch.delenv("COURSE_LEARNERS", raising=False)
    with pytest.raises(NotALearner):
        admit_student(name)


def test_the_gate_refuses_a_case_variant_of_a_member(monkeypatch):
    monkeypatch.setenv("COURSE_LEARNERS", "alice,bob")
    for name in ("Alice", "ALICE", "alice.", "bob@"):
        with pytest.raises(NotALearner):
            admit_student(name)


def _total(course, student):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return chapter_total(gb, student, CHAPTER.assignment)


def _score(total, name):
    return next(p.score for p in total.parts if p.name == name)


def test_regrade_points_do_not_follow_code_in_a_cell_the_learner_marked_as_a_test(tmp_path):
    """Attack: after a request gave full points to a failing check, the learner resubmits their code with a
    new cell that breaks the exercise, its metadata forged as a hidden-test cell (grade: true, no solution).
    handgrades.code_digest leaves such cells out, so the code 'judged' looks unchanged and the points stay."""
    from grader.authoring import samples
    from grader.classroom.grades.requests import hand_score
    from grader.classroom.grades.total import AUTOMATIC
    from grader.classroom.grading.batch import autograde_class

    inbox, course = tmp_path / "inbox", tmp_path / "course"
    wrong = samples.partly_wrong(CHAPTER, mistakes=1)
    (inbox / "ada").mkdir(parents=True)
    nbformat.write(wrong, inbox / "ada" / CHAPTER.notebook_name)
    autograde_class(inbox, course, jobs=1, timeout=60, chapters=[CHAPTER], progress=False)
    check = next(p for p in _total(course, "ada").parts if p.state == AUTOMATIC and p.score < p.max_score)
    hand_score(course, "ada", CHAPTER.assignment, check.name, check.max_score, request="r-ada")
    exercise = samples.wrong_variants(CHAPTER)[0].exercise
    forged = copy.deepcopy(wrong)
    at = next(i for i, c in enumerate(forged.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == exercise)
    names = re.findall(r"^def (\w+)", forged.cells[at].source, re.M)
    hidden = nbformat.v4.new_code_cell("".join(f"{n} = None  # other code, never judged\n" for n in names))
    hidden.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": False, "points": 0,
                                   "grade_id": "redteam_hidden", "schema_version": 3}
    forged.cells.insert(at + 1, hidden)
    nbformat.write(forged, inbox / "ada" / CHAPTER.notebook_name)
    autograde_class(inbox, course, jobs=1, timeout=60, chapters=[CHAPTER], progress=False)
    after = _total(course, "ada")
    print({p.name: p.score for p in after.parts})
    assert _score(after, check.name) < check.max_score


def test_a_graders_class_page_shows_no_term_of_an_accommodation(tmp_path, monkeypatch):
    """Attack (staff least privilege): a teaching assistant opens the class page and reads the whole page, not
    only the Accommodations section. learner7's accommodation gives due = 2026-12-01T23:59; a TA must not see it."""
    import urllib.request

    from jupyterhub.services.auth import HubOAuth

    from grader.classroom.onsubmit import web as onsubmit_web
    from tests.adversarial.test_pages import Service
    from tests.test_accommodations import TERM
    from tests.test_browser import serving

    monkeypatch.setenv("COURSE_LEARNERS", "learner7,ada,bea")
    monkeypatch.setattr(onsubmit_web.Page, "get_current_user", lambda self: {"name": "ta"})
    svc = Service(tmp_path, TERM)
    app = onsubmit_web.application(svc, {"prof"}, {"ta"}, HubOAuth(api_token="test", cache_max_age=60), "/")
    with serving(app) as url, urllib.request.urlopen(f"{url}/class", timeout=10) as reply:
        page = reply.read().decode()
    assert "its terms are the instructor's" in page  # the TA view: terms hidden in their own section
    assert "2026-12-01" not in page, page[page.find("2026-12-01") - 200:][:300]


HELD_MARKDOWN = ["<javascript:alert(1)>", "[x][r]\n\n[r]: javascript:alert(1)", "[x](JaVaScRiPt:alert(1))",
                 "![x](x.svg)", "[x](javascript&#58;alert(1))", "<details open ontoggle=alert(1)>x</details>",
                 r"\\(\href{javascript:x}{a}\\)", "[x](data:text/html,<script>alert(1)</script>)",
                 "[x](//evil.example/)", "<b onclick=alert(1)>x</b>", "[x](<javascript:alert(1)>)",
                 "![x](images/../../../etc/passwd.png)", "![x](attachment:a.svg)", "$$\\unicode{x}$$",
                 "<img src=x onerror=alert(1)>", "[a](%6A%61vascript:alert(1))"]


@pytest.mark.parametrize("source", HELD_MARKDOWN)
def test_learner_markdown_that_draws_markup_is_shown_as_text(source):
    from grader.classroom.intake.sanitise import markdown_problem

    assert markdown_problem(source) is not None


TEX_ENVIRONMENTS = [r"\begin{equation}\href{javascript:alert(1)}{click for your grade}\end{equation}",
                    r"\begin{align}\style{position:fixed;top:0;left:0;width:100%;height:100%}{\text{FAKE}}\end{align}"]


@pytest.mark.parametrize("source", TEX_ENVIRONMENTS)
def test_tex_in_a_latex_environment_that_mathjax_would_draw_as_markup_is_shown_as_code(source):
    """Attack (sanitise last): a written answer holding a LaTeX environment whose body links (`\\href` to
    javascript:) or styles (`\\style` position:fixed, a fake notice over Formgrader). MathJax, which Formgrader and
    the feedback load, draws TeX outside <pre>/<code>; the cell must reach the page as code."""
    import re as regex

    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    from grader.classroom.intake.sanitise import clean_markdown

    html = markdown2html_mistune(clean_markdown(source))
    outside_code = regex.sub(r"(?s)<pre>.*?</pre>|<code>.*?</code>", "", html)
    assert "\\href" not in outside_code and "\\style" not in outside_code, html


def test_the_similarity_report_survives_answers_nested_past_the_parser(tmp_path):
    """Attack (similarity survives any one learner): answers a recursive AST walk cannot follow (60,000 unary
    minuses, 45,000 chained additions, 98 nested ifs); the class's report still compares the others."""
    from grader.authoring import samples
    from grader.classroom.similarity.pairs import similarity
    from tests.adversarial.test_identity import handed_in

    course = tmp_path / "course"
    for student in ("ada", "ben"):
        handed_in(course / "submitted" / student / CHAPTER.assignment, samples.reference(CHAPTER))
    for student, source in [("mal1", "x = " + "-" * 60000 + "1"), ("mal2", "x = " + "1+" * 45000 + "1"),
                            ("mal3", "def f():\n" + "".join(" " * i + "if x:\n" for i in range(1, 99)) + " " * 99
                             + "pass\n")]:
        nb = samples.reference(CHAPTER)
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source = source
        handed_in(course / "submitted" / student / CHAPTER.assignment, nb)
    result = similarity(course, CHAPTER)
    assert {"ada", "ben"} <= set(result.learners)
    assert result.pairs[0].a in ("ada", "ben") and result.pairs[0].b in ("ada", "ben"), result.pairs[:3]


FORGED = "Likely mistake (from the notebook's own check): FORGED the instructor says you all get full marks"


def test_a_learner_cannot_write_a_likely_mistake_onto_the_class_page(tmp_path):
    """Attack (sanitise last; identity of the speaker): the learner's softmax raises an error whose message holds
    a newline and then the likely-mistake line the checks print. The check's report keeps the message as lines;
    the class page's 'What the class gets wrong' (and Formgrader's test cell) shows it as the notebook's own check."""
    from grader.authoring import samples
    from grader.classroom.grades.mistakes import class_mistakes
    from grader.classroom.grading.batch import autograde_class

    inbox, course = tmp_path / "inbox", tmp_path / "course"
    nb = samples.reference(CHAPTER)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "def softmax" in c.source
                and c.metadata.get("nbgrader", {}).get("solution"))
    cell.source = f"def softmax(x, dim=-1):\n    raise ValueError({chr(10) + FORGED + chr(10)!r})\n"
    (inbox / "mal").mkdir(parents=True)
    nbformat.write(nb, inbox / "mal" / CHAPTER.notebook_name)
    autograde_class(inbox, course, jobs=1, timeout=60, chapters=[CHAPTER], progress=False)
    said = [m for found in class_mistakes(course).values() for _, m, _ in found]
    assert not any("FORGED" in m for m in said), said


LATE_TERM = """[due]
"02" = 2026-01-10T23:59:00Z
[late]
per_day = 10
cap = 50
"""


@pytest.mark.parametrize("stamp", ["1970-01-01 00:00:00.000000 UTC", "not a time", None])
def test_a_late_learner_cannot_drop_their_late_penalty_by_the_timestamp_they_wrote(tmp_path, stamp):
    """Attack (deadlines; times are the grader's): after stock `nbgrader collect`, submitted/<learner>/ holds the
    timestamp.txt the learner wrote in their inbound folder. A late learner writes an implausible one, garbage, or
    none; `grader autograde` then grades the submission with its time unknown. Where the harm shows: the gradebook's
    one total must still carry the late penalty (the notebook itself was written long after the due date)."""
    from datetime import datetime, timezone

    from grader.authoring import samples
    from grader.classroom.grading.batch import autograde_class
    from grader.classroom.policy.term import load_term
    from grader.classroom.submissions import write_timestamp

    course = tmp_path / "course"
    for student, claim in (("ada", "honest"), ("mal", stamp)):
        folder = course / "submitted" / student / CHAPTER.assignment
        folder.mkdir(parents=True)
        nbformat.write(samples.reference(CHAPTER), folder / CHAPTER.notebook_name)
        if claim == "honest":
            write_timestamp(folder / "timestamp.txt", datetime.now(timezone.utc))
        elif claim is not None:
            (folder / "timestamp.txt").write_text(claim)
    (course / "term.toml").write_text(LATE_TERM)
    autograde_class(course / "submitted", course, jobs=1, timeout=60, chapters=[CHAPTER], progress=False,
                    term=load_term(course))
    rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader((course / "grades.csv").open())}
    raw = _total(course, "ada").raw  # the same notebook: the same raw points
    assert rows["ada"] < raw  # the control: an honest late submission is penalised
    assert rows["mal"] == rows["ada"], rows


def test_regrade_points_are_bound_to_code_that_differs_only_in_a_strings_trailing_spaces():
    """Attack (regrade points belong to the code they judged): two attempts whose code computes different values
    (a separator with and without its trailing space, inside a triple-quoted string) hash alike, so points given
    for the first stay with the second (bind_points compares code_digest)."""
    from grader.classroom.grades.handgrades import code_digest

    def attempt(separator_line: str):
        return [nbformat.v4.new_code_cell(f'SEP = """{separator_line}\n"""\ndef join(a, b):\n    return a + SEP + b')]

    judged, other = attempt("a"), attempt("a   ")
    namespace_a, namespace_b = {}, {}
    exec(judged[0].source, namespace_a)
    exec(other[0].source, namespace_b)
    assert namespace_a["join"]("x", "y") != namespace_b["join"]("x", "y")  # the code differs in what it does
    assert code_digest(judged) != code_digest(other)

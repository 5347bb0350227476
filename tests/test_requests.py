"""Regrade requests and the course's staff (grader.classroom.grades.requests, grader.classroom.onsubmit.web): a
learner asks about one item of their own graded row; staff (instructors and graders) answer; an accepted
request with points is a hand score in the gradebook's one total; everything is logged, who from the login."""
from __future__ import annotations

import copy
import csv
import http.cookiejar
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest
from jupyterhub.services.auth import HubOAuth
from nbgrader.api import Gradebook

from grader.chapters import find_chapter
from grader.classroom.grades.requests import ACCEPTED, DECLINED, OPEN, Requests, hand_score, items_of
from grader.classroom.grades.total import AUTOMATIC, Part, Total, chapter_total
from grader.classroom.grades.total import GRADED as HAND_GRADED
from grader.classroom.ledger import FAILED, GRADED, Entry, Ledger
from grader.classroom.phrasebook import phrasebook
from tests.test_browser import serving

CHAPTER = find_chapter("02")


def _entry(student="mal", tag="x", status=GRADED, **fields) -> Entry:
    return Entry(id=f"{student}+{CHAPTER.assignment}+2026-11-20 10:00:00.000000 UTC+{tag}", student=student,
                 assignment=CHAPTER.assignment, submitted_at="2026-11-20T10:00:00+00:00", status=status,
                 score=6.0, raw_score=6.0, max_score=8.0,
                 checks=[{"name": "test_softmax", "score": 0.0, "max_score": 2.0, "error": "FAIL the mean"},
                         {"name": "test_scores", "score": 6.0, "max_score": 6.0, "error": None}], **fields)


# ---------------------------------------------------------------- the log

def test_a_learner_asks_about_an_item_of_their_own_graded_row_within_the_bound(tmp_path):
    book, mine = Requests(tmp_path), _entry(pending=["written_p"])
    total = Total("mal", CHAPTER.assignment, 6.0, 0.0, 0.0, 12.0,
                  (Part("test_softmax", AUTOMATIC, 0.0, 2.0), Part("written_q", HAND_GRADED, 1.0, 2.0)))
    assert items_of(mine, total) == ["test_softmax", "test_scores", "written_p"]  # not the counted attempt
    mine.counted = True
    assert items_of(mine, total) == ["test_softmax", "test_scores", "written_p", "written_q"]
    assert items_of(_entry(status=FAILED)) == []  # only a graded row
    with pytest.raises(LookupError):  # another learner's row
        book.ask(_entry(student="bea"), "mal", "test_softmax", "why?")
    with pytest.raises(ValueError, match="no such check"):
        book.ask(mine, "mal", "test_nothing", "why?", total=total)
    with pytest.raises(ValueError, match="empty"):
        book.ask(mine, "mal", "test_softmax", "   ")
    with pytest.raises(ValueError, match="at most 2000"):
        book.ask(mine, "mal", "test_softmax", "x" * 2001)
    for item in ("test_softmax", "test_scores", "written_q"):
        book.ask(mine, "mal", item, f"look at {item}", per_chapter=3, total=total)
    with pytest.raises(ValueError, match="at most 3 regrade requests per chapter, and you have made 3"):
        book.ask(mine, "mal", "written_p", "one more", per_chapter=3, total=total)
    assert [r.item for r in book.of("mal")] == ["test_softmax", "test_scores", "written_q"]
    assert book.of("bea") == [] and all(r.status == OPEN for r in book.all())
    with pytest.raises(ValueError, match="at most 0"):
        Requests(tmp_path / "other").ask(mine, "mal", "test_softmax", "x", per_chapter=0)


def test_an_answer_is_logged_once_with_who_and_why_and_a_failed_hand_change_logs_nothing(tmp_path):
    book = Requests(tmp_path)
    first = book.ask(_entry(), "mal", "test_softmax", "the mean is right")
    second = book.ask(_entry(), "mal", "test_scores", "why?")
    with pytest.raises(ValueError, match="reason is empty"):
        book.answer(first.id, "decline", " ", by="ta1")
    with pytest.raises(ValueError, match="choose accept or decline"):
        book.answer(first.id, "maybe", "x", by="ta1")

    def refuse(request, points):
        raise ValueError("points: 9 is not between 0 and 2")

    with pytest.raises(ValueError, match="not between"):
        book.answer(first.id, "accept", "", by="ta1", points=9.0, apply=refuse)
    assert book.of()[0].status == OPEN  # nothing logged
    applied = []
    done = book.answer(first.id, "accept", "you were right", by="ta1", points=2.0,
                       apply=lambda request, points: applied.append((request.item, points)) or [{"item": "x"}])
    assert applied == [("test_softmax", 2.0)] and done.status == ACCEPTED
    with pytest.raises(ValueError, match="answered already"):
        book.answer(first.id, "decline", "no", by="prof")
    book.answer(second.id, "decline", "the check is right: see the docstring", by="prof")
    with pytest.raises(LookupError):
        book.answer("0" * 16, "decline", "no", by="prof")
    again = {r.id: r for r in Requests(tmp_path).all()}  # read back from the log
    assert (again[first.id].status, again[first.id].answered_by, again[first.id].points) == (ACCEPTED, "ta1", 2.0)
    assert (again[second.id].status, again[second.id].reason) == (DECLINED, "the check is right: see the docstring")
    events = [json.loads(line) for line in book.path.read_text().splitlines()]
    assert [e["event"] for e in events] == ["asked", "asked", "answered", "answered"]  # appended, never rewritten
    assert events[0]["by"] == "mal" and events[2]["by"] == "ta1" and events[2]["changes"] == [{"item": "x"}]


def _gradebook(course: Path, monkeypatch) -> str:
    """The chapter's gradebook with one learner: a check at 1 of 3, a written answer pending."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    url = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(url) as gb:
        gb.add_assignment(CHAPTER.assignment)
        gb.add_notebook(CHAPTER.name, CHAPTER.assignment)
        gb.add_grade_cell("test_softmax", CHAPTER.name, CHAPTER.assignment, max_score=3, cell_type="code")
        gb.add_grade_cell("written_p", CHAPTER.name, CHAPTER.assignment, max_score=2, cell_type="markdown")
        gb.add_student("mal")
        gb.add_submission(CHAPTER.assignment, "mal")
        for name, auto in (("test_softmax", 1.0), ("written_p", None)):
            grade = gb.find_grade(name, CHAPTER.name, CHAPTER.assignment, "mal")
            grade.auto_score, grade.needs_manual_grade = auto, auto is None
        gb.db.commit()
    return url


def test_an_accepted_request_with_points_is_a_hand_score_in_the_one_total(tmp_path, monkeypatch):
    url = _gradebook(tmp_path, monkeypatch)
    changes = hand_score(tmp_path, "mal", CHAPTER.assignment, "test_softmax", 3.0)
    assert changes == [{"item": "test_softmax", "old": 1.0, "new": 3.0, "total": 3.0}]
    hand_score(tmp_path, "mal", CHAPTER.assignment, "written_p", 1.5)
    with Gradebook(url) as gb:
        total = chapter_total(gb, "mal", CHAPTER.assignment)
    assert (total.auto, total.hand, total.complete) == (3.0, 1.5, True)  # no longer pending
    with (tmp_path / "grades.csv").open() as handle:  # the CSV export agrees
        rows = list(csv.DictReader(handle))
    assert any(float(value) == 4.5 for row in rows for value in row.values() if re.fullmatch(r"[\d.]+", value or ""))
    with pytest.raises(ValueError, match="not between 0 and 3"):
        hand_score(tmp_path, "mal", CHAPTER.assignment, "test_softmax", 4.0)
    with pytest.raises(ValueError, match="no graded test_nothing"):
        hand_score(tmp_path, "mal", CHAPTER.assignment, "test_nothing", 1.0)


def test_points_for_one_chapter_cannot_land_in_another(tmp_path, monkeypatch):
    """Attack: a request logged with another chapter's check (a forged or edited log line)."""
    _gradebook(tmp_path, monkeypatch)
    with pytest.raises(ValueError, match="no graded test_softmax in 03"):
        hand_score(tmp_path, "mal", find_chapter("03").assignment, "test_softmax", 3.0)


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """ada and ben hand in a notebook with one exercise wrong (a check fails) through the batch; staff
    accept a request on that check with full points; the chapter is regraded (the same code); then ada
    resubmits with the exercise deleted and ben with other code, and the batch grades them."""
    from grader.authoring import samples
    from grader.classroom.grading.batch import autograde_class
    from grader.classroom.grading.regrade import regrade

    root = tmp_path_factory.mktemp("judged")
    inbox, course = root / "inbox", root / "course"
    wrong = samples.partly_wrong(CHAPTER, mistakes=1)
    for student in ("ada", "ben"):
        (inbox / student).mkdir(parents=True)
        nbformat.write(wrong, inbox / student / CHAPTER.notebook_name)
    autograde_class(inbox, course, jobs=1, timeout=60, chapters=[CHAPTER], progress=False)
    graded = _class_total(course, "ada")
    check = next(p for p in graded.parts if p.state == AUTOMATIC and p.score < p.max_score)
    for student in ("ada", "ben"):
        hand_score(course, student, CHAPTER.assignment, check.name, check.max_score, request=f"r-{student}")
    accepted = {s: _class_total(course, s) for s in ("ada", "ben")}
    regrade(course, CHAPTER, jobs=1, timeout=60, reason="the same code again")
    regraded = {s: _class_total(course, s) for s in ("ada", "ben")}
    exercise = samples.wrong_variants(CHAPTER)[0].exercise
    deleted = copy.deepcopy(wrong)
    deleted.cells = [c for c in deleted.cells if c.metadata.get("nbgrader", {}).get("grade_id") != exercise]
    nbformat.write(deleted, inbox / "ada" / CHAPTER.notebook_name)
    other = copy.deepcopy(wrong)
    cell = next(c for c in other.cells if c.metadata.get("nbgrader", {}).get("grade_id") == exercise)
    cell.source += "\n# looked at it again"
    nbformat.write(other, inbox / "ben" / CHAPTER.notebook_name)
    autograde_class(inbox, course, jobs=1, timeout=60, chapters=[CHAPTER], progress=False)
    return {"course": course, "check": check, "graded": graded, "accepted": accepted, "regraded": regraded,
            "after": {s: _class_total(course, s) for s in ("ada", "ben")}}


def _class_total(course: Path, student: str) -> Total:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return chapter_total(gb, student, CHAPTER.assignment)


def _score_of(total: Total, name: str) -> float:
    return next(p.score for p in total.parts if p.name == name)


def test_accepted_points_stay_with_the_code_they_judged_when_it_is_graded_again(judged):
    check, graded = judged["check"], judged["graded"]
    for student in ("ada", "ben"):
        accepted, regraded = judged["accepted"][student], judged["regraded"][student]
        assert accepted.score == graded.score - check.score + check.max_score
        assert regraded.score == accepted.score and _score_of(regraded, check.name) == check.max_score


def test_accepted_points_do_not_follow_a_resubmission_with_the_exercise_deleted_or_other_code(judged):
    """Attacks: the points carried to a resubmission (other code), to a deleted exercise; where the harm
    happens, the gradebook's one total after the batch."""
    from grader.classroom.grades.handgrades import FOLDER, _record

    check = judged["check"]
    for student in ("ada", "ben"):
        after = judged["after"][student]
        assert _score_of(after, check.name) == (0.0 if student == "ada" else check.score)  # the test's, not the points
        assert after.score < judged["accepted"][student].score
        released = _record(judged["course"] / FOLDER, student, CHAPTER.assignment)["released"]
        assert [(r["grade_id"], r["score"], r["request"]) for r in released] == [
            (check.name, check.max_score, f"r-{student}")]
    rows = {r["student_id"]: r for r in csv.DictReader((judged["course"] / "grades.csv").open())}
    assert float(rows["ada"]["score"]) == judged["after"]["ada"].score  # the CSV agrees


def test_a_request_shows_the_items_score_now_the_answer_or_the_message_and_its_formgrader_page(judged, capsys):
    """Issue 45: staff answer a request with its context, on the class page and in `grader requests`."""
    from grader.classroom.grades.requests import contexts
    from grader.classroom.onsubmit.pages import class_page
    from grader.cli import main

    course, total = judged["course"], judged["after"]["ada"]
    written = next(p for p in total.parts if p.state != AUTOMATIC)
    entry = _entry(student="ada", counted=True)
    entry.checks[0]["error"] = "FAIL <b>the mean</b>\x1b[2J"
    book = Requests(course)
    check, answer = (book.ask(entry, "ada", item, "look", total=total) for item in ("test_softmax", written.name))
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        page_id = gb.find_submission_notebook(CHAPTER.name, CHAPTER.assignment, "ada").id
    nb = nbformat.read(course / "autograded" / "ada" / CHAPTER.assignment / CHAPTER.notebook_name, as_version=4)
    text = next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == written.name)
    found = contexts(course, book.all(), [entry], {("ada", CHAPTER.assignment): total})
    link = f"services/formgrader/formgrader/submissions/{page_id}/?index=0"
    assert (found[check.id].score, found[check.id].said, found[check.id].formgrader) == (
        f"{_score_of(total, 'test_softmax'):g} / 2", "FAIL <b>the mean</b>\x1b[2J", link)
    now = "pending" if written.score is None else f"{written.score:g} / {written.max_score:g}"
    assert (found[answer.id].score, found[answer.id].said) == (now, text[:600])
    ledger = Ledger(course)
    ledger.put(entry)
    page = class_page(ledger, {}, "/services/grading/", requests=book.all(), contexts=found)
    assert f'<a href="/{link}">Formgrader</a>' in page and "FAIL &lt;b&gt;the mean&lt;/b&gt;" in page
    assert main(["requests", "--course-dir", str(course)]) == 0
    out = capsys.readouterr().out
    assert f"now {found[check.id].score}: FAIL <b>the mean</b> [2J · Formgrader: /{link}" in out and "\x1b" not in out


# ---------------------------------------------------------------- the web routes

class Client:
    """A browser's cookies, one login at a time (the hub's login replaced by `user`)."""

    def __init__(self, base: str, user: dict):
        self.base, self.user = base, user
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
                                                  NoRedirect)

    def get(self, path: str):
        return self.opener.open(f"{self.base}{path}", timeout=20)

    def post(self, path: str, **fields):
        try:
            return self.opener.open(f"{self.base}{path}", data=urllib.parse.urlencode(fields).encode(), timeout=20)
        except urllib.error.HTTPError as reply:
            if reply.code == 303:  # the redirect back to the page, not followed
                return reply
            raise

    def xsrf(self, path: str = "/") -> str:
        return re.search(r'name="_xsrf" value="([^"]+)"', self.get(path).read().decode()).group(1)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a 303 comes back as it is


def status_of(call) -> int:
    try:
        return call().status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture
def site(tmp_path, monkeypatch):
    """The service's own application (onsubmit_web.application) on a free port; the login: `user["name"]`."""
    from grader.classroom.onsubmit import web as onsubmit_web
    from tests.adversarial.test_pages import Service

    user = {"name": "mal"}
    monkeypatch.setattr(onsubmit_web.Page, "get_current_user", lambda self: dict(user))
    svc = Service(tmp_path, "[requests]\nper_chapter = 2\n")
    auth = HubOAuth(api_token="test", oauth_client_id="service-grading", cache_max_age=60)  # its login cookie's name
    app = onsubmit_web.application(svc, {"prof"}, {"ta1"}, auth, "/")
    with serving(app) as url:
        yield svc, url, user


def _put(svc, *entries: Entry) -> None:
    svc.ledger.put(*entries)


def test_a_request_travels_from_the_learner_page_to_the_staff_and_back(site):
    svc, base, user = site
    mine, theirs = _entry(tag="m"), _entry(student="bea", tag="b")
    _put(svc, mine, theirs)
    learner = Client(base, user)
    page = learner.get("/").read().decode()
    form = re.search(r'<form method="post" action="/requests">(.*?)</form>', page, re.S).group(1)
    assert f'name="key" value="{mine.key}"' in form and 'name="item"' in form and 'name="note"' in form
    assert 'name="_xsrf"' in form and ">test_softmax<" in form
    token = learner.xsrf()
    assert status_of(lambda: learner.post("/requests", key=mine.key, item="test_softmax", note="hi")) == 403  # no XSRF
    assert status_of(lambda: learner.post("/requests", key=theirs.key, item="test_softmax", note="mine now",
                                          _xsrf=token)) == 404  # another learner's row
    assert status_of(lambda: learner.post("/requests", key=mine.key, item="test_nothing", note="x", _xsrf=token)) == 400
    reply = learner.post("/requests", key=mine.key, item="test_softmax", note="<b>the mean</b> is right", _xsrf=token)
    assert reply.status == 303 and reply.headers["Location"] == "/"
    [asked] = json.loads(learner.get("/api/requests").read())
    assert (asked["student"], asked["item"], asked["status"], asked["note"]) == \
        ("mal", "test_softmax", "open", "<b>the mean</b> is right")
    assert status_of(lambda: learner.get("/class")) == 403
    assert status_of(lambda: learner.post(f"/requests/{asked['id']}/answer", decision="accept", reason="me",
                                          _xsrf=token)) == 403  # a learner answers nothing

    user["name"] = "bea"  # another learner sees none of mal's requests
    assert json.loads(Client(base, user).get("/api/requests").read()) == []

    user["name"] = "ta1"  # a grader: the class page, every request, the answer
    staff = Client(base, user)
    page = staff.get("/class").read().decode()
    assert "<h2>Regrade requests</h2>" in page and "&lt;b&gt;the mean&lt;/b&gt; is right" in page
    assert f'action="/requests/{asked["id"]}/answer"' in page
    token = staff.xsrf("/class")
    assert status_of(lambda: staff.post(f"/requests/{asked['id']}/answer", decision="decline", reason="")) == 403
    reply = staff.post(f"/requests/{asked['id']}/answer", decision="decline", reason="the check is right", _xsrf=token)
    assert reply.status == 303 and reply.headers["Location"] == "/class"
    [answered] = json.loads(staff.get("/api/requests").read())
    assert (answered["status"], answered["reason"], answered["answered_by"]) == \
        ("declined", "the check is right", "ta1")

    user["name"] = "mal"
    page = learner.get("/").read().decode()
    assert "declined" in page and "the check is right" in page and "&lt;b&gt;the mean&lt;/b&gt;" in page
    assert 'action="/requests"' in page  # one of the chapter's two requests left (term.toml: per_chapter = 2)
    token = learner.xsrf()
    assert learner.post("/requests", key=mine.key, item="test_scores", note="and this", _xsrf=token).status == 303
    assert 'action="/requests"' not in learner.get("/").read().decode()  # none left: no form
    assert status_of(lambda: learner.post("/requests", key=mine.key, item="test_scores", note="again",
                                          _xsrf=token)) == 400


def test_staff_and_forms_have_their_own_policy_headers_and_learners_keep_theirs(site):
    from grader.classroom.onsubmit.web import FORMS_CSP, STRICT_CSP

    svc, base, user = site
    entry = _entry(feedback="f.html")
    _put(svc, entry)
    kept = svc.course_dir / "on-submit" / "feedback" / entry.key / "f.html"
    kept.parent.mkdir(parents=True)
    kept.write_text("<p>feedback</p>")
    learner = Client(base, user)
    assert learner.get("/").headers["Content-Security-Policy"] == FORMS_CSP
    assert "script" not in FORMS_CSP and "allow-scripts" not in FORMS_CSP and "form-action 'self'" in FORMS_CSP
    assert learner.get("/api/requests").headers["Content-Security-Policy"] == STRICT_CSP
    assert learner.get(f"/feedback/{entry.key}").headers["Content-Security-Policy"] == STRICT_CSP
    for name, code in (("ta1", 200), ("prof", 200), ("someone", 403)):
        user["name"] = name
        assert status_of(lambda: Client(base, user).get("/class")) == code, name
        assert status_of(lambda: Client(base, user).get(f"/feedback/{entry.key}")) == (200 if code == 200 else 404)


def test_grader_requests_lists_them_for_the_terminal_without_the_learners_control_characters(tmp_path, capsys):
    from grader.cli import main

    book = Requests(tmp_path)
    asked = book.ask(_entry(), "mal", "test_softmax", "fine\x1b[2J\x1b]0;owned\x07\nsecond line")
    book.answer(asked.id, "accept", "right", by="ta1")
    assert main(["requests", "--course-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "fine [2J ]0;owned  second line" in out
    assert f"{asked.id} accepted mal {CHAPTER.assignment} test_softmax" in out and "ta1: right" in out
    assert "1 request(s), 0 open" in out
    assert main(["requests", "--course-dir", str(tmp_path), "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert (listed["status"], listed["answered_by"], listed["note"]) == ("accepted", "ta1", asked.note)


def test_points_go_to_the_attempt_the_gradebook_holds_only(site, monkeypatch):
    from grader.classroom.onsubmit import web as onsubmit_web
    svc, base, user = site
    older, counted = _entry(tag="older"), _entry(tag="counted", counted=True)
    _put(svc, older, counted)
    book = Requests(svc.course_dir)
    first = book.ask(older, "mal", "test_softmax", "look")
    second = book.ask(counted, "mal", "test_softmax", "look again")
    scored = []
    monkeypatch.setattr(onsubmit_web, "hand_score", lambda *args: scored.append(args[1:5]) or [])
    user["name"] = "prof"
    staff = Client(base, user)
    token = staff.xsrf("/class")
    answer = f"/requests/{first.id}/answer"
    assert status_of(lambda: staff.post(answer, decision="accept", points="2", reason="", _xsrf=token)) == 400
    assert status_of(lambda: staff.post(answer, decision="accept", points="nan", reason="", _xsrf=token)) == 400
    assert scored == [] and Requests(svc.course_dir).of()[0].status == OPEN
    assert staff.post(f"/requests/{second.id}/answer", decision="accept", points="2", reason="ok",
                      _xsrf=token).status == 303
    assert scored == [("mal", CHAPTER.assignment, "test_softmax", 2.0)]
    assert [r.answered_by for r in Requests(svc.course_dir).of()] == ["", "prof"]
    unknown = book.ask(_entry(tag="unknown", counted=True), "mal", "test_softmax", "an attempt the ledger lacks")
    assert status_of(lambda: staff.post(f"/requests/{unknown.id}/answer", decision="accept", points="2", reason="",
                                        _xsrf=token)) == 400
    assert len(scored) == 1 and Requests(svc.course_dir).of()[2].status == OPEN


def test_a_chinese_learner_page_asks_and_answers_in_chinese(tmp_path):
    from grader.classroom.onsubmit.pages import learner_page

    ledger = Ledger(tmp_path)
    entry = _entry(lang="zh", graded_at="2026-11-20T10:05:00+00:00")
    ledger.put(entry)
    book = Requests(tmp_path)
    asked = book.ask(entry, "mal", "test_softmax", "<i>why</i>")
    book.answer(asked.id, "accept", "right", by="ta1", points=2.0, apply=lambda request, points: [])
    page = learner_page(ledger, "mal", "/", requests=book.of("mal"), xsrf='<input name="_xsrf" value="t">')
    assert "申请复查评分" in page and "你的复查申请" in page and "已接受" in page and "（新分数：2）" in page
    assert "&lt;i&gt;why&lt;/i&gt;" in page and "<i>" not in page
    with pytest.raises(ValueError) as refused:
        book.ask(entry, "mal", "test_softmax", "x" * 3000)
    assert phrasebook("zh").text(str(refused.value)) == "说明太长：最多 2000 个字符"


def test_a_script_with_the_hubs_api_token_posts_without_a_form_token(site):
    svc, base, user = site
    entry = _entry(tag="script")
    _put(svc, entry)
    fields = urllib.parse.urlencode({"key": entry.key, "item": "test_softmax", "note": "from a script"}).encode()

    def post(authorization: str, cookie: str = "") -> int:
        headers = {"Authorization": authorization, **({"Cookie": cookie} if cookie else {})}
        request = urllib.request.Request(f"{base}/requests", data=fields, headers=headers)
        return status_of(lambda: urllib.request.build_opener(NoRedirect).open(request, timeout=20))

    assert post("Basic bWFsOnB3") == 403  # a browser's own header does not pass for a token
    # with a login cookie the hub would fall back on, a browser's rules: the form's token
    assert post("token 0123abcd", cookie="service-grading=x") == 403
    assert post("token 0123abcd") == 303  # the login is the token's (here: the test's fixed user)
    assert [r.note for r in Requests(svc.course_dir).of("mal")] == ["from a script"]

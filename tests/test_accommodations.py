"""Per-learner accommodations (grader.classroom.policy.accommodations): one learner's own on-submit policy and due
date in term.toml, applied where the service admits a submission, shown on the class page, refused for
anyone not in the class."""
from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from grader.chapters import find_chapter
from grader.classroom.ledger import GRADED, QUEUED, REFUSED, Entry, Ledger
from grader.classroom.onsubmit.pages import class_page
from grader.classroom.policy.admission import admit
from grader.classroom.policy.term import load_term

CHAPTER = find_chapter("02")
TERM = """[due]
"02" = 2026-11-20T23:59:00Z
[on_submit]
chapters = ["02"]
attempts = 2
min_minutes_between = 5
[accommodations.learner7]
"02" = { attempts = 10, min_minutes_between = 0, due = 2026-12-01T23:59:00Z, time_limit_seconds = 600 }
"""


@pytest.fixture(autouse=True)
def _roster(monkeypatch):
    monkeypatch.setenv("COURSE_LEARNERS", "learner7,ada")  # the hub's allow-list (jupyterhub_config.py)


def _term(tmp_path: Path, text: str = TERM, learners: str | None = None):
    (tmp_path / "term.toml").write_text(text)
    if learners is not None:
        os.environ["COURSE_LEARNERS"] = learners  # the autouse fixture puts it back
    return load_term(tmp_path)


def test_a_learners_accommodation_overrides_the_chapters_policy_for_them_alone(tmp_path):
    term = _term(tmp_path)
    theirs, others = term.submit_policy(CHAPTER.assignment, "learner7"), term.submit_policy(CHAPTER.assignment, "ada")
    assert (theirs.attempts, theirs.min_seconds_between, theirs.time_limit_seconds) == (10, 0.0, 600.0)
    assert (others.attempts, others.min_seconds_between, others.time_limit_seconds) == (2, 300.0, None)
    assert term.submit_policy(CHAPTER.assignment) == others  # no learner named: the chapter's
    assert theirs.enabled and theirs.counts == others.counts  # what it does not name stays the chapter's
    assert term.due_for("learner7", CHAPTER.assignment) == datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc)
    assert term.due_for("ada", CHAPTER.assignment) == datetime(2026, 11, 20, 23, 59, tzinfo=timezone.utc)
    assert "late penalty" not in (term.lateness_note("learner7", CHAPTER.assignment,
                                                     datetime(2026, 11, 25, tzinfo=timezone.utc)) or "")


def _graded(student: str, n: int) -> Entry:
    moment = f"2026-11-18T1{n}:00:00+00:00"
    return Entry(id=f"{student}+{CHAPTER.assignment}+{n}", student=student, assignment=CHAPTER.assignment,
                 submitted_at=moment, seen_at=moment, status=GRADED, graded_at=moment, score=1.0, max_score=8.0)


def test_the_service_admits_by_the_learners_own_policy(tmp_path):
    term, ledger = _term(tmp_path), Ledger(tmp_path)
    for student in ("learner7", "ada"):
        ledger.put(_graded(student, 1), _graded(student, 2))
        fresh = Entry(id=f"{student}+{CHAPTER.assignment}+9", student=student, assignment=CHAPTER.assignment,
                      submitted_at="2026-11-18T12:01:00+00:00", seen_at="2026-11-18T12:01:00+00:00")
        admit(ledger, fresh, term)
        ledger.put(fresh)
    assert ledger.entries[f"learner7+{CHAPTER.assignment}+9"].status == QUEUED  # 10 attempts, no wait
    assert ledger.entries[f"ada+{CHAPTER.assignment}+9"].status == REFUSED  # 2 attempts, used
    assert "2 attempts" in ledger.entries[f"ada+{CHAPTER.assignment}+9"].reason


def test_the_class_page_lists_each_learners_accommodations(tmp_path):
    term = _term(tmp_path)
    page = class_page(Ledger(tmp_path), accommodations=term.accommodations)
    assert "<h2>Accommodations</h2>" in page
    assert (f"learner7 · {CHAPTER.assignment}: attempts 10, min_minutes_between 0, time_limit_seconds 600, "
            "due 2026-12-01 23:59 UTC") in page
    assert "<li>none</li>" in class_page(Ledger(tmp_path), accommodations={}).split("<h2>Accommodations</h2>")[1]


def test_an_accommodation_for_someone_not_in_the_class_is_an_error_naming_them(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"not in this class: learner7 \(near: learner1\)"):
        _term(tmp_path, learners="learner1,ada")
    with pytest.raises(ValueError, match="not in this class: learner7"):  # no roster at all: nobody is in it
        _term(tmp_path, learners="")
    # the gradebook's students are the class too (nbgrader db student add, or anyone graded)
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        gb.add_student("learner7")
    assert _term(tmp_path, learners="").submit_policy(CHAPTER.assignment, "learner7").attempts == 10


@pytest.mark.parametrize("table, error", [
    ('"02" = { cooldown_minutes = 0 }', "not cooldown_minutes"),
    ('"02" = { attempts = 0 }', "attempts: 0 is not a whole number"),
    ('"02" = { due = "soon" }', "is not a date and time"),
    ('"03" = { due = 2026-12-01T23:59:00Z }', "no due date in \\[due\\]"),
    ('"02" = {}', "takes attempts, due"),
    ('"99" = { attempts = 3 }', "99"),
])
def test_a_bad_accommodation_says_what_is_wrong(tmp_path, table, error):
    text = TERM.split("[accommodations.learner7]")[0] + f"[accommodations.learner7]\n{table}\n"
    with pytest.raises(ValueError, match=error):
        _term(tmp_path, text)


def test_an_extension_and_an_accommodations_due_date_for_one_learner_are_one_too_many(tmp_path):
    (tmp_path / "extensions.csv").write_text("student,chapter,due\nlearner7,02,2026-11-25T23:59:00Z\n")
    with pytest.raises(ValueError, match="both an extension and an accommodation's due date"):
        _term(tmp_path, 'extensions = "extensions.csv"\n' + TERM)


def test_a_learners_own_time_limit_grades_them_in_a_batch_of_their_own(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from grader.boundary.confine import Limits
    from grader.classroom.onsubmit import service as onsubmit
    (tmp_path / "term.toml").write_text('[on_submit]\nchapters = ["02"]\ntime_limit_seconds = 100\n'
                                        '[accommodations.learner7]\n"02" = { time_limit_seconds = 600 }\n')
    service = onsubmit.Service(tmp_path, tmp_path / "exchange", SimpleNamespace(limits=Limits()))
    for student in ("learner7", "ada", "bea"):
        service.ledger.put(Entry(id=f"{student}+{CHAPTER.assignment}+1", student=student,
                                 assignment=CHAPTER.assignment, submitted_at="2026-11-18T12:00:00+00:00",
                                 seen_at="2026-11-18T12:00:00+00:00", status=QUEUED))
    batches = []
    monkeypatch.setattr(service, "_grade", lambda assignment, entries, term, score_only:
                        batches.append(sorted(e.student for e in entries)) or [])
    service.step()
    assert sorted(batches) == [["ada"], ["bea"], ["learner7"]]  # each learner graded on their own
    limits = []

    def autograde(pool, *args, **kwargs):
        limits.append((kwargs["feedback_for"], pool.limits.submission_seconds))
        return None, []

    monkeypatch.setattr(onsubmit, "autograde_with", autograde)
    term = service.term()
    for students in (["learner7"], ["ada", "bea"]):
        service._autograde(CHAPTER, [service.ledger.entries[f"{s}+{CHAPTER.assignment}+1"] for s in students],
                           term, False, tmp_path / "work")
    assert limits == [(["learner7"], 600), (["ada", "bea"], 100)]


@pytest.mark.parametrize("who, setting, terms", [
    ("ta", "", False), ("ta", "[graders]\nsee_accommodations = true\n", True), ("prof", "", True)])
def test_a_grader_sees_that_an_accommodation_exists_not_its_terms(tmp_path, monkeypatch, who, setting, terms):
    """The class page as the service serves it: a teaching assistant (`--grader`) sees who has an accommodation;
    its terms (often confidential) only when term.toml's [graders] see_accommodations says so; the instructor always."""
    import urllib.request

    from jupyterhub.services.auth import HubOAuth

    from grader.classroom.onsubmit import web as onsubmit_web
    from tests.adversarial.test_pages import Service
    from tests.test_browser import serving

    monkeypatch.setattr(onsubmit_web.Page, "get_current_user", lambda self: {"name": who})
    svc = Service(tmp_path, TERM + setting)
    app = onsubmit_web.application(svc, {"prof"}, {"ta"}, HubOAuth(api_token="test", cache_max_age=60), "/")
    with serving(app) as url, urllib.request.urlopen(f"{url}/class", timeout=10) as reply:
        section = reply.read().decode().split("<h2>Accommodations</h2>")[1]
    assert f"learner7 · {CHAPTER.assignment}" in section
    assert ("attempts 10" in section and "time_limit_seconds 600" in section) == terms, section
    assert ("its terms are the instructor's" in section) == (not terms), section


def test_the_graders_setting_is_true_or_false(tmp_path):
    with pytest.raises(ValueError, match="see_accommodations is true or false"):
        _term(tmp_path, TERM + '[graders]\nsee_accommodations = "yes"\n')

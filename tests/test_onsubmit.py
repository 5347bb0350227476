"""Grading on submit (grader.classroom.onsubmit.service), without a hub: submissions written into nbgrader's
exchange as `nbgrader submit` writes them, the service's rounds run in the test. The hub, the pages
and Chromium: tests/test_hub.py."""
import csv
import json
import os
import secrets
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import nbgrader.apps.api
import nbgrader.apps.generatefeedbackapp
import pytest
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.utils import notebook_hash

from grader.authoring import samples
from grader.boundary.confine import Limits
from grader.boundary.pool import Pool
from grader.boundary.score import points
from grader.boundary.specs import exercises
from grader.chapters import find_chapter
from grader.classroom.grading.publish import install
from grader.classroom.ledger import GRADED, GRADING, HELD, QUEUED, REFUSED, SUPERSEDED, Entry, Ledger, parse_inbound
from grader.classroom.onsubmit.service import Service
from grader.classroom.policy import timelimit
from grader.classroom.policy.submitpolicy import SubmitPolicy, parse_on_submit
from grader.coursedir import COURSE_ID

CHAPTER = find_chapter("02")
TOTAL = sum(ex.points for ex in exercises(CHAPTER.name).values())


def submit(exchange: Path, student: str, nb, when: datetime | None = None, chapter=CHAPTER) -> Path:
    """One submission, as nbgrader submit leaves it in the exchange's inbound folder."""
    when = when or datetime.now(timezone.utc)
    stamp = when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    folder = exchange / COURSE_ID / "inbound" / f"{student}+{chapter.assignment}+{stamp}+{secrets.token_urlsafe(9)}"
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / chapter.notebook_name)
    (folder / "timestamp.txt").write_text(stamp)
    (folder / "submission_secret.txt").write_text(secrets.token_hex(16))
    return folder


def released_feedback(exchange: Path, folder: Path) -> Path:
    secret = (folder / "submission_secret.txt").read_text()
    return exchange / COURSE_ID / "feedback" / f"{notebook_hash(secret=secret, notebook_id=CHAPTER.name)}.html"


@pytest.fixture(scope="module")
def pool():
    with Pool(jobs=2, timeout=120, limits=Limits()) as running:
        running.start()
        yield running


def course(tmp_path: Path, policy: str = "", due: str = "", reference: float | None = 60.0) -> tuple[Path, Path]:
    """A course graded on submit. Its chapter's reference time is known already (`reference` seconds: the limit
    the pool's own 120 s, as before a measurement), so the service does not time it after each test's first
    round; `reference=None` leaves it to measure."""
    root, exchange = tmp_path / "course", tmp_path / "exchange"
    (exchange / COURSE_ID / "inbound").mkdir(parents=True)
    (exchange / COURSE_ID / "feedback").mkdir(parents=True)
    root.mkdir()
    (root / "term.toml").write_text(f"{due}\n[on_submit]\nchapters = [\"02\"]\n{policy}\n")
    if reference is not None:
        (root / timelimit.STATE_DIR).mkdir()
        (root / timelimit.STATE_DIR / timelimit.FILE).write_text(json.dumps({CHAPTER.assignment: reference}))
    return root, exchange


def gradebook_score(root: Path, student: str) -> float:
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return gb.find_submission(CHAPTER.assignment, student).score


def test_attempts_feedback_best_and_the_limit(tmp_path, pool):
    root, exchange = course(tmp_path, 'attempts = 3\ncounts = "best"', reference=None)
    service = Service(root, exchange, pool)
    wrong = samples.wrong_variants(CHAPTER)[0]
    first = submit(exchange, "ada", samples.partly_wrong(CHAPTER, mistakes=1))
    [entry] = service.step()
    assert entry.status == GRADED and 0 < entry.score < TOTAL, entry
    # graded within minutes before the chapter's reference is timed; then timed once, in this pool
    assert entry.time_limit == timelimit.fitted(SubmitPolicy(), None, pool.limits.submission_seconds)
    measured = timelimit.known_seconds(root, CHAPTER)
    assert measured is not None and 0 < measured < 60, measured
    failing = [c for c in entry.checks if c["score"] < c["max_score"]]
    assert [c["name"] for c in failing] == [f"test_{wrong.exercise}"] and failing[0]["error"]
    assert released_feedback(exchange, first).is_file()  # what Fetch Feedback finds, for this submission
    assert (root / "on-submit" / "feedback" / entry.key / f"{CHAPTER.name}.html").is_file()

    second = submit(exchange, "ada", samples.reference(CHAPTER))
    [entry] = service.step()
    assert entry.score == TOTAL and gradebook_score(root, "ada") == TOTAL
    assert timelimit.known_seconds(root, CHAPTER) == measured  # measured once, not each round
    assert entry.time_limit == timelimit.fitted(SubmitPolicy(), measured, pool.limits.submission_seconds)
    assert released_feedback(exchange, second).is_file()

    submit(exchange, "ada", samples.released(CHAPTER))  # a worse third attempt: "best" keeps the second
    [entry] = service.step()
    assert entry.score == 0 and not entry.counted
    assert gradebook_score(root, "ada") == TOTAL
    assert [e.counted for e in service.ledger.of("ada")] == [False, True, False]

    fourth = submit(exchange, "ada", samples.reference(CHAPTER))  # past the limit
    assert service.step() == []
    newest = service.ledger.of("ada")[0]
    assert newest.status == REFUSED and "3 attempts allowed" in newest.reason
    # Fetch Feedback in the Assignments panel finds a notice for the refused submission, with the reason
    notice = released_feedback(exchange, fourth).read_text()
    assert "this submission was not graded" in notice and "3 attempts allowed" in notice
    assert not (root / "on-submit" / "received" / newest.key).exists()


def test_a_burst_is_one_queue_entry_and_a_restart_loses_nothing(tmp_path, pool):
    root, exchange = course(tmp_path, "")
    start = datetime.now(timezone.utc)
    for i in range(5):  # five submissions before the service looks: the newest is graded
        submit(exchange, "ben", samples.partly_wrong(CHAPTER, mistakes=1) if i < 4 else samples.reference(CHAPTER),
               start + timedelta(seconds=i))
    service = Service(root, exchange, pool)
    service.scan()
    statuses = [e.status for e in service.ledger.of("ben")]
    assert statuses == [QUEUED] + [SUPERSEDED] * 4
    # The service stops mid-grading: the ledger says "grading"; a new service queues it again.
    newest = service.ledger.of("ben")[0]
    newest.status = GRADING
    service.ledger.save()
    restarted = Service(root, exchange, pool)
    assert restarted.ledger.of("ben")[0].status == QUEUED
    [entry] = restarted.step()
    assert entry.status == GRADED and entry.score == TOTAL
    assert restarted.step() == []  # graded once
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert len(gb.find_assignment(CHAPTER.assignment).submissions) == 1


def test_a_hand_grade_is_republished_within_a_round_and_settles_the_late_penalty(tmp_path, pool, monkeypatch):
    """A TA grades in Formgrader (the gradebook changes, nothing else): the service's next round regenerates and
    releases the learner's feedback and rewrites grades.csv; the late penalty of the new total is in the gradebook."""
    overdue = (datetime.now(timezone.utc) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    root, exchange = course(tmp_path, "", due=f'[due]\n"02" = {overdue}\n[late]\nper_day = 20')
    sent = in_an_lms(tmp_path, monkeypatch, {"lms-ada": "ada"})
    service = Service(root, exchange, pool)
    folder = submit(exchange, "ada", samples.reference(CHAPTER))
    [entry] = service.step()
    service.publisher.round()  # the service's next round: the graded total goes to the LMS, written answers pending
    assert [(a, w["sub"], w["progress"]) for a, w in sent] == [(CHAPTER.assignment, "lms-ada", "PendingManual")]
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:  # Formgrader's grade and comment boxes
        for grade in gb.find_submission_notebook(CHAPTER.name, CHAPTER.assignment, "ada").grades:
            if grade.name.startswith("written_"):
                grade.manual_score, grade.needs_manual_grade = grade.max_score, False
                gb.find_comment(grade.name, CHAPTER.name, CHAPTER.assignment, "ada").manual_comment = "Well argued."
        gb.db.commit()
    assert service.step() == []  # nothing queued: the round republished
    total = service.totals()[("ada", CHAPTER.assignment)]
    assert total.complete and total.penalty > 0
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:  # what Formgrader's gradebook holds
        submission = gb.find_submission(CHAPTER.assignment, "ada")
        assert submission.score - submission.late_submission_penalty == pytest.approx(total.score)
        for listing in ("submission_dicts", "notebook_submission_dicts", "student_dicts"):
            monkeypatch.setattr(Gradebook, listing, getattr(Gradebook, listing))  # as it was, after this test
        monkeypatch.setattr(nbgrader.apps.api, "GenerateFeedback", nbgrader.apps.api.GenerateFeedback)
        api_class = nbgrader.apps.api.NbGraderAPI
        monkeypatch.setattr(api_class, "get_submission", api_class.get_submission)
        monkeypatch.setattr(nbgrader.apps.generatefeedbackapp, "GenerateFeedback",
                            nbgrader.apps.generatefeedbackapp.GenerateFeedback)
        install()  # what the course directory's nbgrader_config.py does in Formgrader's process
        assert [row["score"] for row in gb.submission_dicts(CHAPTER.assignment)] == [total.score]  # Manage Submissions
        assert [row["score"] for row in gb.student_dicts()] == [total.score]  # Manage Students
        assert [row["score"] for row in gb.notebook_submission_dicts(CHAPTER.name, CHAPTER.assignment)] == [total.score]
    api = nbgrader.apps.api.NbGraderAPI(coursedir=CourseDirectory(root=str(root)))
    [listed] = [s for s in api.get_student_submissions("ada") if s["name"] == CHAPTER.assignment]
    assert listed["score"] == pytest.approx(total.score)  # Manage Students, the learner's page
    heading = f"(Score: {round(total.score, 2)} / {round(total.max_score, 2)}"
    page = f"{CHAPTER.name}.html"
    for page in (root / "feedback" / "ada" / CHAPTER.assignment / page, released_feedback(exchange, folder),
                 root / "on-submit" / "feedback" / entry.key / page):
        html = page.read_text()
        assert heading in html and "Well argued." in html, page
    [row] = csv.DictReader((root / "grades.csv").open())
    assert float(row["score"]) == total.score and float(row["late_submission_penalty"]) == total.penalty
    # the LMS gradebook (LTI AGS) got the same total from the same round, graded in full now
    assert sent[-1] == (CHAPTER.assignment, {**sent[-1][1], "score": total.score, "progress": "FullyGraded"})


def in_an_lms(tmp_path, monkeypatch, accounts: dict) -> list:
    """The class registered with an LMS ($COURSE_LTI); what the grading service posts to its grade service,
    recorded (grader.classroom.lti's own tests post through pylti1p3 to a stand-in platform)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    import grader.classroom.lti.outbox as outbox

    folder = tmp_path / "lti"
    folder.mkdir()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (folder / "tool.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                        serialization.NoEncryption()))
    lms = "https://lms.example.edu"
    (folder / "platform.json").write_text(json.dumps({
        "issuer": lms, "client_id": "c", "deployment_ids": ["d"], "auth_login_url": lms + "/auth",
        "auth_token_url": lms + "/token", "key_set_url": lms + "/jwks", "tool_private_key": "tool.pem"}))
    (folder / "accounts.json").write_text(json.dumps(accounts))
    monkeypatch.setenv("COURSE_LTI", str(folder))
    sent = []
    monkeypatch.setattr(outbox, "AgsSender", lambda platform, context: lambda assignment, want: sent.append(
        (assignment, want)))
    return sent


def test_min_time_between_attempts_and_score_only_before_the_due_date(tmp_path, pool):
    due = (datetime.now(timezone.utc) + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    root, exchange = course(tmp_path, 'min_minutes_between = 5\nfeedback_before_due = "score"',
                            due=f'[due]\n"02" = {due}')
    service = Service(root, exchange, pool)
    submit(exchange, "cy", samples.partly_wrong(CHAPTER, mistakes=1))
    [entry] = service.step()
    assert entry.score_only
    html = (root / "on-submit" / "feedback" / entry.key / f"{CHAPTER.name}.html").read_text()
    assert "shown after the due date" in html and "FAIL" not in html
    submit(exchange, "cy", samples.reference(CHAPTER))
    assert service.step() == []
    newest = service.ledger.of("cy")[0]
    assert newest.status == REFUSED and "5 min between attempts" in newest.reason


def test_a_held_submission_gets_a_notice_that_fetch_feedback_finds(tmp_path):
    due = (datetime.now(timezone.utc) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    root, exchange = course(tmp_path, 'after_due = "hold"', due=f'[due]\n"02" = {due}')
    folder = submit(exchange, "hal", samples.reference(CHAPTER))
    service = Service(root, exchange, None)  # held as it is scanned: nothing to grade
    service.scan()
    [entry] = service.ledger.of("hal")
    assert entry.status == HELD
    notice = released_feedback(exchange, folder).read_text()
    assert "held for your instructor" in notice and "submitted after the due date" in notice
    assert "Grading page" in notice and "<script" not in notice
    # A service that first sees a submission after the instructor released its feedback leaves that alone.
    later = submit(exchange, "ivy", samples.reference(CHAPTER))
    released_feedback(exchange, later).write_text("the instructor's feedback")
    service.scan()
    assert service.ledger.of("ivy")[0].status == HELD
    assert released_feedback(exchange, later).read_text() == "the instructor's feedback"


def test_policy_errors_name_the_key():
    with pytest.raises(ValueError, match="on_submit.attempts: 0"):
        parse_on_submit({"chapters": ["02"], "attempts": 0}, "term.toml")
    with pytest.raises(ValueError, match="counts: 'first'"):
        parse_on_submit({"chapters": "all", "counts": "first"}, "term.toml")
    with pytest.raises(ValueError, match="unknown key"):
        parse_on_submit({"attempt": 3}, "term.toml")
    policies = parse_on_submit({"chapters": ["02"], "attempts": 2, "chapter": {"02": {"attempts": 5}}}, "t")
    assert policies["02_self_attention"].attempts == 5 and policies["02_self_attention"].enabled
    assert not policies["03_positional_encoding"].enabled


def test_inbound_names():
    assert parse_inbound("ada+02_self_attention+2026-11-25 10:00:00.000000 UTC+abc")[:2] == ("ada", "02_self_attention")
    assert parse_inbound("nonsense") is None
    assert parse_inbound("ada+02+not a time+x") is None


def test_the_ledger_is_sqlite_and_an_old_json_ledger_is_migrated(tmp_path):
    old = Entry("ada+02_self_attention+2026-11-25 10:00:00 UTC+x", "ada", CHAPTER.assignment,
                "2026-11-25T10:00:00+00:00", status=GRADED, score=3.0)
    (tmp_path / "on-submit").mkdir()
    (tmp_path / "on-submit" / "state.json").write_text(json.dumps({"entries": [asdict(old)]}))
    ledger = Ledger(tmp_path)
    assert ledger.of("ada") == [old] and not (tmp_path / "on-submit" / "state.json").exists()
    newer = Entry("ada+02_self_attention+2026-11-26 10:00:00 UTC+y", "ada", CHAPTER.assignment,
                  "2026-11-26T10:00:00+00:00")
    ledger.put(newer)
    assert Ledger(tmp_path).of("ada", CHAPTER.assignment) == [newer, old]  # read back from SQLite
    assert (tmp_path / "on-submit" / "ledger.sqlite").is_file() and os.path.isdir(tmp_path / "on-submit")


def test_each_learner_sees_their_own_rows_and_the_instructor_the_class(tmp_path, pool):
    from grader.classroom.onsubmit.pages import class_page, learner_page

    root, exchange = course(tmp_path, "", reference=None)
    service = Service(root, exchange, pool)
    submit(exchange, "ada", samples.partly_wrong(CHAPTER, mistakes=1))
    submit(exchange, "ben", samples.reference(CHAPTER))
    service.step()
    wrong = samples.wrong_variants(CHAPTER)[0].exercise
    mine = learner_page(service.ledger, "ada", "/services/grading/")
    [ada] = service.ledger.of("ada")
    assert "Your submissions, ada" in mine and wrong in mine
    assert f"{points(ada.score)} / {points(ada.max_score)}" in mine
    assert f"/services/grading/feedback/{ada.key}" in mine
    assert "ben" not in mine and service.ledger.of("ben")[0].key not in mine
    from grader.classroom.policy.timelimit import DEFAULT_SECONDS

    assert ada.time_limit == DEFAULT_SECONDS and "time limit: 5 min" in mine  # no reference measured yet: minutes
    overview = class_page(service.ledger)
    assert "Queue: 0 waiting" in overview and "ada" in overview and "ben" in overview
    # ben wrote the written answers: pending until graded by hand, on his page and in api/mine (the one total)
    from grader.classroom.grades.written import written
    from grader.classroom.ledger import now
    from grader.classroom.policy.visibility import learner_view, policy_for

    [ben] = service.ledger.of("ben")
    assert sorted(ben.pending) == sorted(written(CHAPTER.name)) and not ada.pending  # ada left hers blank: 0
    totals = service.totals()
    page = learner_page(service.ledger, "ben", "/services/grading/", totals=totals, term=service.term())
    assert f"· {len(ben.pending)} written answer(s) pending" in page
    row = learner_view(ben, policy_for(service.term(), ben), now(), totals[("ben", CHAPTER.assignment)]).as_json()
    assert sorted(row["pending"]) == sorted(ben.pending) and row["max_score"] == ben.max_score


def test_a_chinese_notebook_gets_its_page_and_feedback_in_chinese(tmp_path, pool):
    # the service's page follows the learner's newest graded notebook; the feedback it releases is Chinese
    from grader.classroom.onsubmit.pages import learner_page

    root, exchange = course(tmp_path, "attempts = 2")
    service = Service(root, exchange, pool)
    first = submit(exchange, "cai", samples.partly_wrong(CHAPTER.edition("zh"), mistakes=1))
    service.step()
    [cai] = service.ledger.of("cai")
    assert cai.lang == "zh" and cai.status == GRADED
    page = learner_page(service.ledger, "cai", "/services/grading/")
    assert "cai 的提交" in page and "已批改" in page and "批改你的" not in page
    assert "Your submissions" not in page and "what the checks found" not in page
    assert "未通过" in cai.checks[0]["error"] or any("未通过" in (c.get("error") or "") for c in cai.checks)
    assert "未通过" in released_feedback(exchange, first).read_text()
    for _ in range(2):  # two more: the third is refused, and says so in Chinese (its notice in the panel too)
        third = submit(exchange, "cai", samples.reference(CHAPTER.edition("zh")))
        service.step()
    page = learner_page(service.ledger, "cai", "/services/grading/")
    assert "这一章允许提交 2 次，你已用了 2 次" in page and "已拒绝" in page
    notice = released_feedback(exchange, third).read_text()
    assert "这次提交没有批改" in notice and "这一章允许提交 2 次，你已用了 2 次" in notice
    assert "not graded" not in notice
    english = learner_page(service.ledger, "ada", "/services/grading/")  # nothing graded yet: English
    assert "No submissions yet" in english


def test_a_submission_that_cannot_be_graded_gets_its_zero_and_reason(tmp_path, pool):
    root, exchange = course(tmp_path, "")
    service = Service(root, exchange, pool)
    folder = submit(exchange, "dee", samples.reference(CHAPTER))
    (folder / CHAPTER.notebook_name).write_text("{ not a notebook")
    [entry] = service.step()
    assert entry.status == "failed" and entry.score == 0 and "not" in entry.reason.lower(), entry
    assert gradebook_score(root, "dee") == 0  # recorded, like the batch


def test_a_submission_written_in_another_learners_name_is_refused(tmp_path, pool, monkeypatch):
    # Each learner a unix user (the hub's local spawner): the inbound folder is writable by all, so
    # its owner, not its name, says who submitted it.
    import grader.classroom.intake.identity as identity

    root, exchange = course(tmp_path, "")
    service = Service(root, exchange, pool, check_owner=True)
    submit(exchange, "ada", samples.released(CHAPTER))  # "ada" in the name, written by mallory
    monkeypatch.setattr(identity, "owner_of",
                        lambda path: "mallory" if "ada+" in path.name else path.name.split("+")[0])
    submit(exchange, "ben", samples.reference(CHAPTER))
    graded = service.step()
    assert [e.student for e in graded] == ["ben"]
    [forged] = service.ledger.of("ada")
    assert forged.status == REFUSED and "the unix user mallory wrote it" in forged.reason


def test_a_learner_name_that_would_leave_the_course_directory_is_refused(tmp_path, pool):
    root, exchange = course(tmp_path, "")
    service = Service(root, exchange, pool)
    submit(exchange, "..", samples.reference(CHAPTER))  # submitted/../02_self_attention is the course dir's
    submit(exchange, "-rf", samples.reference(CHAPTER))
    assert service.step() == []
    assert {e.status for e in service.ledger.of()} == {REFUSED}
    assert not (root / CHAPTER.assignment).exists()


def test_a_notebook_linked_to_the_class_solutions_is_refused(tmp_path, pool):
    # A learner's submission folder holding a link to the instructor's source notebook (solutions
    # in place), which the grading user can read and the learner cannot: graded, it would score full
    # marks and put the solutions in the learner's feedback.
    from grader.coursedir import CourseDir

    root, exchange = course(tmp_path, "")
    CourseDir(root, [CHAPTER])
    solutions = root / "source" / CHAPTER.assignment / CHAPTER.notebook_name
    folder = submit(exchange, "ada", samples.released(CHAPTER))
    (folder / CHAPTER.notebook_name).unlink()
    (folder / CHAPTER.notebook_name).symlink_to(solutions)
    assert Service(root, exchange, pool).step() == []
    [entry] = Ledger(root).of("ada")
    assert entry.status == REFUSED and "links" in entry.reason
    assert not (root / "submitted" / "ada").exists()


def test_the_time_limit_is_fitted_to_the_chapters_reference():
    from grader.classroom.policy.timelimit import DEFAULT_SECONDS, FLOOR_SECONDS, fitted

    assert fitted(SubmitPolicy(), 2.0, 1800) == FLOOR_SECONDS  # a fast chapter: the floor
    assert fitted(SubmitPolicy(time_limit_factor=4), 30.0, 1800) == 120
    assert fitted(SubmitPolicy(), None, 1800) == DEFAULT_SECONDS == 300  # not measured yet: minutes, not half an hour
    assert fitted(SubmitPolicy(), None, 120) == 120  # never over the pool's own limit
    assert fitted(SubmitPolicy(time_limit_seconds=20.0), 30.0, 1800) == 20
    policies = parse_on_submit({"chapters": ["02"], "time_limit_factor": 3, "per_hour": 4}, "t")
    assert policies[CHAPTER.assignment].time_limit_factor == 3 and policies[CHAPTER.assignment].per_hour == 4
    with pytest.raises(ValueError, match="per_hour: 0"):
        parse_on_submit({"per_hour": 0}, "t")

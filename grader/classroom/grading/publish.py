"""A hand grade published in one step: after a hand grade in Formgrader, an accepted regrade request or a
regrade, the learner's feedback and grades.csv show the new total after one action (guides/teaching.md).

Every feedback page carries a stamp, the state of the gradebook it shows (grader.classroom.grades.total.states:
each grade, comment and the late share, hashed; grader.classroom.grading.recording.stamp). A page whose stamp is
not the gradebook's state now is out of date. Two ways it is brought up to date:

- the grading service (grader.classroom.onsubmit.service) each round: `Publisher.round` notices the gradebook
  changed, regenerates those learners' feedback (settling the late penalty in the gradebook: Formgrader's
  views have it), rewrites grades.csv, and re-releases the feedback of learners it graded (the exchange's
  copy, nbgrader's Fetch Feedback, and the attempt's copy its Grading page links to);
- without the service, Formgrader's **Generate feedback** (`nbgrader generate_feedback`, no `--force`):
  the course directory's nbgrader_config.py calls `install`, so nbgrader's converter is `FeedbackAsGraded`,
  which regenerates the pages whose grades changed (stock nbgrader skips any page that exists) and
  rewrites grades.csv. `install` also has Formgrader's lists of scores take the late penalty off, as every
  other view does.
"""
from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from nbgrader.converters import GenerateFeedback

from grader.chapters import find_chapter
from grader.classroom import locks
from grader.classroom.grades.export import write_course_csv
from grader.classroom.grades.total import late_policy, states
from grader.classroom.grading.recording import feedback_and_export, nbgrader_api
from grader.classroom.ledger import GRADED, GRADING, QUEUED, STATE_DIR
from grader.coursedir import CourseDir, database_of

STAMP = re.compile(rb'<meta name="grader-gradebook" content="([0-9a-f]+)">')
UNSTAMPED_SECONDS = 10.0  # a gradebook with no file to watch (PostgreSQL): compared this often
# Learners' chapters regenerated per round (a term's pages made before their stamp, or a late policy changed,
# make every page out of date at once): the rest next round, so submissions are graded in between.
PER_ROUND = 20


def stamp_of(page: Path) -> str | None:
    """The gradebook state a feedback page shows (its stamp is in the first bytes of <head>), or None."""
    try:
        with open(page, "rb") as handle:
            found = STAMP.search(handle.read(4096))
    except OSError:
        return None
    return found[1].decode() if found else None


def out_of_date(gradebook, root: Path, late=None) -> list[tuple[str, str]]:
    """(student, assignment) of every feedback page in `root`/feedback whose stamp is not the gradebook's state."""
    now = states(gradebook, late)
    found = set()
    for page in sorted((root / "feedback").glob("*/*/*.html")):
        key = (page.parent.parent.name, page.parent.name)
        if key in now and stamp_of(page) != now[key]:
            found.add(key)
    return sorted(found)


class FeedbackAsGraded(GenerateFeedback):
    """nbgrader's generate_feedback (its command, Formgrader's button) that regenerates an existing page whose
    grades changed since it was made, not only with --force, and rewrites grades.csv after."""

    def init_destination(self, assignment_id: str, student_id: str) -> bool:
        pages = sorted(Path(self._format_dest(assignment_id, student_id)).glob("*.html"))
        excluded = student_id in (self.coursedir.student_id_exclude or "").split(",")
        if self.force or excluded or not pages:
            return super().init_destination(assignment_id, student_id)
        from nbgrader.api import Gradebook

        with Gradebook(self.coursedir.db_url) as gb:
            now = states(gb, late_policy(self.coursedir.root), student_id).get((student_id, assignment_id))
        if now is None or all(stamp_of(page) == now for page in pages):
            return super().init_destination(assignment_id, student_id)
        self.log.warning("Updating feedback whose grades changed: %s", pages[0].parent)
        for page in pages:
            page.unlink()
        return True

    def start(self) -> None:
        super().start()
        from nbgrader.api import Gradebook

        with Gradebook(self.coursedir.db_url) as gb:
            write_course_csv(gb, Path(self.coursedir.root) / "grades.csv", late_policy(self.coursedir.root))


def _less(score: float, penalty: float) -> float:
    return round(max(0.0, score - penalty), 3)


def _less_penalty(listing, penalties):
    """One of the gradebook's listings for Formgrader, each score less the late penalty settled in the gradebook."""
    def listed(gradebook, *args):
        rows = listing(gradebook, *args)
        taken = penalties(gradebook, *args)
        for row in rows:
            row["score"] = _less(row["score"], taken.get(row.get("student", row.get("id")), 0.0))
        return rows

    listed.less_penalty = True
    return listed


def install() -> None:
    """In this process (the course directory's nbgrader_config.py calls it; nbgrader names these in code, not
    in configuration): nbgrader's generate_feedback is FeedbackAsGraded, and Formgrader's lists of scores
    (Manage Submissions, Manage Students, a notebook's submissions) show the total the learner sees, less the
    late penalty (stock Formgrader adds the grades up and leaves the penalty out)."""
    import nbgrader.apps.api
    import nbgrader.apps.generatefeedbackapp
    from nbgrader.api import Gradebook

    nbgrader.apps.api.GenerateFeedback = FeedbackAsGraded
    nbgrader.apps.generatefeedbackapp.GenerateFeedback = FeedbackAsGraded
    if getattr(Gradebook.submission_dicts, "less_penalty", False):
        return
    Gradebook.submission_dicts = _less_penalty(Gradebook.submission_dicts, lambda gb, assignment: {
        s.student.id: s.late_submission_penalty for s in gb.find_assignment(assignment).submissions})
    Gradebook.notebook_submission_dicts = _less_penalty(Gradebook.notebook_submission_dicts, lambda gb, nb, a: {
        s.student.id: s.late_submission_penalty or 0.0 for s in gb.find_notebook(nb, a).submissions})
    Gradebook.student_dicts = _less_penalty(Gradebook.student_dicts, lambda gb: {
        s.id: sum(sub.late_submission_penalty for sub in s.submissions) for s in gb.students})
    nbgrader.apps.api.NbGraderAPI.get_submission = _one_less_penalty(nbgrader.apps.api.NbGraderAPI.get_submission)


def _one_less_penalty(get_submission):
    """Formgrader's one submission (a learner's page on Manage Students lists each chapter's), less the late penalty."""
    def found(api, assignment_id, student_id, *args, **kwargs):
        submission = get_submission(api, assignment_id, student_id, *args, **kwargs)
        if submission and submission.get("id") is not None:  # graded: the gradebook's submission, penalty settled
            with api.gradebook as gb:
                taken = gb.find_submission(assignment_id, student_id).late_submission_penalty or 0.0
            submission["score"] = _less(submission["score"], taken)
        return submission

    return found


class Publisher:
    """The grading service's step: feedback brought up to date with the gradebook, once per round."""

    def __init__(self, service):
        self.service = service
        self.seen = None  # the gradebook's file and late policy when last compared

    def _watched(self, term):
        path = locks.sqlite_path(database_of(self.service.course_dir))
        if path is None:
            return time.monotonic() // UNSTAMPED_SECONDS, repr(term.policy)
        try:
            found = path.stat()
        except OSError:
            return None, repr(term.policy)
        return found.st_mtime_ns, found.st_size, repr(term.policy)

    def round(self) -> list[tuple[str, str]]:
        """Republish what the gradebook changed since the last round; the (student, assignment) republished.
        Never stops the round: a failure is logged and tried again next round."""
        term = self.service.term()
        if term is None:
            return []
        watched = self._watched(term)
        if watched == self.seen:
            self._to_lms(term, changed=False)
            return []
        try:
            done, finished = self.publish(term)
        except Exception as err:  # noqa: BLE001 - the service goes on; the next round compares again
            print(f"grading service: feedback not republished: {type(err).__name__}: {err}", flush=True)
            return []
        if finished:  # settling writes the gradebook: the next round compares once more and finds nothing
            self.seen = watched
        self._to_lms(term, changed=True)
        return done

    def _to_lms(self, term, changed: bool) -> None:
        """The LMS's gradebook, where the class is in one (LTI AGS, grader.classroom.lti.outbox): the totals the
        pages just published, queued when the gradebook `changed`; queued ones whose time has come sent."""
        # lazy: keeps the class's layers at six (tests/test_layout.py)
        from grader.classroom.lti.outbox import post_round

        busy = {(e.student, e.assignment) for e in self.service.ledger.of() if e.status in (QUEUED, GRADING)}
        try:
            post_round(self.service.course_dir, term.policy, changed, busy=busy)
        except Exception as err:  # noqa: BLE001 - the queue is kept; the next round tries again
            print(f"grading service: scores not sent to the LMS: {type(err).__name__}: {err}", flush=True)

    def publish(self, term) -> tuple[list[tuple[str, str]], bool]:
        """Up to PER_ROUND out-of-date pages regenerated, and the counted attempts' feedback released again
        where it changed; what was republished, and whether nothing is left to do."""
        from nbgrader.api import Gradebook

        root, service = self.service.course_dir, self.service
        url = database_of(root)
        with locks.locked(root), locks.shared(url):
            with Gradebook(url) as gb:
                stale = out_of_date(gb, root, term.policy)
            finished, stale = len(stale) <= PER_ROUND, stale[:PER_ROUND]
            counted = {(e.student, e.assignment): e for e in service.ledger.of() if e.counted and e.status == GRADED}
            kinds: dict[tuple[str, bool], list[str]] = {}
            for student, assignment in stale:
                entry = counted.get((student, assignment))
                kinds.setdefault((assignment, bool(entry and entry.score_only)), []).append(student)
            for (assignment, score_only), students in kinds.items():
                chapter = find_chapter(assignment)
                feedback_and_export(CourseDir(root, [chapter], timeout=service.timeout), [chapter], students,
                                    score_only=score_only)
            released = [key for key, entry in counted.items() if entry.feedback and self._release(entry)]
        return sorted(set(stale) | set(released)), finished

    def _release(self, entry) -> bool:
        """The counted attempt's feedback released again when the course directory's page is newer than the
        copy its Grading page links to (nbgrader's release_feedback: the exchange's copy); whether it was."""
        root = self.service.course_dir
        chapter = find_chapter(entry.assignment)
        page = root / "feedback" / entry.student / entry.assignment / f"{chapter.name}.html"
        kept = root / STATE_DIR / "feedback" / entry.key / page.name
        if not page.is_file() or stamp_of(page) is None or stamp_of(page) == stamp_of(kept):
            return False
        api = nbgrader_api(CourseDir(root, [chapter], timeout=self.service.timeout), exchange=self.service.exchange)
        outcome = api.release_feedback(entry.assignment, entry.student)
        if not outcome.get("success"):
            print(f"grading service: feedback of {entry.id} not released again: {(outcome.get('error') or '')[-300:]}",
                  flush=True)
            return False
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(page, kept)
        return True

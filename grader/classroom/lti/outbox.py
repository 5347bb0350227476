"""Each chapter's one total posted to the LMS gradebook (LTI Advantage Assignment and Grade Services).

The grading service's publishing step (grader.classroom.grading.publish.Publisher.round) calls `post_round` every
round: when the gradebook changed, each learner's total (grader.classroom.grades.total: automatic points, hand
grades, the late penalty; written answers still to grade make it "PendingManual", not a final 0) that differs
from what the LMS was last sent is queued; then whatever is due is sent. A post that fails stays in the queue
(the course directory's on-submit/lti-outbox.json) with its error, is tried again later (waiting longer each
time, at most an hour) and is shown on the class page: nothing is dropped. A learner the gate for identity
refuses, or one the LMS does not know (no `sub`), is never posted.
"""
from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from grader.chapters import find_chapter
from grader.classroom.grades.total import course_totals
from grader.classroom.intake.identity import admit_student
from grader.classroom.ledger import STATE_DIR
from grader.classroom.lti.context import load_context
from grader.classroom.lti.platform import load_platform

OUTBOX = "lti-outbox.json"
MAX_WAIT = 3600  # seconds between tries of a failing post, at most


def subs_of(folder: Path, issuer: str) -> dict[str, str]:
    """hub user -> the LMS's stable user id, from the roster (NRPS) and accounts.json."""
    found = {}
    for name in ("roster.json", "accounts.json"):
        try:
            data = json.loads((folder / name).read_text())
        except (OSError, ValueError):
            continue
        if name == "roster.json":
            for member in data.get("members", []):
                found[member["hub_user"]] = member["sub"]
        else:
            found.update({str(hub): str(sub) for sub, hub in data.items()})
    return found


def wanted(total, sub: str, stamp: str) -> dict:
    """The score the LMS should show for a chapter total."""
    return {"sub": sub, "score": total.score, "max_score": total.max_score, "timestamp": stamp,
            "progress": "FullyGraded" if total.complete else "PendingManual"}


class Outbox:
    """The queue of scores for the LMS, kept in the course directory."""

    def __init__(self, course_dir: Path):
        self.path = Path(course_dir) / STATE_DIR / OUTBOX
        try:
            self.entries = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_name(OUTBOX + ".new")
        temp.write_text(json.dumps(self.entries, indent=1, sort_keys=True))
        os.replace(temp, self.path)

    def update(self, totals: dict, subs: dict[str, str], now: float, busy=frozenset()) -> int:
        """Queue each total that differs from what the LMS was last sent; how many were queued. A total being
        graded (`busy`: (student, assignment) of attempts queued or grading) waits, marked deferred: nbgrader's
        gradebook has its submission, every test cell still 0, from the staging until the recording."""
        stamp = datetime.fromtimestamp(now, timezone.utc).isoformat()
        queued = 0
        for (student, assignment), total in sorted(totals.items()):
            if total is None or student not in subs or not _admitted(student):
                continue
            entry = self.entries.setdefault(f"{student}/{assignment}", {"sent": None, "tries": 0})
            entry["deferred"] = (student, assignment) in busy
            if entry["deferred"]:
                continue
            want = wanted(total, subs[student], stamp)
            last = entry.get("want") or entry["sent"] or {}
            if all(last.get(k) == want[k] for k in ("sub", "score", "max_score", "progress")):
                continue
            entry.update(want=want, due=now, tries=0, error=None)
            queued += 1
        return queued

    def flush(self, send, now: float) -> int:
        """Send every due score with `send(assignment, want)`; how many were sent. A failure stays queued."""
        sent = 0
        for key, entry in sorted(self.entries.items()):
            want = entry.get("want")
            if not want or entry.get("due", 0) > now:
                continue
            student, assignment = key.split("/", 1)
            if not _admitted(student):  # left the class since it was queued: never posted
                entry["error"] = f"{student} is not a learner of this class: not sent"
                continue
            try:
                send(assignment, want)
            except Exception as err:  # noqa: BLE001 - kept and tried again: the LMS being down loses nothing
                entry["tries"] = entry.get("tries", 0) + 1
                entry["error"] = f"{type(err).__name__}: {str(err)[:300]}"
                entry["due"] = now + min(MAX_WAIT, 30 * 2 ** entry["tries"])
                continue
            entry.update(sent=want, want=None, error=None, tries=0)
            sent += 1
        return sent

    def waiting(self) -> list[tuple[str, dict]]:
        """(student/chapter, entry) of every score not yet accepted by the LMS, for the class page."""
        return [(key, entry) for key, entry in sorted(self.entries.items()) if entry.get("want")]


def _admitted(student: str) -> bool:
    try:
        admit_student(student)
    except ValueError:
        return False
    return True


class AgsSender:
    """pylti1p3's Assignment and Grade Services client: each chapter a line item, the one its LMS link came with
    (context.json's chapter_lineitems), else one tagged with the chapter, found or created once; then the
    learner's score posted to it. pylti1p3 signs the token request with the tool's key."""

    def __init__(self, platform, context: dict):
        from pylti1p3.assignments_grades import AssignmentsGradesService
        from pylti1p3.lineitem import LineItem
        from pylti1p3.service_connector import ServiceConnector

        if not context.get("lineitems") and not context.get("chapter_lineitems"):
            raise ValueError("no LMS grade service yet: launch the tool once from the LMS course")
        self.ags = AssignmentsGradesService(ServiceConnector(platform.registration()),
                                            {"scope": context.get("scope", []), "lineitems": context.get("lineitems")})
        linked = context.get("chapter_lineitems", {})
        self.lineitems = {chapter: LineItem({"id": url}) for chapter, url in linked.items()}

    def __call__(self, assignment: str, want: dict) -> None:
        from pylti1p3.grade import Grade
        from pylti1p3.lineitem import LineItem

        if assignment not in self.lineitems:
            chapter = find_chapter(assignment)
            item = (LineItem().set_tag(assignment).set_resource_id(assignment)
                    .set_label(chapter.assignment.replace("_", " ")).set_score_maximum(want["max_score"]))
            self.lineitems[assignment] = self.ags.find_or_create_lineitem(item)
        grade = (Grade().set_user_id(want["sub"]).set_score_given(want["score"])
                 .set_score_maximum(want["max_score"]).set_timestamp(want["timestamp"])
                 .set_activity_progress("Completed").set_grading_progress(want["progress"]))
        self.ags.put_grade(grade, self.lineitems[assignment])


def post_round(course_dir: Path, late, changed: bool, now: float | None = None, send=None,
               busy=frozenset()) -> Outbox | None:
    """The publishing step's LMS part: totals queued when the gradebook `changed` (or one was deferred while it
    was being graded: `busy`, Outbox.update), then the due ones sent. None when the class is not in an LMS
    ($COURSE_LTI unset)."""
    platform = load_platform()
    if platform is None:
        return None
    now = time.time() if now is None else now
    outbox = Outbox(course_dir)
    if changed or any(entry.get("deferred") for entry in outbox.entries.values()):
        outbox.update(course_totals(course_dir, late), subs_of(platform.folder, platform.issuer), now, set(busy))
    if any(entry.get("want") and entry.get("due", 0) <= now for entry in outbox.entries.values()):
        try:
            send = send or AgsSender(platform, load_context(platform.folder))
        except ValueError as err:
            for entry in outbox.entries.values():
                if entry.get("want"):
                    entry["error"] = str(err)
        else:
            outbox.flush(send, now)
    outbox.save()
    return outbox


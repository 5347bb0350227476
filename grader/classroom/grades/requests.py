"""Regrade requests: a learner asks about one check or one written answer of a graded attempt, with a
note; the course's staff (instructors and graders, `grader serve --instructor/--grader`) answer it.

Accepted, with points: the item's hand score in nbgrader's gradebook (`manual_score`, as a hand grade in
Formgrader sets it), the late penalty settled again and grades.csv rewritten, so the one total
(grader.classroom.grades.total) the pages, the CSV and the LMS export read has it. Accepted without points: the
answer alone (the staff changed it elsewhere, or will `grader regrade`). Declined: with a reason.

Everything is kept in one append-only log, `<course dir>/on-submit/requests.jsonl`: one JSON line per
question ("asked") and per answer ("answered"), each with who (the hub's login, never a form field), when
and why; a request's state is the log read in order. A learner has at most term.toml's `[requests]
per_chapter` (default 3) requests per chapter, open and answered together.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grader.boundary.score import shown
from grader.chapters import find_chapter
from grader.classroom import locks
from grader.classroom.grades.export import write_course_csv
from grader.classroom.grades.handgrades import FOLDER, keep_points
from grader.classroom.grades.total import settle
from grader.classroom.ledger import GRADED, STATE_DIR, Entry, now
from grader.classroom.policy.submitpolicy import PER_CHAPTER

LOG = "requests.jsonl"
NOTE_LIMIT = 2000  # characters of a learner's note, and of a staff member's reason
OPEN, ACCEPTED, DECLINED = "open", "accepted", "declined"
DECISIONS = {"accept": ACCEPTED, "decline": DECLINED}


@dataclass
class Request:
    id: str
    student: str
    assignment: str
    key: str  # the ledger entry asked about (grader.classroom.ledger.Entry.key)
    item: str  # a check's name (its grade_id) or a written answer's grade_id
    note: str
    asked_at: str
    status: str = OPEN
    reason: str = ""
    answered_by: str = ""
    points: float | None = None  # the hand score an accepted request set (None: no score changed)
    answered_at: str = ""
    changes: list = field(default_factory=list)  # what an answer changed in the gradebook

    def as_json(self) -> dict:
        """The request as `api/requests` returns it."""
        return {k: v for k, v in asdict(self).items() if k != "changes"}


def items_of(entry: Entry, total=None) -> list[str]:
    """What a learner may ask about in a graded attempt: each check, each written answer (the gradebook's
    total knows them for the attempt it holds; any other attempt, its pending ones)."""
    if entry.status != GRADED:
        return []
    names = [str(c.get("name", "")) for c in entry.checks] + list(entry.pending)
    if total is not None and entry.counted:
        names += [p.name for p in total.parts]
    return list(dict.fromkeys(n for n in names if n))


def _text(value: str, what: str, required: bool) -> str:
    text = (value or "").replace("\r\n", "\n").strip()
    if len(text) > NOTE_LIMIT:
        raise ValueError(shown(f"{what} is too long: at most {NOTE_LIMIT} characters"))
    if required and not text:
        raise ValueError(shown(f"{what} is empty: say what should be looked at again"))
    return text


class Requests:
    """The course's regrade requests, read from and appended to the log."""

    def __init__(self, course_dir: str | Path):
        self.path = Path(course_dir) / STATE_DIR / LOG

    @contextlib.contextmanager
    def _locked(self):
        """One writer at a time (the service's threads, a second process): a check and its append together."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def _append(self, event: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as log:
            log.write(json.dumps(event, ensure_ascii=False) + "\n")
            log.flush()
            os.fsync(log.fileno())

    def all(self) -> list[Request]:
        """Every request, oldest first (a line that does not read is skipped: the log is appended to only)."""
        found: dict[str, Request] = {}
        if not self.path.is_file():
            return []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
                if event["event"] == "asked":
                    found[event["id"]] = Request(**{k: event[k] for k in ("id", "student", "assignment", "key",
                                                                         "item", "note", "asked_at")})
                elif event["event"] == "answered" and event["id"] in found:
                    request = found[event["id"]]
                    request.status, request.reason = event["status"], event["reason"]
                    request.answered_by, request.points = event["by"], event["points"]
                    request.answered_at, request.changes = event["at"], event.get("changes", [])
            except (ValueError, KeyError, TypeError):
                continue
        return list(found.values())

    def of(self, student: str | None = None) -> list[Request]:
        return [r for r in self.all() if student is None or r.student == student]

    def ask(self, entry: Entry, student: str, item: str, note: str, per_chapter: int = PER_CHAPTER,
            total=None) -> Request:
        """A learner's request about `item` of their graded attempt `entry`; a ValueError says why not."""
        if entry.student != student:
            raise LookupError("not this learner's attempt")  # the page answers 404: it does not exist for them
        if item not in items_of(entry, total):
            raise ValueError(shown("no such check or written answer in this graded attempt"))
        note = _text(note, shown("the note"), required=True)
        with self._locked():
            made = len([r for r in self.of(student) if r.assignment == entry.assignment])
            if made >= per_chapter:
                raise ValueError(shown(f"at most {per_chapter} regrade requests per chapter, and you have made {made}"))
            request = Request(secrets.token_hex(8), student, entry.assignment, entry.key, item, note,
                              now().isoformat(timespec="seconds"))
            self._append({"event": "asked", **request.as_json(), "by": student})
        return request

    def answer(self, request_id: str, decision: str, reason: str, by: str, points: float | None = None,
               apply=None) -> Request:
        """A staff member's answer. `apply(request, points) -> changes`: the hand score, for an accepted
        request with points (it raises ValueError when the gradebook cannot take it: nothing is logged)."""
        if decision not in DECISIONS:
            raise ValueError(f"decision: {decision!r}; choose accept or decline")
        reason = _text(reason, "the reason", required=decision == "decline")
        if points is not None and decision != "accept":
            raise ValueError("points go with an accepted request only")
        with self._locked():
            request = next((r for r in self.all() if r.id == request_id), None)
            if request is None:
                raise LookupError(f"no request {request_id}")
            if request.status != OPEN:
                raise ValueError(f"request {request_id} was answered already ({request.status} by "
                                 f"{request.answered_by})")
            changes = apply(request, points) if points is not None and apply is not None else []
            request.status, request.reason, request.answered_by = DECISIONS[decision], reason, by
            request.points, request.answered_at, request.changes = points, now().isoformat(timespec="seconds"), changes
            self._append({"event": "answered", "id": request.id, "status": request.status, "reason": reason,
                          "by": by, "points": points, "at": request.answered_at, "changes": changes})
        return request


def hand_score(course_dir: str | Path, student: str, assignment: str, item: str, points: float,
               late=None, request: str = "") -> list[dict]:
    """`points` as the hand score of `item` in the learner's gradebook submission (nbgrader's manual_score,
    as Formgrader's hand grade), the late penalty settled and grades.csv rewritten; what changed. A check's
    points belong to the code the gradebook holds now (grader.classroom.grades.handgrades.keep_points): the next
    autograde of other code takes them off; a written answer's belong to its text, as any hand grade."""
    from nbgrader.api import Gradebook, MissingEntry

    from grader.coursedir import database_of  # lazy: coursedir imports recording, which imports the class

    chapter = find_chapter(assignment)
    url = database_of(course_dir)
    with locks.shared(url), Gradebook(url) as gb:
        try:
            grade = gb.find_grade(item, chapter.name, assignment, student)
        except MissingEntry:
            raise ValueError(f"{student} has no graded {item} in {assignment} in the gradebook") from None
        if not 0 <= points <= float(grade.max_score):
            raise ValueError(f"points: {points:g} is not between 0 and {float(grade.max_score):g} for {item}")
        old = grade.manual_score if grade.manual_score is not None else grade.auto_score
        grade.manual_score, grade.needs_manual_grade = float(points), False
        gb.db.commit()
        if grade.cell.cell_type == "code":
            keep_points(Path(course_dir) / FOLDER, student, assignment, item, float(points), request)
        total = settle(gb, student, assignment, late)
        write_course_csv(gb, Path(course_dir) / "grades.csv", late)
    return [{"item": item, "old": old, "new": float(points), "total": total.score if total else None}]


FORMGRADER = "services/formgrader/formgrader/submissions/{id}/?index=0"  # the shared Formgrader, from the hub's root
SAID_LIMIT = 600  # characters of a check's message or a written answer shown beside a request


@dataclass
class Context:
    """What staff need beside a request: the item's score now, the check's message or the learner's answer
    (a learner's words, shown as text), and the submission in Formgrader (a path from the hub's root)."""
    score: str = ""
    said: str = ""
    formgrader: str = ""


def _answer_text(course_dir: Path, student: str, assignment: str, item: str) -> str:
    """A written answer as the gradebook's attempt holds it (the autograded notebook), else ""."""
    path = Path(course_dir) / "autograded" / student / assignment / find_chapter(assignment).notebook_name
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        source = next(c["source"] for c in cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == item)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, StopIteration):
        return ""
    return "".join(source) if isinstance(source, list) else str(source)


def _submission_ids(course_dir: Path, wanted: set) -> dict:
    """(student, assignment) -> the gradebook's submitted notebook id (Formgrader's submission page)."""
    from nbgrader.api import Gradebook, MissingEntry

    from grader.coursedir import database_of  # lazy: coursedir imports recording, which imports the class

    url = database_of(course_dir)
    path = locks.sqlite_path(url)
    if path is not None and not path.is_file():  # nothing graded yet
        return {}
    found = {}
    with Gradebook(url) as gb:
        for student, assignment in wanted:
            with contextlib.suppress(MissingEntry, ValueError):
                notebook = find_chapter(assignment).name
                found[(student, assignment)] = gb.find_submission_notebook(notebook, assignment, student).id
    return found


def contexts(course_dir: str | Path, requests: list[Request], entries: list[Entry], totals: dict) -> dict:
    """request id -> Context, from the ledger's entries (the attempt asked about), the gradebook's totals
    ((student, assignment) -> grader.classroom.grades.total.Total) and the autograded notebooks."""
    by_key = {e.key: e for e in entries}
    ids = _submission_ids(Path(course_dir), {(r.student, r.assignment) for r in requests}) if requests else {}
    found = {}
    for r in requests:
        entry, total = by_key.get(r.key), totals.get((r.student, r.assignment))
        check = next((c for c in (entry.checks if entry else []) if c.get("name") == r.item), None)
        part = next((p for p in total.parts if p.name == r.item), None) if total and entry and entry.counted \
            else None
        if part is not None:
            score = "pending" if part.score is None else f"{part.score:g} / {part.max_score:g}"
        elif check is not None:
            score = f"{float(check.get('score') or 0):g} / {float(check.get('max_score') or 0):g}"
        else:
            score = ""
        if check is not None:
            said = str(check.get("error") or "passed")
        else:
            said = _answer_text(course_dir, r.student, r.assignment, r.item) if entry and entry.counted else ""
        key = (r.student, r.assignment)
        found[r.id] = Context(score, said[:SAID_LIMIT], FORMGRADER.format(id=ids[key]) if key in ids else "")
    return found

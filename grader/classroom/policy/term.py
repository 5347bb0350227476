"""The instructor's term: each chapter's due date, the late policy and per-student extensions.

The course's config is a TOML file (`term.toml` in the course directory, or `--term FILE`, which is
then copied there with its extensions file, so every later run applies the same policy):

    extensions = "extensions.csv"      # optional; student,chapter,due (relative to this file)
    [due]
    "02" = 2026-11-20T23:59:00Z        # a chapter (number, name or assignment) and its due date
    [late]
    per_day = 10                       # percent of the raw score off per day late, or part of one
    cap = 50                           # percent off at most
    zero_after_days = 7                # later than this: zero
    grace_minutes = 15                 # this late counts as on time
    [on_submit]                        # grading on submit (grader.classroom.policy.submitpolicy)
    chapters = ["02"]
    [requests]                         # regrade requests (grader.classroom.grades.requests)
    per_chapter = 3
    [accommodations.learner7]          # one learner's own policy (grader.classroom.policy.accommodations)
    "02" = { attempts = 10, due = 2026-12-01T23:59:00Z }
    [graders]                          # the teaching assistants (`grader serve --grader`)
    see_accommodations = true          # see each accommodation's terms (default: only that there is one)

The penalty goes through nbgrader's own mechanism: the assignment's due date and each learner's
extension are set in the gradebook, the submission time is the gradebook submission's timestamp
(and the `timestamp.txt` nbgrader's autograde reads), and nbgrader's AssignLatePenalties asks
`LatePenalty` below. nbgrader resets the penalty and recomputes it from the raw score on every
autograde, so re-running never stacks it; its feedback and CSV export show raw score and penalty.
A submission whose time is unknown is graded as on time, and its notes say so (never an mtime).
"""
from __future__ import annotations

import csv
import math
import shutil
import sys
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import tomllib
from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float

from grader.chapters import find_chapter
from grader.classroom.policy import accommodations as accommodations_of
from grader.classroom.policy.submitpolicy import PER_CHAPTER, SubmitPolicy, parse_on_submit, parse_requests
from grader.classroom.submissions import TIMESTAMP_FILE, write_timestamp

TERM_FILE = "term.toml"
DAY = 86400.0


def parse_time(value, where: str) -> datetime:
    """A TOML datetime or an ISO 8601 string, as an aware UTC datetime (no zone: UTC)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{where}: {value!r} is not a date and time (e.g. 2026-11-20T23:59:00Z)") from None
    if not isinstance(value, datetime):
        raise ValueError(f"{where}: {value!r} is not a date and time (e.g. 2026-11-20T23:59:00Z)")
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _naive_utc(moment: datetime) -> datetime:
    """nbgrader's gradebook keeps naive UTC datetimes."""
    return moment.astimezone(timezone.utc).replace(tzinfo=None)


@dataclass(frozen=True)
class LatePolicy:
    per_day: float = 0.0  # percent
    cap: float = 100.0  # percent
    zero_after_days: float | None = None
    grace_minutes: float = 0.0

    def fraction(self, seconds_late: float) -> float:
        """The share of the raw score taken off for a submission this many seconds late."""
        if seconds_late <= self.grace_minutes * 60:
            return 0.0
        if self.zero_after_days is not None and seconds_late > self.zero_after_days * DAY:
            return 1.0
        return min(self.per_day * math.ceil(seconds_late / DAY), self.cap) / 100


class LatePenalty(LateSubmissionPlugin):
    """nbgrader's late-submission plugin, with the course's policy (set from term.toml)."""

    per_day = Float(0.0).tag(config=True)
    cap = Float(100.0).tag(config=True)
    zero_after_days = Float(-1.0, help="negative: never").tag(config=True)
    grace_minutes = Float(0.0).tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float:
        policy = LatePolicy(self.per_day, self.cap, self.zero_after_days if self.zero_after_days >= 0 else None,
                            self.grace_minutes)
        return round(score * policy.fraction(total_seconds_late), 3)


@dataclass
class Term:
    due: dict[str, datetime] = field(default_factory=dict)  # assignment -> due date
    policy: LatePolicy | None = None
    extensions: dict[tuple[str, str], datetime] = field(default_factory=dict)  # (student, assignment) -> due
    submitted_at: datetime | None = None  # --submitted-at: for submissions with no known time
    source: Path | None = None
    on_submit: dict[str, SubmitPolicy] = field(default_factory=dict)  # assignment -> grading on submit
    accommodations: dict = field(default_factory=dict)  # (student, assignment) -> accommodations.Accommodation
    requests_per_chapter: int = PER_CHAPTER  # regrade requests a learner may make per chapter
    graders_see_accommodations: bool = False  # [graders] see_accommodations: often confidential, so no by default

    def submit_policy(self, assignment: str, student: str | None = None) -> SubmitPolicy:
        """The chapter's on-submit policy; given a learner, with their accommodation."""
        return accommodations_of.policy_for(self.on_submit.get(assignment, SubmitPolicy()),
                                            self.accommodations.get((student, assignment)))

    def due_for(self, student: str, assignment: str) -> datetime | None:
        """The learner's due date for a chapter: their extension, else the chapter's (None: no due date)."""
        return self.extensions.get((student, assignment), self.due.get(assignment))

    def check_extensions(self, known: set[str]) -> None:
        """A ValueError naming each extension's learner who is not in the class (`known`), with the class's
        nearest names: a typo would silently grant nothing, so grading stops, as for an accommodation."""
        import difflib

        strangers = sorted({(student, assignment) for student, assignment in self.extensions if student not in known})
        if not strangers:
            return
        named = []
        for student, assignment in strangers:
            near = difflib.get_close_matches(student, sorted(known), n=3, cutoff=0.6)
            named.append(f"{student!r} ({assignment}" + (f"; near: {', '.join(near)})" if near else ")"))
        raise ValueError(f"{self.source or 'the term file'}: extensions for learner(s) not in this class: "
                         f"{', '.join(named)}. Correct the name in the extensions file (or add the learner: "
                         "`nbgrader db student add NAME`); nothing was graded")

    def configure(self, config) -> None:
        """Point nbgrader's AssignLatePenalties at the course's policy (no policy: no penalty)."""
        config.AssignLatePenalties.plugin_class = LatePenalty
        policy = self.policy or LatePolicy(per_day=0.0, cap=0.0)
        config.LatePenalty.per_day = float(policy.per_day)
        config.LatePenalty.cap = float(policy.cap)
        config.LatePenalty.zero_after_days = -1.0 if policy.zero_after_days is None else float(policy.zero_after_days)
        config.LatePenalty.grace_minutes = float(policy.grace_minutes)

    def fill_times(self, submissions) -> None:
        """The command line's time for submissions the exchange or the LMS gave none, said in the notes."""
        for sub in submissions:
            if sub.submitted_at is None and self.submitted_at is not None:
                sub.submitted_at = self.submitted_at
                sub.notes.append(f"submission time {self.submitted_at:%Y-%m-%d %H:%M UTC} from --submitted-at")

    def prepare(self, course, submissions) -> None:
        """Before nbgrader's autograde: due dates, each submission's time and extension in the gradebook."""
        from nbgrader.api import Gradebook

        with Gradebook(course.db_url) as gb, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SQLAlchemy's notes on nbgrader's sessions
            for assignment, due in self.due.items():
                if any(s.chapter.assignment == assignment for s in submissions):
                    gb.update_or_create_assignment(assignment, duedate=_naive_utc(due))
            for sub in submissions:
                self._prepare_one(gb, course, sub)

    def _prepare_one(self, gb, course, sub) -> None:
        assignment = sub.chapter.assignment
        gb.update_or_create_student(sub.student)
        record = gb.update_or_create_submission(assignment, sub.student)
        record.timestamp = _naive_utc(sub.submitted_at) if sub.submitted_at else None
        gb.db.commit()
        due = self.due.get(assignment)
        extended = self.extensions.get((sub.student, assignment))
        if due and extended:
            gb.grant_extension(assignment, sub.student, minutes=(extended - due).total_seconds() / 60)
        else:
            gb.grant_extension(assignment, sub.student)  # none: remove an earlier one
        stamp = course.root / "submitted" / sub.student / assignment / TIMESTAMP_FILE
        if sub.submitted_at:  # what nbgrader's autograde reads back into the gradebook
            write_timestamp(stamp, sub.submitted_at)
        else:
            stamp.unlink(missing_ok=True)
        note = self.lateness_note(sub.student, assignment, sub.submitted_at)
        if note:
            sub.notes.append(note)

    def lateness_note(self, student: str, assignment: str, submitted_at: datetime | None) -> str | None:
        due = self.extensions.get((student, assignment)) or self.due.get(assignment)
        if due is None or self.policy is None:
            return None
        if submitted_at is None:
            return ("no submission time known (no timestamp.txt, no LMS time, no --submitted-at): "
                    "graded as on time")
        late = (submitted_at - due).total_seconds()
        if late <= 0:
            return None
        how = "the extension" if (student, assignment) in self.extensions else "the due date"
        share = self.policy.fraction(late)
        return (f"submitted {timedelta(seconds=round(late))} after {how} ({due:%Y-%m-%d %H:%M UTC}): "
                + (f"late penalty {share:.0%} of the raw score" if share else "within the grace period"))


def load_term(course_dir: str | Path, path: str | Path | None = None, submitted_at: str | None = None) -> Term:
    """The term config (`path`, else the course directory's term.toml, else none) and the
    command line's submission time."""
    named = path is not None
    path = Path(path) if named else Path(course_dir) / TERM_FILE
    term = Term(submitted_at=parse_time(submitted_at, "--submitted-at") if submitted_at else None)
    if not path.is_file():
        if named:
            raise ValueError(f"{path}: no such term file")
        return term  # no term file: no due dates, no penalty
    try:
        config = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: not valid TOML: {err}") from None
    known = ("due", "late", "extensions", "on_submit", "requests", "accommodations", "graders")
    unknown = set(config) - set(known)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {sorted(unknown)}; known: {', '.join(known)}")
    term.source = path
    for key, value in config.get("due", {}).items():
        term.due[find_chapter(key).assignment] = parse_time(value, f"{path}: due.{key}")
    if "late" in config:
        term.policy = _policy(config["late"], path)
    if "extensions" in config:
        term.extensions = read_extensions(path.parent / config["extensions"], term.due)
    if "on_submit" in config:
        term.on_submit = parse_on_submit(config["on_submit"], str(path))
    if "requests" in config:
        term.requests_per_chapter = parse_requests(config["requests"], str(path))
    if "accommodations" in config:
        term.accommodations = accommodations_of.parse_accommodations(config["accommodations"], str(path), parse_time)
        accommodations_of.merge_due(term.accommodations, term.extensions, term.due, str(path))
        accommodations_of.check_roster(term.accommodations, accommodations_of.class_roster(course_dir), str(path))
    if "graders" in config:
        term.graders_see_accommodations = _graders(config["graders"], path)
    _keep_in(Path(course_dir), path, config.get("extensions"))
    return term


def _graders(table, path: Path) -> bool:
    """[graders]: whether the teaching assistants see each accommodation's terms."""
    if not isinstance(table, dict) or set(table) - {"see_accommodations"}:
        raise ValueError(f"{path}: [graders] takes see_accommodations = true or false only")
    shown = table.get("see_accommodations", False)
    if not isinstance(shown, bool):
        raise ValueError(f"{path}: graders.see_accommodations is true or false, not {shown!r}")
    return shown


WAITING = "waiting: the course's policy file has an error"


class PolicyFile:
    """term.toml as the running grading service reads it, anew each round: while it has an error the
    service waits (submissions keep their row, marked WAITING), the class page shows `problem`, and the
    log says it once, not every round. An extension for a name not in the class (the hub's learners, the
    gradebook's, and `learners()`: those who submitted) is such an error, as it is for autograde and regrade."""

    def __init__(self, course_dir: str | Path, path: str | Path | None = None, learners=lambda: set()):
        self.course_dir, self.path, self.problem, self.learners = course_dir, path, None, learners

    def current(self) -> Term | None:
        try:
            term = load_term(self.course_dir, self.path)
            if term.extensions:
                term.check_extensions(accommodations_of.class_roster(self.course_dir) | self.learners())
        except ValueError as err:
            if str(err) != self.problem:
                print(f"grading service: {err} (submissions wait until it is fixed)", flush=True)
            self.problem = str(err)
            return None
        if self.problem is not None:
            print("grading service: the term file is fixed; grading the waiting submissions", flush=True)
        self.problem = None
        return term


def _keep_in(course_dir: Path, path: Path, extensions: str | None) -> None:
    """A term file named on the command line is copied into the course directory (with its
    extensions file), so a later autograde or regrade there applies the same policy without it."""
    kept = course_dir / TERM_FILE
    if kept.exists() and kept.resolve() == path.resolve():
        return
    course_dir.mkdir(parents=True, exist_ok=True)
    if kept.is_file() and kept.read_bytes() != path.read_bytes():  # the course's policy changes for good: say so
        shutil.copyfile(kept, kept.with_name(TERM_FILE + ".previous"))
        print(f"note: {path} replaces the course's policy file {kept} for this and every later grading "
              f"(the previous one is kept as {kept.name}.previous)", file=sys.stderr)
    shutil.copyfile(path, kept)
    if extensions and not Path(extensions).is_absolute():
        target = course_dir / extensions
        if target.resolve() != (path.parent / extensions).resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path.parent / extensions, target)


def _policy(late: dict, path: Path) -> LatePolicy:
    known = {"per_day", "cap", "zero_after_days", "grace_minutes"}
    if set(late) - known:
        raise ValueError(f"{path}: unknown late key(s) {sorted(set(late) - known)}; known: {sorted(known)}")
    for key, value in late.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{path}: late.{key} must be a number >= 0, not {value!r}")
    if late.get("per_day", 0) > 100 or late.get("cap", 100) > 100:
        raise ValueError(f"{path}: late.per_day and late.cap are percentages (at most 100)")
    return LatePolicy(**late)


def read_extensions(path: Path, due: dict[str, datetime]) -> dict[tuple[str, str], datetime]:
    """student,chapter,due rows; a chapter with no due date, or a row that is not one, is an error."""
    if not path.is_file():
        raise ValueError(f"{path}: no such extensions file")
    extensions = {}
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        if not {"student", "chapter", "due"} <= set(reader.fieldnames or []):
            raise ValueError(f"{path}: needs the columns student,chapter,due (has {reader.fieldnames})")
        for line, row in enumerate(reader, start=2):
            where = f"{path}, line {line}"
            assignment = find_chapter(row["chapter"].strip()).assignment
            if assignment not in due:
                raise ValueError(f"{where}: an extension for {assignment}, which has no due date in [due]")
            student = row["student"].strip()
            if not student:
                raise ValueError(f"{where}: no student")
            if (student, assignment) in extensions:
                raise ValueError(f"{where}: a second extension for {student} in {assignment}")
            extensions[(student, assignment)] = parse_time(row["due"], where)
    return extensions

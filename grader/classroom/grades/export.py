"""`grader export`: the gradebook as an LMS imports it (Canvas, Moodle), learners matched through a roster.

The course's own CSV (grades.csv, nbgrader's export) keeps raw score, late penalty and score side by
side; an LMS takes one number per chapter, so these files hold the score after the penalty (and,
with `--exercises`, each exercise's raw score in its own column).

- Canvas: the gradebook import format: Student, ID, SIS User ID, SIS Login ID, Section, then one
  column per chapter, and a "Points Possible" row. The roster is Canvas's own gradebook export.
- Moodle: the grade import CSV: the roster's identifying columns and one column per chapter, mapped
  to grade items in Moodle's "Import grades from CSV" (map from the `--match` column).

A learner in the gradebook with no roster entry, and a roster entry with no submission, are
listed (the second kept in the file with an empty grade); nobody is dropped silently.
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.chapters import Chapter, find_chapter
from grader.classroom.grades.total import chapter_total
from grader.classroom.intake.csvsafe import write_rows
from grader.classroom.locks import sqlite_path

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_COLUMNS = ["First name", "Last name", "Username", "ID number", "Email address"]
DEFAULT_MATCH = {"canvas": "SIS Login ID", "moodle": "Username"}


PENDING_CHOICES = ("blank", "partial")  # --pending: a chapter with written answers not yet graded by hand


@dataclass
class Export:
    rows: list[dict]
    columns: list[str]
    not_in_roster: list[str] = field(default_factory=list)  # students graded but missing from the roster
    no_submission: list[str] = field(default_factory=list)  # roster entries with nothing graded
    pending: list[str] = field(default_factory=list)  # "student: chapter (n written answers not yet graded)"
    pending_as: str = "blank"


def gradebook_scores(db_url: str, chapters: list[Chapter], exercises: bool, late=None,
                     pending: str = "blank") -> tuple[dict, dict, list[str]]:
    """student -> {column: score} and column -> points possible, each chapter's score the course's one
    total (grader.classroom.grades.total; `late`: the course's LatePolicy); and the learners whose chapter has
    written answers not yet graded by hand, whose score is left out (`pending` "blank") or written as
    the points so far ("partial"), never silently."""
    from nbgrader.api import Gradebook, MissingEntry

    if pending not in PENDING_CHOICES:
        raise ValueError(f"--pending {pending!r}: choose one of {', '.join(PENDING_CHOICES)}")
    scores: dict[str, dict] = {}
    possible: dict[str, float] = {}
    unfinished = []
    require_gradebook(db_url)
    with Gradebook(db_url) as gb:
        # no chapters named: every chapter the gradebook holds
        for chapter in chapters or sorted({find_chapter(a.name) for a in gb.assignments}, key=lambda c: c.number):
            try:
                assignment = gb.find_assignment(chapter.assignment)
            except MissingEntry:
                raise ValueError(f"the gradebook has no {chapter.assignment}: grade it first") from None
            possible[chapter.assignment] = float(assignment.max_score)
            for sub in assignment.submissions:
                entry = scores.setdefault(sub.student.id, {})
                total = chapter_total(gb, sub.student.id, chapter.assignment, late)
                if total.pending:
                    unfinished.append(f"{sub.student.id}: {chapter.assignment} "
                                      f"({len(total.pending)} written answer(s) not yet graded)")
                if total.complete or pending == "partial":
                    entry[chapter.assignment] = total.score
                if exercises:
                    for part in total.parts:
                        column = f"{chapter.assignment}: {part.name.removeprefix('test_')}"
                        possible[column] = part.max_score
                        if part.score is not None:
                            entry[column] = part.score
    return scores, possible, unfinished


COURSE_CSV = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
              "raw_score", "late_submission_penalty", "score", "max_score", "pending"]


def write_course_csv(gb, path: Path, late=None) -> None:
    """grades.csv: nbgrader's CSV export with the course's one total (grader.classroom.grades.total; `late`: the
    course's LatePolicy), except that a chapter a learner never submitted has empty scores (nbgrader
    writes 0.0, which reads as a graded zero); `pending`: written answers not yet graded by hand."""
    rows = []
    for assignment in gb.assignments:
        submissions = {s.student.id: s for s in assignment.submissions}
        for student in gb.students:
            row = {"assignment": assignment.name, "duedate": assignment.duedate or "", "student_id": student.id,
                   "last_name": student.last_name or "", "first_name": student.first_name or "",
                   "email": student.email or "", "max_score": assignment.max_score}
            sub = submissions.get(student.id)
            total = chapter_total(gb, student.id, assignment.name, late) if sub is not None else None
            if total is not None:
                row.update(timestamp=sub.timestamp or "", raw_score=total.raw, late_submission_penalty=total.penalty,
                           score=total.score, pending=" ".join(total.pending))
            rows.append(row)
    write_rows(path, COURSE_CSV, rows)


def require_gradebook(db_url: str) -> None:
    """A SQLite gradebook that is not there is an error, not a new empty gradebook."""
    path = sqlite_path(db_url)
    if path is not None and not path.is_file():
        raise ValueError(f"no gradebook at {path}: grade the class first "
                         "(or name the course directory with --course-dir, the database with --db)")


def read_roster(path: Path, match: str) -> list[dict]:
    if not path.is_file():
        raise ValueError(f"{path}: no such roster file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 (byte {raw[err.start]:#x} at offset {err.start}): save the roster "
                         "as CSV UTF-8 (Excel: Save As > CSV UTF-8), or convert it, e.g. "
                         f"`iconv -f latin1 -t utf-8 {path.name} > roster-utf8.csv`") from None
    with io.StringIO(text, newline="") as handle:
        reader = csv.DictReader(handle)
        if match not in (reader.fieldnames or []):
            raise ValueError(f"{path}: no {match!r} column to match learners by (columns: {reader.fieldnames}); "
                             "choose one with --match")
        # Canvas's export carries a "Points Possible" row (and muted-assignment rows) without a learner.
        return [row for row in reader if (row.get(match) or "").strip()
                and not (row.get("Student") or "").strip().startswith("Points Possible")]


def column_names(specs: list[str]) -> dict[str, str]:
    """`CHAPTER=COLUMN` pairs (--column): a chapter's grades go under the LMS's own column for it, e.g.
    `02=Self-attention (1234)` for the Canvas assignment of that name and id; otherwise the column is
    named after the chapter, which Canvas imports as a new assignment."""
    names = {}
    for spec in specs or []:
        chapter, sep, column = spec.partition("=")
        if not sep or not column.strip():
            raise ValueError(f"--column {spec!r}: write CHAPTER=COLUMN, e.g. '02=Self-attention (1234)'")
        assignment = find_chapter(chapter.strip()).assignment
        if assignment in names:
            raise ValueError(f"--column: {assignment} is mapped twice")
        names[assignment] = column.strip()
    if len(set(names.values())) < len(names):
        raise ValueError("--column: two chapters mapped to one column")
    return names


LMS_ID = re.compile(r"\s*\(\d+\)$")  # Canvas reads a header's trailing "(1234)" as the assignment's id


def _renamed(table: dict, names: dict[str, str]) -> dict:
    """A chapter's columns (its total and, with --exercises, `<chapter>: <exercise>`) under the LMS's names:
    an exercise's column takes the chapter's name without its LMS id (else Canvas would import every
    exercise into the chapter's assignment), e.g. "Self-attention: scaled_scores"."""
    def rename(column: str) -> str:
        chapter, sep, rest = column.partition(": ")
        name = names.get(chapter, chapter)
        return LMS_ID.sub("", name) + sep + rest if sep else name
    return {rename(c): v for c, v in table.items()}


def build(db_url: str, chapters: list[Chapter], roster: Path, lms: str, match: str | None = None,
          exercises: bool = False, columns: dict[str, str] | None = None, late=None,
          pending: str = "blank") -> Export:
    if lms not in DEFAULT_MATCH:
        raise ValueError(f"unknown LMS {lms!r}; known: {', '.join(DEFAULT_MATCH)}")
    match = match or DEFAULT_MATCH[lms]
    learners = read_roster(Path(roster), match)
    scores, possible, unfinished = gradebook_scores(db_url, chapters, exercises, late, pending)
    unknown = set(columns or {}) - set(possible)
    if unknown:
        raise ValueError(f"--column names {', '.join(sorted(unknown))}, which this export does not hold")
    possible = _renamed(possible, columns or {})
    scores = {student: _renamed(entry, columns or {}) for student, entry in scores.items()}
    identity = CANVAS_COLUMNS if lms == "canvas" else \
        [c for c in MOODLE_COLUMNS if c in learners[0] or c == match] if learners else [match]
    if match not in identity:
        identity = identity + [match]
    grade_columns = list(possible)
    export = Export(rows=[], columns=identity + grade_columns, pending=unfinished, pending_as=pending)
    if lms == "canvas":
        export.rows.append({"Student": "Points Possible", **{c: f"{possible[c]:g}" for c in grade_columns}})
    matched = set()
    for learner in learners:
        student = learner[match].strip()
        row = {c: learner.get(c, "") for c in identity}
        if student in scores:
            matched.add(student)
            row.update({c: f"{scores[student][c]:g}" for c in grade_columns if c in scores[student]})
        else:
            export.no_submission.append(student)
        export.rows.append(row)
    export.not_in_roster = sorted(set(scores) - matched)
    return export


def write(export: Export, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_rows(path, export.columns, export.rows)


def summary(export: Export, path: Path) -> str:
    lines = [f"wrote {path}: {len([r for r in export.rows if r.get('Student') != 'Points Possible'])} learner(s)"]
    if export.not_in_roster:
        lines.append(f"not in the roster (no row written): {', '.join(export.not_in_roster)}")
    if export.no_submission:
        lines.append(f"in the roster with nothing graded (grade left empty): {', '.join(export.no_submission)}")
    if export.pending:
        what = ("grade left empty until graded by hand" if export.pending_as == "blank"
                else "WARNING: the points so far written, the written answers counting nothing")
        lines.append(f"written answers not yet graded ({what}; --pending): {'; '.join(export.pending)}")
    return "\n".join(lines)

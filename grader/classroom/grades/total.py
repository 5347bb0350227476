"""A learner's total of a chapter, from nbgrader's gradebook: the one place every view reads it (the
service's pages, feedback, grades.csv, `grade --json`, the LMS export, `report`, `regrade`).

The rule (guides/teaching.md: One total):
- automatic points: each hidden-test cell's score (an instructor's override in Formgrader wins);
- hand-graded points: each written answer's hand grade. An answer nobody has graded yet (including one
  whose text changed since it was graded: grader.classroom.grades.handgrades) is *pending*: it counts nothing and
  the total is not complete. An answer left as released scores 0, as nbgrader's autograde says;
- late penalty: the late share of term.toml's [late] policy (time past the learner's due date or
  extension) of automatic plus hand-graded points, recomputed whenever any part changes (nbgrader computes
  it once, at autograde, from what was graded then: `settle` writes this one back to the gradebook);
- bounds: a cell's score (hand grade, override) counts when it is a finite number in 0..the cell's points, and
  its extra credit when in 0..the cell's points too. Anything else in the gradebook (a NaN, an infinity, a
  million points written past Formgrader) makes the cell *pending*, as if not graded: every view says the
  total is incomplete until the instructor grades it again, and no such value reaches a total or an export.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from grader.boundary.score import points
from grader.classroom.locks import sqlite_path

GRADED, PENDING, UNANSWERED, AUTOMATIC = "graded", "pending", "unanswered", "automatic"


@dataclass(frozen=True)
class Part:
    """One graded cell: a hidden-test cell (automatic) or a written answer (graded, pending, unanswered)."""
    name: str
    state: str
    score: float | None  # None while pending
    max_score: float


@dataclass(frozen=True)
class Total:
    student: str
    assignment: str
    auto: float
    hand: float
    late_share: float  # the share of raw points the late policy takes (0 on time)
    max_score: float
    parts: tuple[Part, ...] = field(default=())

    @property
    def raw(self) -> float:
        return round(self.auto + self.hand, 3)

    @property
    def penalty(self) -> float:
        return round(self.raw * self.late_share, 3)

    @property
    def score(self) -> float:
        return round(max(0.0, self.raw - self.penalty), 3)

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parts if p.state == PENDING)

    @property
    def complete(self) -> bool:
        return not self.pending

    def text(self) -> str:
        """"6 / 14", "6 / 14 (raw 7.5, late penalty −1.5)", "... · 2 written answers pending"."""
        line = f"{points(self.score)} / {points(self.max_score)}"
        if self.penalty:
            line += f" (raw {points(self.raw)}, late penalty −{points(self.penalty)})"
        if self.pending:
            count = len(self.pending)
            line += f" · {count} written answer{'s' if count > 1 else ''} pending (not yet graded by hand)"
        return line


def bounded(value, maximum: float) -> float | None:
    """`value` as points of a cell worth `maximum`; None when it is not a finite number in 0..maximum."""
    try:
        points = float(value)
    except (TypeError, ValueError):
        return None
    return points if math.isfinite(points) and 0.0 <= points <= maximum else None


def _part(grade, name: str, maximum: float) -> Part:
    """One grade's part; `name` and `maximum`: its cell's (`_cells`)."""
    maximum = float(maximum)
    extra = bounded(grade.extra_credit or 0.0, maximum)
    if grade.cell_type == "code":  # a hidden-test cell: automatic (an override in Formgrader wins)
        chosen = grade.manual_score if grade.manual_score is not None else grade.auto_score
        points = bounded(chosen or 0.0, maximum)
        if points is None or extra is None:  # out of bounds: graded again before it counts
            return Part(name, PENDING, None, maximum)
        return Part(name, AUTOMATIC, points + extra, maximum)
    if grade.needs_manual_grade or (grade.manual_score is None and grade.auto_score is None):
        return Part(name, PENDING, None, maximum)
    if grade.manual_score is not None:
        points = bounded(grade.manual_score, maximum)
        if points is None or extra is None:
            return Part(name, PENDING, None, maximum)
        return Part(name, GRADED, points + extra, maximum)
    return Part(name, UNANSWERED, float(grade.auto_score), maximum)  # left as released: 0


def _cells(gradebook, notebook) -> dict[str, tuple[str, float]]:
    """Grade id -> (its cell's name, its maximum) for one submitted notebook, in one query: each grade's `name`
    and `max_score` would be a query of its own (a lazy cell, a deferred column), some forty per chapter."""
    from nbgrader.api import BaseCell, Grade

    rows = gradebook.db.query(Grade.id, BaseCell.name, Grade.max_score).join(BaseCell, Grade.cell_id == BaseCell.id) \
        .filter(Grade.notebook_id == notebook.id)
    return {grade: (name, maximum) for grade, name, maximum in rows}


def chapter_total(gradebook, student: str, assignment: str, late=None) -> Total | None:
    """The learner's total of the chapter (None: nothing of theirs in the gradebook). `gradebook`: an
    open nbgrader Gradebook; `late`: the course's grader.classroom.policy.term.LatePolicy (None: no penalty)."""
    from nbgrader.api import MissingEntry

    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return None
    parts = tuple(_part(g, *cells[g.id]) for nb in submission.notebooks for cells in [_cells(gradebook, nb)]
                  for g in nb.grades)
    share = late.fraction(submission.total_seconds_late) if late is not None else 0.0
    return Total(student, assignment,
                 auto=round(sum(p.score for p in parts if p.state == AUTOMATIC), 3),
                 hand=round(sum(p.score for p in parts if p.state in (GRADED, UNANSWERED)), 3),
                 late_share=share, max_score=round(sum(p.max_score for p in parts), 3), parts=parts)


def late_policy(course_root: str | Path):
    """The course directory's late policy (term.toml), or None."""
    from grader.classroom.policy.term import load_term  # lazy: keeps the class's layers at six (tests/test_layout.py)

    return load_term(course_root).policy


def totals(db_url: str, late=None, assignment: str | None = None) -> dict[tuple[str, str], Total]:
    """(student, assignment) -> Total for every submission in the gradebook (of one chapter, if named)."""
    from nbgrader.api import Gradebook

    found = {}
    with Gradebook(db_url) as gb:
        for record in gb.assignments:
            if assignment is not None and record.name != assignment:
                continue
            for submission in record.submissions:
                total = chapter_total(gb, submission.student.id, record.name, late)
                found[(submission.student.id, record.name)] = total
    return found


def settle(gradebook, student: str, assignment: str, late=None) -> Total | None:
    """Write the rule's late penalty into nbgrader's gradebook (nbgrader computed it at autograde, before
    any hand grade), so Formgrader, nbgrader's own feedback and its export show the same total."""
    total = chapter_total(gradebook, student, assignment, late)
    if total is None:
        return None
    submission = gradebook.find_submission(assignment, student)
    for notebook in submission.notebooks:  # one notebook per chapter: the penalty is the chapter's
        notebook.late_submission_penalty = total.penalty if notebook is submission.notebooks[0] else 0.0
    gradebook.db.commit()
    return total


def states(gradebook, late=None, student: str | None = None) -> dict[tuple[str, str], str]:
    """(student, assignment) -> a hash of what the learner's feedback shows of the gradebook: every grade and
    comment and the late share (grader.classroom.grading.publish: a feedback page stamped with another is out of date).
    Four queries for the whole gradebook (of one learner, if named), whatever its size."""
    from nbgrader.api import Comment, Grade, SubmittedAssignment, SubmittedNotebook

    query = gradebook.db.query(SubmittedAssignment)
    if student is not None:
        query = query.filter(SubmittedAssignment.student_id == student)
    parts, keys = {}, {}
    for submission in query:
        keys[submission.id] = key = (submission.student_id, submission.assignment.name)
        parts[key] = [late.fraction(submission.total_seconds_late) if late is not None else 0.0, [], []]
    notebooks = {nb: keys[sub] for nb, sub in gradebook.db.query(SubmittedNotebook.id, SubmittedNotebook.assignment_id)
                 .filter(SubmittedNotebook.assignment_id.in_(list(keys)))}
    grades = gradebook.db.query(Grade.notebook_id, Grade.cell_id, Grade.auto_score, Grade.manual_score,
                                Grade.extra_credit, Grade.needs_manual_grade)
    comments = gradebook.db.query(Comment.notebook_id, Comment.cell_id, Comment.auto_comment, Comment.manual_comment)
    if student is not None:  # one learner's rows only (feedback stamps each page as it is made)
        grades = grades.filter(Grade.notebook_id.in_(list(notebooks)))
        comments = comments.filter(Comment.notebook_id.in_(list(notebooks)))
    for index, rows in ((1, grades), (2, comments)):
        for notebook, *row in rows:
            if notebook in notebooks:
                parts[notebooks[notebook]][index].append(row)
    return {key: hashlib.sha256(json.dumps([share, sorted(graded, key=str), sorted(said, key=str)],
                                           default=str).encode()).hexdigest()[:32]
            for key, (share, graded, said) in parts.items()}


class SettleTotal(NbGraderPreprocessor):
    """Feedback (nbgrader's generate_feedback, Formgrader's button included): the late penalty by the
    course's rule, settled before nbgrader's GetGrades reads the gradebook; pending written answers marked
    (`pending` in the cell's nbgrader metadata) so the page says so instead of 0 points; the gradebook's state
    (`states`) for the page's stamp (grader.classroom.grading.publish)."""

    root = Unicode("", help="the course directory (its term.toml holds the late policy)").tag(config=True)

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        meta = resources["nbgrader"]
        late = late_policy(self.root) if self.root else None
        with Gradebook(meta["db_url"]) as gb:
            total = settle(gb, meta["student"], meta["assignment"], late)
            resources["gradebook_state"] = states(gb, late, meta["student"]).get((meta["student"], meta["assignment"]))
        pending = set(total.pending) if total else set()
        for cell in nb.cells:
            nbgrader = cell.get("metadata", {}).get("nbgrader", {})
            if nbgrader.get("grade_id") in pending:
                nbgrader["pending"] = True
        resources["course_total"] = total
        return nb, resources


def course_totals(course_dir: str | Path, late=None) -> dict[tuple[str, str], Total]:
    """Every total of a course directory's gradebook (none yet: {}), for the service's pages; `late`: the
    course's LatePolicy as the service last read it (None: no penalty)."""
    from grader.coursedir import database_of  # lazy: coursedir imports recording, which imports this module

    url = database_of(course_dir)
    path = sqlite_path(url)
    if path is not None and not path.is_file():  # nothing graded yet
        return {}
    return totals(url, late)

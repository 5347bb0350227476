"""A hand grade belongs to the answer text it graded.

nbgrader keeps a written answer's `manual_score` across autogrades and only flags it "needs manual
grade" again: a resubmission with another answer kept the marks of the old one, and a regrade of the
same answers asked for every answer to be graded again. Here, at every autograde (after nbgrader's
SaveAutoGrades, before the late penalty), each written answer's text is hashed and compared with the
hash kept from the autograde whose text the instructor graded:

- unchanged: the hand grade stands (and is not flagged again);
- changed: the grade and its comment move to the answer's history, and the answer is pending until
  graded (or scores 0, nbgrader's rule, when it is back to the released text). The history shows under the
  answer in Formgrader (a rubric-marked cell: never in a learner's feedback).

Points a regrade request gave a check (grader.classroom.grades.requests: `manual_score` on a hidden-test cell,
which nbgrader also keeps across autogrades) belong to the code they judged: at every autograde the
learner's code (every code cell but the hidden tests) is hashed; points given for other code than the
attempt now graded (a resubmission, the exercise deleted) move to the record's `released` list, and the
check scores what its test gives again. The same code graded again (`grader regrade`) keeps them.

The hashes and history live in the course directory, `hand-grades/<assignment>/<hash of student>.json`
(one file per learner and chapter, written whole), not in the gradebook: nbgrader's Grade and Comment
rows have no spare field, and a table of our own would need a migration nbgrader's alembic does not know.
"""
from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from grader.chapters import is_answer_cell

FOLDER = "hand-grades"


def digest(text: str) -> str:
    """An answer's text as graded: trailing spaces and line ends do not make it another answer."""
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def record_path(folder: str | Path, student: str, assignment: str) -> Path:
    return Path(folder) / assignment / f"{hashlib.sha256(student.encode()).hexdigest()[:32]}.json"


def _record(folder: str | Path, student: str, assignment: str) -> dict:
    """The learner's record of the chapter: "answers", "code" (the hash of the code last autograded),
    "points" (grade_id -> the regrade points given and the code's hash they judged), "released"."""
    try:
        record = json.loads(record_path(folder, student, assignment).read_text())
        return record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        return {}


def load(folder: str | Path, student: str, assignment: str) -> dict:
    """grade_id -> {"digest": the answer's hash at the last autograde, "history": earlier hand grades}."""
    answers = _record(folder, student, assignment).get("answers", {})
    return answers if isinstance(answers, dict) else {}


def save(folder: str | Path, student: str, assignment: str, answers: dict | None = None, **rest) -> None:
    """The record written whole: `answers` and any of the other keys given replace theirs."""
    record = _record(folder, student, assignment)
    record.update({"student": student, "assignment": assignment, **rest})
    if answers is not None:
        record["answers"] = answers
    path = record_path(folder, student, assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(".tmp")
    temp.write_text(json.dumps(record, indent=1))
    os.replace(temp, path)


def code_digest(cells) -> str:
    """The learner's code as graded: every code cell but the hidden tests (nbgrader puts those back). Hashed as
    written but for line ends: unlike an answer's text (digest), trailing spaces can be code (inside a string
    literal), so any other change, even one that changes nothing, releases the regrade points bound to it."""
    def test(cell) -> bool:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        return isinstance(meta, dict) and bool(meta.get("grade")) and not meta.get("solution")

    code = "\n\x1f\n".join(c.get("source", "") for c in cells if c.get("cell_type") == "code" and not test(c))
    return hashlib.sha256(code.replace("\r\n", "\n").replace("\r", "\n").encode()).hexdigest()


def keep_points(folder: str | Path, student: str, assignment: str, grade_id: str, points: float,
                request: str = "") -> None:
    """Regrade points given to a check, bound to the code last autograded (none known: released at the
    next autograde, whatever its code)."""
    record = _record(folder, student, assignment)
    kept = record.get("points") if isinstance(record.get("points"), dict) else {}
    kept[grade_id] = {"code": record.get("code"), "score": points, "request": request,
                      "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    save(folder, student, assignment, points=kept)


def bind_points(gradebook, folder: str | Path, student: str, assignment: str, notebook: str, code: str) -> list:
    """At autograde: regrade points given for other code than `code` (the attempt graded now) taken off
    their check; returns what was released."""
    record = _record(folder, student, assignment)
    kept = record.get("points") if isinstance(record.get("points"), dict) else {}
    released = record.get("released") if isinstance(record.get("released"), list) else []
    now = []
    for grade_id, given in list(kept.items()):
        if given.get("code") is not None and given.get("code") == code:
            continue
        grade = gradebook.find_grade(grade_id, notebook, assignment, student)
        grade.manual_score = None
        now.append({"grade_id": grade_id, **given, "until": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        del kept[grade_id]
    gradebook.db.commit()
    save(folder, student, assignment, code=code, points=kept, released=released + now)
    return now


def bind(gradebook, folder: str | Path, student: str, assignment: str, notebook: str,
         answers: dict[str, str]) -> dict:
    """Keep or release each hand grade by its answer's text (`answers`: grade_id -> source); returns the
    record (grade_id -> digest and history)."""
    kept = load(folder, student, assignment)
    for grade_id, source in answers.items():
        now = digest(source)
        entry = kept.setdefault(grade_id, {"digest": None, "history": []})
        grade = gradebook.find_grade(grade_id, notebook, assignment, student)
        if grade.manual_score is not None:
            if entry["digest"] in (None, now):  # the graded text (or graded before hashes were kept)
                grade.needs_manual_grade = False
            else:
                comment = gradebook.find_comment(grade_id, notebook, assignment, student)
                entry["history"].append({"score": grade.manual_score, "max_score": grade.max_score,
                                         "comment": comment.manual_comment or "",
                                         "until": datetime.now(timezone.utc).isoformat(timespec="seconds")})
                grade.manual_score, comment.manual_comment = None, None
                grade.needs_manual_grade = grade.auto_score is None
        entry["digest"] = now
    gradebook.db.commit()
    save(folder, student, assignment, kept)
    return kept


def history_cell(grade_id: str, history: list[dict]) -> nbformat.NotebookNode:
    from grader.classroom.intake.sanitise import code_span  # lazy: as MARK below, keeps the class's layers at six

    lines = [f"> **Earlier hand grades of {grade_id}**, for another text of this answer "
             "(shown to graders only; the answer above is graded anew):", ">"]
    for old in history:
        comment = code_span(old.get("comment") or "")  # a grader's text, drawn as text (never markup)
        lines.append(f"> - {old['score']:g} / {old['max_score']:g} (until {old['until']})"
                     + (f": {comment}" if comment else ""))
    from grader.classroom.grades.written import MARK  # lazy: keeps the class's layers at six (tests/test_layout.py)

    cell = nbformat.v4.new_markdown_cell("\n".join(lines))
    cell.metadata[MARK] = grade_id  # written.DropRubrics takes it out of feedback
    return cell


class BindHandGrades(NbGraderPreprocessor):
    """Autograde, after SaveAutoGrades: each written answer's hand grade kept or released by its text."""

    folder = Unicode("", help="where the answers' hashes are kept (<course>/hand-grades)").tag(config=True)

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        meta = resources["nbgrader"]
        answers = {c.metadata.nbgrader["grade_id"]: c.source for c in nb.cells
                   if is_answer_cell(c) and c.metadata.nbgrader.get("grade")}
        if not self.folder:
            return nb, resources
        with Gradebook(meta["db_url"]) as gb:
            who = (self.folder, meta["student"], meta["assignment"], meta["notebook"])
            bind_points(gb, *who, code_digest(nb.cells))
            kept = bind(gb, *who, answers) if answers else {}
        cells = []
        for cell in nb.cells:
            cells.append(cell)
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id in answers and kept[grade_id]["history"]:
                cells.append(history_cell(grade_id, kept[grade_id]["history"]))
        nb.cells = cells
        return nb, resources

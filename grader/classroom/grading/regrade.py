"""`grader regrade`: grade a chapter again for the whole class, after a hidden check or the release changed.

What was graded is what the course directory holds (`submitted/<student>/<assignment>/`, with its
`timestamp.txt`), graded through the same path as `grader autograde` (grading.grade_all). Each
regrade is kept in `history/<assignment>.json`: every learner's per-check scores and late penalty
before and after, and a copy of the autograded notebooks before, so a regrade is explained
(old -> new per learner, the checks that changed) and undone (`--undo`).
"""
from __future__ import annotations

import json
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

from grader.boundary.confine import Limits
from grader.boundary.pool import Pool, load_checks
from grader.chapters import Chapter
from grader.classroom import locks
from grader.classroom.grades.report import load_notes
from grader.classroom.grades.total import chapter_total, late_policy
from grader.classroom.grading.batch import grade_all, release_all
from grader.classroom.grading.recording import feedback_and_export
from grader.classroom.intake.collect import admitted, submission
from grader.classroom.policy.accommodations import class_roster
from grader.coursedir import CourseDir

HISTORY = "history"


def snapshot(course, chapter: Chapter, late=None) -> dict[str, dict]:
    """student -> raw score, penalty and pending written answers (grader.classroom.grades.total's one total, with
    the course's LatePolicy `late`) and each check's (auto, manual) score, as the gradebook holds them."""
    from nbgrader.api import Gradebook, MissingEntry

    scores = {}
    with Gradebook(course.db_url) as gb:
        try:
            assignment = gb.find_assignment(chapter.assignment)
        except MissingEntry:
            return {}
        for submission in assignment.submissions:
            total = chapter_total(gb, submission.student.id, chapter.assignment, late)
            for notebook in submission.notebooks:
                scores[submission.student.id] = {
                    "score": total.raw, "penalty": total.penalty, "pending": list(total.pending),
                    "tests": {g.name: [g.auto_score, g.manual_score] for g in notebook.grades}}
    return scores


def restore(course, chapter: Chapter, student: str, kept: dict) -> None:
    """Put a learner's kept per-check scores and penalty back in the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        notebook = gb.find_submission_notebook(chapter.name, chapter.assignment, student)
        for grade in notebook.grades:
            if grade.name in kept["tests"]:
                grade.auto_score, grade.manual_score = kept["tests"][grade.name]
        notebook.late_submission_penalty = kept["penalty"]
        gb.db.commit()


def _total(entry: dict | None) -> float:
    return round(entry["score"] - entry["penalty"], 3) if entry else 0.0


def _check_score(pair: list) -> float:
    auto, manual = pair
    return float(manual if manual is not None else auto or 0.0)


def changes(before: dict, after: dict) -> list[dict]:
    """Per learner: old -> new score (after the late penalty) and each check whose score changed."""
    rows = []
    for student in sorted(set(before) | set(after)):
        old, new = before.get(student), after.get(student)
        tests = sorted(set(old["tests"] if old else {}) | set(new["tests"] if new else {}))
        changed = {t: [_check_score(old["tests"][t]) if old and t in old["tests"] else None,
                       _check_score(new["tests"][t]) if new and t in new["tests"] else None]
                   for t in tests}
        changed = {t: pair for t, pair in changed.items() if pair[0] != pair[1]}
        rows.append({"student": student, "old": _total(old) if old else None, "new": _total(new), "checks": changed,
                     "why": _why(old, new)})
    return rows


def _why(old: dict | None, new: dict | None) -> list[str]:
    """What moved a total besides its checks: the late penalty, written answers pending or graded."""
    if not old or not new:
        return []
    why = []
    if old["penalty"] != new["penalty"]:
        why.append(f"late penalty {old['penalty']:g} -> {new['penalty']:g} (the late share of the points, "
                   "recomputed; guides/teaching.md: One total)")
    was, now = set(old.get("pending", [])), set(new.get("pending", []))
    if now - was:
        why.append(f"pending again, the answer changed since it was graded: {', '.join(sorted(now - was))}")
    if was - now:
        why.append(f"graded by hand since: {', '.join(sorted(was - now))}")
    return why


def _history_file(course, chapter: Chapter) -> Path:
    return course.root / HISTORY / f"{chapter.assignment}.json"


def _load_history(course, chapter: Chapter) -> list[dict]:
    path = _history_file(course, chapter)
    return json.loads(path.read_text()) if path.exists() else []


def _save_history(course, chapter: Chapter, runs: list[dict]) -> None:
    path = _history_file(course, chapter)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(runs, indent=1))


def _autograded_copy(course, chapter: Chapter, run: int, back: bool = False) -> None:
    """The autograded notebooks of the chapter, to history/<assignment>-<run>/ (or back from there)."""
    kept = course.root / HISTORY / f"{chapter.assignment}-{run}"
    for folder in sorted((course.root / "autograded").glob(f"*/{chapter.assignment}")) if not back else []:
        shutil.copytree(folder, kept / folder.parent.name, dirs_exist_ok=True)
    if back and kept.is_dir():
        for folder in kept.iterdir():
            target = course.root / "autograded" / folder.name / chapter.assignment
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(folder, target)


def _keep_ungradable(root: Path, chapter: Chapter, submissions: list) -> None:
    """A learner whose file could not be graded at all has the release staged in its place: it keeps
    its zero and its reason instead of being graded again as an untouched notebook."""
    notes = load_notes(root).get(chapter.assignment, {})
    for sub in submissions:
        entry = notes.get(sub.student, {})
        if entry.get("error") and entry.get("graded") is False:
            sub.chapter, sub.error = chapter, entry["error"]
            sub.notes.append("not graded again: the submitted file could not be graded")


def regrade(course_dir: str | Path, chapter: Chapter, term=None, never_lower: bool = False, jobs: int = 2,
            timeout: int = 120, progress: bool = False, reason: str = "", db_url: str | None = None,
            limits=None, rerun_all: bool = False, students: list[str] | None = None) -> list[dict]:
    """Grade the chapter's kept submissions again (all, or only `students`': an accepted regrade request);
    record the run in the history; return the changes."""
    root = Path(course_dir).resolve()
    folders, refused = admitted(sorted(p for p in (root / "submitted").glob(f"*/{chapter.assignment}") if p.is_dir()),
                                depth=1)  # nbgrader's collect names them after what a learner wrote
    for note in refused:
        print(note, file=sys.stderr)
    if not folders:
        raise ValueError(f"{root}: no submissions of {chapter.assignment} under submitted/ to grade again")
    if students:
        unknown = sorted(set(students) - {f.parent.name for f in folders})
        if unknown:
            raise ValueError(f"{root}: no submission of {chapter.assignment} under submitted/ for {', '.join(unknown)}")
        folders = [f for f in folders if f.parent.name in students]
    submissions = [submission(f / chapter.notebook_name, f, f.parent.name) for f in folders]
    if term is not None:
        term.check_extensions(class_roster(root) | {s.student for s in submissions})
    _keep_ungradable(root, chapter, submissions)
    with Pool(jobs=jobs, timeout=timeout, limits=limits or Limits()) as pool, locks.locked(root):
        pool.start()
        load_checks([chapter])
        course = CourseDir(root, [chapter], db_url=db_url, timeout=timeout)
        late = term.policy if term is not None else late_policy(root)
        with locks.shared(course.db_url) as book:  # as autograde: other graders may share the gradebook
            before = snapshot(course, chapter, late)
            runs = _load_history(course, chapter)
            run = len(runs) + 1
            _autograded_copy(course, chapter, run)
            with book.releasing():
                released = release_all(course, [chapter])
            grade_all(course, submissions, released, pool, progress=progress, rerun_all=rerun_all, term=term,
                      book=book, reuse_secrets=True)
            regraded = snapshot(course, chapter, late)
            kept = []
            if never_lower:
                for student, new in regraded.items():
                    if student in before and _total(new) < _total(before[student]):
                        restore(course, chapter, student, before[student])
                        kept.append(student)
            after = snapshot(course, chapter, late)
            feedback_and_export(course, [chapter])
        rows = changes(before, regraded)  # what the regrade gave, the kept ones marked
        for row in rows:
            row["kept_old"] = row["student"] in kept
        errors = {s.student: s.error for s in submissions if s.error}
        runs.append({"run": run, "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     "reason": reason, "never_lower": never_lower, "before": before, "after": after,
                     "changes": rows, "errors": errors, "undone": False})
        _save_history(course, chapter, runs)
    return rows


def undo(course_dir: str | Path, chapter: Chapter, db_url: str | None = None) -> list[dict]:
    """Put back the scores (and autograded notebooks) from before the last regrade not yet undone."""
    root = Path(course_dir).resolve()
    with locks.locked(root):
        course = CourseDir(root, [chapter], db_url=db_url)
        runs = _load_history(course, chapter)
        live = [r for r in runs if not r["undone"]]
        if not live:
            raise ValueError(f"{root}: no regrade of {chapter.assignment} to undo")
        last = live[-1]
        late = late_policy(root)
        now = snapshot(course, chapter, late)
        for student, kept in last["before"].items():
            if student in now:
                restore(course, chapter, student, kept)
        _autograded_copy(course, chapter, last["run"], back=True)
        feedback_and_export(course, [chapter])
        last["undone"] = True
        _save_history(course, chapter, runs)
        return changes(now, snapshot(course, chapter, late))


def format_changes(rows: list[dict], chapter: Chapter) -> str:
    moved = [r for r in rows if r["old"] != r["new"] or r["checks"] or r.get("why")]
    kept = sum(1 for r in moved if r.get("kept_old"))  # --never-lower put their old score back
    lines = [f"{chapter.assignment}: {len(moved) - kept} of {len(rows)} learner(s) changed"
             + (f"; {kept} would have gone down and kept the old score (--never-lower)" if kept else "")]
    for row in rows:
        old = "-" if row["old"] is None else f"{row['old']:g}"
        line = f"  {row['student']:<12} {old:>7} -> {row['new']:<7g}"
        if row.get("kept_old"):
            line += " (kept the old score: --never-lower)"
        lines.append(line)
        for check, (was, now) in row["checks"].items():
            lines.append(f"      {check:<36} {'-' if was is None else f'{was:g}'} -> "
                         f"{'-' if now is None else f'{now:g}'}")
        lines += [f"      {why}" for why in row.get("why", [])]
    return "\n".join(lines)

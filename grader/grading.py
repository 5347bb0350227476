"""Grading with real nbgrader: one-off notebooks (`grader grade`) and a whole class (`grader autograde`)."""
from __future__ import annotations

import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry

from grader.chapters import Chapter
from grader.coursedir import CourseDir
from grader.submissions import BadSubmission, identify, read_notebook, repair

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Submission:
    path: Path
    student: str
    chapter: Chapter | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)


def _test_ids(chapter: Chapter) -> dict[str, float]:
    """grade_id -> points of the test cells, as the learner notebook (the release) records them."""
    nb = nbformat.read(chapter.course_notebook, as_version=4)
    return {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade")}


def _cell_error(outputs: list) -> str | None:
    """What a graded cell said went wrong: the FAIL lines of the report and any exception."""
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(("FAIL", "no credit"))]
    for o in outputs:
        if o.get("output_type") == "error":
            lines.append(ANSI.sub("", f"{o.get('ename')}: {o.get('evalue')}"))
        elif o.get("output_type") == "stream" and o.get("name") == "stderr":
            lines.append("the cell wrote to stderr")
    return "; ".join(lines) or None


def stage(course: CourseDir, submission: Submission, released: dict[str, nbformat.NotebookNode]) -> None:
    """Copy a readable, repaired submission into submitted/<student>/<assignment>/ (or record why not)."""
    try:
        submission.chapter = identify(submission.path)
        if not submission.path.is_file():
            raise BadSubmission(f"{submission.path}: no such file")
        nb = read_notebook(submission.path)
    except BadSubmission as err:
        submission.error = str(err)
        return
    chapter = submission.chapter
    nb, submission.notes = repair(nb, released[chapter.assignment])
    target = course.root / "submitted" / submission.student / chapter.assignment
    target.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target / chapter.notebook_name)


def autograde_one(course: CourseDir, submission: Submission) -> None:
    if submission.error:
        return
    proc = course.nbgrader("autograde", submission.chapter.assignment, "--student", submission.student,
                           "--force", check=False)
    if proc.returncode != 0:
        last = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "ERROR" in ln]
        submission.error = "nbgrader autograde failed: " + (last[-1] if last else f"exit {proc.returncode}")


def result_of(course: CourseDir, submission: Submission) -> dict:
    """The JSON contract: notebook, score, max_score, tests{grade_id: score, max_score, error}."""
    chapter = submission.chapter
    expected = _test_ids(chapter) if chapter else {}
    tests = {gid: {"score": 0.0, "max_score": float(points), "error": submission.error}
             for gid, points in expected.items()}
    if not submission.error:
        graded = course.root / "autograded" / submission.student / chapter.assignment / chapter.notebook_name
        outputs = {}
        if graded.exists():
            nb = nbformat.read(graded, as_version=4)
            outputs = {c.metadata.nbgrader["grade_id"]: c.get("outputs", []) for c in nb.cells
                       if c.metadata.get("nbgrader", {}).get("grade")}
        with Gradebook(course.db_url) as gb:
            try:
                notebook = gb.find_submission_notebook(chapter.name, chapter.assignment, submission.student)
                for grade in notebook.grades:
                    score = float(grade.score or 0.0)
                    error = _cell_error(outputs.get(grade.name, [])) if score < grade.max_score else None
                    tests[grade.name] = {"score": score, "max_score": float(grade.max_score), "error": error}
            except MissingEntry:
                for entry in tests.values():
                    entry["error"] = "no grade was recorded for this notebook"
    result = {"notebook": str(submission.path),
              "score": round(sum(t["score"] for t in tests.values()), 3),
              "max_score": round(sum(t["max_score"] for t in tests.values()), 3),
              "tests": tests}
    if submission.error:
        result["error"] = submission.error
    if submission.notes:
        result["repairs"] = submission.notes
    return result


def _release_all(course: CourseDir, chapters: list[Chapter], cached: bool = False) -> dict[str, nbformat.NotebookNode]:
    if cached:
        try:
            course.release_cached(chapters)
        except OSError:  # no writable cache folder: release here instead
            cached = False
    if not cached:
        for chapter in chapters:
            course.release(chapter)
    return {c.assignment: nbformat.read(course.root / "release" / c.assignment / c.notebook_name, as_version=4)
            for c in chapters}


def _chapters_of(submissions: list[Submission]) -> list[Chapter]:
    chapters = []
    for sub in submissions:
        try:
            chapter = identify(sub.path)
        except BadSubmission:
            continue
        if chapter not in chapters:
            chapters.append(chapter)
    return chapters


def grade_paths(paths: list[str], timeout: int = 120, jobs: int = 1) -> list[dict]:
    """Grade notebooks offline in a throwaway course directory; one result per path, in order."""
    submissions = [Submission(Path(p), f"submission{i + 1:03d}") for i, p in enumerate(paths)]
    with tempfile.TemporaryDirectory(prefix="grader-") as tmp:
        course = CourseDir(Path(tmp), _chapters_of(submissions), timeout=timeout)
        released = _release_all(course, _chapters_of(submissions), cached=True)
        for sub in submissions:
            stage(course, sub, released)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(lambda s: autograde_one(course, s), submissions))
        return [result_of(course, sub) for sub in submissions]


def format_table(results: list[dict]) -> str:
    lines = []
    for r in results:
        lines.append(f"{r['notebook']}: {r['score']:g} / {r['max_score']:g}")
        if r.get("error"):
            lines.append(f"  error: {r['error']}")
        for note in r.get("repairs", []):
            lines.append(f"  repaired: {note}")
        for gid, t in r["tests"].items():
            line = f"  {gid:<40} {t['score']:>6g} / {t['max_score']:g}"
            if t["error"] and not r.get("error"):
                line += f"   {t['error'][:150]}"
            lines.append(line)
    return "\n".join(lines)


def autograde_class(submissions_dir: str | Path, course_dir: str | Path, db_url: str | None = None,
                    jobs: int = 2, timeout: int = 120, chapters: list[Chapter] | None = None) -> str:
    """Grade every `<student>/**/<chapter>.ipynb` into the gradebook, then feedback and grades.csv."""
    submissions_dir = Path(submissions_dir)
    if not submissions_dir.is_dir():
        raise ValueError(f"{submissions_dir} is not a folder of student folders")
    submissions = [Submission(path, student.name) for student in sorted(submissions_dir.iterdir())
                   if student.is_dir() for path in sorted(student.rglob("*.ipynb"))
                   if ".ipynb_checkpoints" not in path.parts]
    chapters = chapters or _chapters_of(submissions)
    course = CourseDir(Path(course_dir), chapters, db_url=db_url, timeout=timeout)
    released = _release_all(course, chapters)
    for sub in submissions:
        stage(course, sub, released)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(lambda s: autograde_one(course, s), submissions))
    for chapter in chapters:
        course.nbgrader("generate_feedback", chapter.assignment, "--force", check=False)
    course.nbgrader("export", "--to", str(course.root / "grades.csv"))
    results = [result_of(course, sub) for sub in submissions]
    return summary(course, chapters, results)


def summary(course: CourseDir, chapters: list[Chapter], results: list[dict]) -> str:
    """The gradebook as nbgrader recorded it, one row per student and chapter."""
    lines = [f"Gradebook {course.db_url}", f"{'student':<12} {'chapter':<26} {'score':>13}"]
    with Gradebook(course.db_url) as gb:
        for student in sorted(s.id for s in gb.students):
            for chapter in chapters:
                try:
                    sub = gb.find_submission(chapter.assignment, student)
                except MissingEntry:
                    continue
                lines.append(f"{student:<12} {chapter.assignment:<26} {sub.score:>6g} / {sub.max_score:g}")
    problems = [r for r in results if r.get("error") or r.get("repairs")]
    for r in problems:
        lines.append(f"note: {r['notebook']}: {r.get('error') or '; '.join(r['repairs'])}")
    feedback = sorted(course.root.glob("feedback/*/*/*.html"))
    lines.append(f"feedback: {len(feedback)} HTML file(s) under {course.root / 'feedback'}")
    lines.append(f"grades:   {course.root / 'grades.csv'}")
    return "\n".join(lines)

"""Finding a class's submissions: which files, which learner, and when each was submitted.

`grader autograde SOURCE` takes three kinds of SOURCE, all read into one Submission per notebook:
- one folder per learner (`<student>/**/<chapter>.ipynb`), which is also nbgrader's own
  `submitted/<student>/<assignment>/` layout after `nbgrader collect`. When SOURCE is the course
  directory's own `submitted/`, the learners' notebooks are first kept under `originals/`
  (grading writes the repaired notebook back into `submitted/`, where nbgrader reads it);
- an LMS download, a zip or a flat folder of files named after the learner (grader.classroom.lms),
  unpacked into `<course-dir>/lms/<student>/<assignment>/`.
The submission time is nbgrader's `timestamp.txt` where the exchange (or the LMS) gave one; it is
never a file's mtime.
"""
from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

from grader.classroom import lms
from grader.classroom.submissions import TIMESTAMP_FILE, Submission, submission_time

SECRET_FILE = "submission_secret.txt"  # nbgrader's key for releasing feedback to this submission
ORIGINALS = "originals"


def submission(notebook: Path, student_dir: Path, student: str | None = None) -> Submission:
    """One learner's notebook (`student`: default, the folder's name) and its time; an unreadable
    timestamp.txt leaves the time unknown (graded as on time, as with none: grader.classroom.term) and says why,
    never stopping the batch."""
    student = student or student_dir.name
    try:
        return Submission(notebook, student, submitted_at=submission_time(notebook, student_dir))
    except ValueError as err:
        found = Submission(notebook, student)
        found.notes.append(f"{err}: submission time unknown")
        return found


def _notebooks(student: Path) -> list[Path]:
    return [p for p in sorted(student.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts]


def find_submissions(folder: str | Path) -> list[Submission]:
    """Every notebook under `<student>/`, in a stable order, checkpoints left out."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder of student folders")
    return [submission(path, student)
            for student in sorted(p for p in folder.iterdir() if p.is_dir()) for path in _notebooks(student)]


def gather(source: str | Path, course_dir: str | Path,
           pattern: str | None = None) -> tuple[list[Submission], list[str]]:
    """The submissions `grader autograde SOURCE --course-dir COURSE_DIR` grades, and notes for its summary
    (what was unpacked, unmatched or superseded)."""
    source, root = Path(source), Path(course_dir).resolve()
    if source.is_file() and zipfile.is_zipfile(source):
        return _download(source, root, pattern)
    if not source.is_dir():
        raise ValueError(f"{source} is neither a folder of submissions nor a zip file of an LMS download")
    if pattern or lms.is_download(source):
        return _download(source, root, pattern)
    if source.resolve() == root / "submitted":
        return keep_originals(root)
    return find_submissions(source), []


def _download(source: Path, root: Path, pattern: str | None) -> tuple[list[Submission], list[str]]:
    """An LMS download, unpacked into the course directory's `lms/` as one folder per learner."""
    notes = lms.unpack(source, root / "lms", pattern)
    return find_submissions(root / "lms"), notes


def _exchange_key(folder: Path) -> str | None:
    """What tells one exchange submission from the next: its timestamp and secret, as collected."""
    parts = [(folder / name).read_bytes()[:4096] for name in (TIMESTAMP_FILE, SECRET_FILE) if (folder / name).is_file()]
    return repr(parts) if parts else None


def keep_originals(root: Path) -> tuple[list[Submission], list[str]]:
    """Grade the course directory's own `submitted/` without losing a learner's notebook: each
    `<student>/<assignment>/` folder is copied to `originals/` when first seen or when `nbgrader collect`
    brought a newer submission (another timestamp), and graded from there. `submitted/` keeps
    nbgrader's timestamp.txt and submission secret, so release_feedback still finds the learner."""
    submitted, originals = root / "submitted", root / ORIGINALS
    found, notes = [], []
    for folder in sorted(p for p in submitted.glob("*/*") if p.is_dir()):
        kept = originals / folder.relative_to(submitted)
        key = _exchange_key(folder)
        if not kept.is_dir() or (key is not None and key != _exchange_key(kept)):
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(folder, kept, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        elif key is None:
            notes.append(f"note: {folder} has no {TIMESTAMP_FILE}: graded the notebook kept at {kept} on the first run "
                         f"(delete that folder to grade what is in submitted/ now)")
        student = kept.parent
        found += [submission(path, student) for path in _notebooks(kept)]
    return found, notes

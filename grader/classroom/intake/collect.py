"""Finding a class's submissions: which files, which learner, and when each was submitted.

`grader autograde SOURCE` takes three kinds of SOURCE, all read into one Submission per notebook:
- one folder per learner (`<student>/**/<chapter>.ipynb`), which is also nbgrader's own
  `submitted/<student>/<assignment>/` layout after `nbgrader collect`. When SOURCE is the course
  directory's own `submitted/`, the learners' notebooks are first kept under `originals/`
  (grading writes the repaired notebook back into `submitted/`, where nbgrader reads it);
- an LMS download, a zip or a flat folder of files named after the learner (grader.classroom.intake.lms),
  unpacked into `<course-dir>/lms/<student>/<assignment>/`.
The submission time is nbgrader's `timestamp.txt` where the exchange (or the LMS) gave one; it is
never a file's mtime. `grader collect` (`collect` below) fills `submitted/` from the exchange in place of
`nbgrader collect`, through the safe copier, with the grader's own times; after `nbgrader collect`,
timestamp.txt is the learner's claim, range-checked and bounded by when it was written
(grader.classroom.submissions.submission_time); a garbled, implausible or missing one there gives the time
the notebook was copied into the course directory, never an unknown one (`submission`).
"""
from __future__ import annotations

import shutil
import time
import zipfile
from datetime import datetime, timezone
from pathlib import Path

from grader.classroom.intake import lms
from grader.classroom.intake.identity import NotALearner, admit_student
from grader.classroom.intake.safecopy import UnsafeSubmission, copy_tree
from grader.classroom.ledger import inbound_groups
from grader.classroom.submissions import TIMESTAMP_FILE, Submission, submission_time, write_timestamp
from grader.coursedir import COURSE_ID

SECRET_FILE = "submission_secret.txt"  # nbgrader's key for releasing feedback to this submission
ORIGINALS = "originals"


def submission(notebook: Path, student_dir: Path, student: str | None = None, collected: bool = False) -> Submission:
    """One learner's notebook (`student`: default, the folder's name) and its time, never stopping the batch.
    An unreadable or implausible timestamp.txt, or none at all in a folder `nbgrader collect` filled
    (`collected`: the learner wrote it or left it out), is never better for the learner than the truth: the time
    is the notebook's ctime, when it was copied here (an upper bound the learner cannot set), and the note
    says so. Elsewhere a missing stamp leaves the time unknown (graded as on time unless --submitted-at:
    grader.classroom.policy.term)."""
    student = student or student_dir.name
    try:
        found = Submission(notebook, student, submitted_at=submission_time(notebook, student_dir))
        why = None if found.submitted_at is not None or not collected else f"no {TIMESTAMP_FILE}"
    except ValueError as err:
        found, why = Submission(notebook, student), str(err)
    if why is not None:
        try:
            found.submitted_at = datetime.fromtimestamp(notebook.stat().st_ctime, timezone.utc)
            found.notes.append(f"{why}: submission time {found.submitted_at:%Y-%m-%d %H:%M UTC}, when the "
                               "notebook was copied into the course directory (a time the learner cannot set)")
        except OSError:
            found.notes.append(f"{why}: submission time unknown")
    return found


def _notebooks(student: Path) -> list[Path]:
    return [p for p in sorted(student.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts]


def refusal(folder: Path, err: NotALearner) -> str:
    """The note for a folder the identity gate refused (graded for nobody)."""
    return f"refused: {folder.name!r}: {err} (graded for nobody)"


def admitted(folders: list[Path], depth: int = 0) -> tuple[list[Path], list[str]]:
    """The folders whose learner (the name `depth` folders up: `submitted/<student>/<assignment>` is 1)
    the identity gate admits, and a note for each other: the folder names are the learners' choice."""
    kept, notes = [], []
    for folder in folders:
        student = folder.parents[depth - 1] if depth else folder
        try:
            admit_student(student.name)
            kept.append(folder)
        except NotALearner as err:
            notes.append(refusal(student, err))
    return kept, notes


def find_submissions(folder: str | Path) -> tuple[list[Submission], list[str]]:
    """Every notebook under `<student>/`, in a stable order, checkpoints left out; a folder whose name
    the identity gate refuses is a note instead."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder of student folders")
    students, notes = admitted(sorted(p for p in folder.iterdir() if p.is_dir()))
    return [submission(path, student) for student in students for path in _notebooks(student)], notes


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
    return find_submissions(source)


def _download(source: Path, root: Path, pattern: str | None) -> tuple[list[Submission], list[str]]:
    """An LMS download, unpacked into the course directory's `lms/` as one folder per learner."""
    notes = lms.unpack(source, root / "lms", pattern)
    found, refused = find_submissions(root / "lms")
    return found, notes + refused


def _exchange_key(folder: Path) -> str | None:
    """What tells one exchange submission from the next: its timestamp and secret, as collected."""
    parts = [(folder / name).read_bytes()[:4096] for name in (TIMESTAMP_FILE, SECRET_FILE) if (folder / name).is_file()]
    return repr(parts) if parts else None


def keep_originals(root: Path) -> tuple[list[Submission], list[str]]:
    """Grade the course directory's own `submitted/` without losing a learner's notebook: each
    `<student>/<assignment>/` folder is copied to `originals/` when first seen or when a collect
    brought a newer submission (another timestamp), and graded from there. `submitted/` keeps
    nbgrader's timestamp.txt and submission secret, so release_feedback still finds the learner.
    The copy is grader.classroom.intake.safecopy's: a link (to the class's source notebook, say) or any file
    that is not a regular one makes that learner's submission a zero with the reason, never a read.
    `nbgrader collect` names `submitted/<student>/` after the inbound folder without checking who wrote
    it, so each name passes the identity gate again here (its owner is no longer known: `grader collect`
    checks that)."""
    submitted, originals = root / "submitted", root / ORIGINALS
    found = []
    folders, notes = admitted(sorted(p for p in submitted.glob("*/*") if p.is_dir() and not p.name.startswith(".")),
                              depth=1)
    for folder in folders:
        kept = originals / folder.relative_to(submitted)
        key = _exchange_key(folder)
        if folder.is_symlink() or folder.parent.is_symlink() or not kept.is_dir() or \
                (key is not None and key != _exchange_key(kept)):
            try:
                if folder.parent.is_symlink():  # submitted/<student> itself a link: nothing under it is read
                    raise UnsafeSubmission(f"{folder.parent.name}: a link (links are never followed)")
                copy_tree(folder, kept)
            except UnsafeSubmission as err:
                shutil.rmtree(kept, ignore_errors=True)
                refused = Submission(kept / folder.name, folder.parent.name, error=str(err))
                refused.notes.append(f"{folder}: not copied: {err}")
                found.append(refused)
                continue
        elif key is None:
            notes.append(f"note: {folder} has no {TIMESTAMP_FILE}: graded the notebook kept at {kept} on the first run "
                         f"(delete that folder to grade what is in submitted/ now)")
        student = kept.parent
        found += [submission(path, student, collected=True) for path in _notebooks(kept)]
    return found, notes


def collect(exchange: str | Path, course_dir: str | Path, check_owner: bool = True) -> list[str]:
    """`grader collect`: what `nbgrader collect` does, from the exchange's inbound folder into the course
    directory's `submitted/<student>/<assignment>/`, each learner's newest submission of each chapter,
    through the safe copier (no link followed, regular files only, bounded), with timestamp.txt the
    kernel's time of the last change to what was copied, not the learner's. Each learner it names passes
    the identity gate (grader.classroom.intake.identity), with the folder's owner unless `check_owner` is off (a
    try-out hub, where every server is one unix user). Returns the notes."""
    inbound = Path(exchange) / COURSE_ID / "inbound"
    if not inbound.is_dir():
        raise ValueError(f"{inbound}: no such folder (the exchange root is --exchange)")
    submitted, notes, now = Path(course_dir) / "submitted", [], time.time()
    for (student, assignment), found in sorted(inbound_groups(inbound).items()):
        items = []  # the learner's own folders: one a classmate wrote in their name never hides them
        for item in found:
            try:
                admit_student(student, inbound / item[1] if check_owner else None)
                items.append(item)
            except NotALearner as err:
                notes.append(refusal(inbound / item[1], err))
        if not items:
            continue
        name = items[0][1]
        target = submitted / student / assignment
        try:
            copied = copy_tree(inbound / name, target)
        except UnsafeSubmission as err:
            notes.append(f"refused: {name}: {err}")
            continue
        write_timestamp(target / TIMESTAMP_FILE, datetime.fromtimestamp(min(copied.changed_at, now), timezone.utc))
        notes.append(f"collected: {student} {assignment} ({name}" +
                     (f"; {len(items) - 1} older submission(s) left)" if len(items) > 1 else ")"))
    return notes

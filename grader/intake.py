"""Finding a class's submissions: which files, which learner, and when each was submitted.

The layout read here is one folder per learner (`<student>/**/<chapter>.ipynb`), which is also
nbgrader's own `submitted/<student>/<assignment>/` layout after `nbgrader collect`. The submission
time is nbgrader's `timestamp.txt` where the exchange wrote one; it is never a file's mtime.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from grader.grading import Submission

TIMESTAMP_FILE = "timestamp.txt"


def read_timestamp(path: Path) -> datetime:
    """nbgrader's `timestamp.txt` ("2026-11-23 14:05:09.123456 UTC"), as an aware datetime."""
    text = path.read_text().strip()
    for suffix, fmt in ((" UTC", "%Y-%m-%d %H:%M:%S.%f"), (" UTC", "%Y-%m-%d %H:%M:%S"), ("", "%Y-%m-%d %H:%M:%S.%f%z")):
        try:
            stamp = datetime.strptime(text.removesuffix(suffix), fmt)
        except ValueError:
            continue
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)
    raise ValueError(f"{path}: not an nbgrader timestamp: {text[:60]!r}")


def submission_time(notebook: Path, student_dir: Path) -> datetime | None:
    """The nearest `timestamp.txt` between the notebook's folder and the learner's folder."""
    folder = notebook.parent
    while True:
        stamp = folder / TIMESTAMP_FILE
        if stamp.is_file():
            return read_timestamp(stamp)
        if folder == student_dir or student_dir not in folder.parents:
            return None
        folder = folder.parent


def find_submissions(folder: str | Path) -> list[Submission]:
    """Every notebook under `<student>/`, in a stable order, checkpoints left out."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder of student folders")
    found = []
    for student in sorted(p for p in folder.iterdir() if p.is_dir()):
        for path in sorted(student.rglob("*.ipynb")):
            if ".ipynb_checkpoints" in path.parts:
                continue
            found.append(Submission(path, student.name, submitted_at=submission_time(path, student)))
    return found

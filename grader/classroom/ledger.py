"""The grading service's ledger (grader.classroom.onsubmit): one entry per submission in nbgrader's
exchange, and what became of it; `<course dir>/on-submit/state.json`, written whole and atomically.

    queued -> grading -> graded | failed (its recorded zero and the reason)
    refused (the policy: attempts, time between attempts), held (for the instructor's batch),
    superseded (a newer submission of the same learner and chapter took its place in the queue)
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path

from nbgrader.utils import parse_utc

STATE_DIR = "on-submit"
QUEUED, GRADING, GRADED, FAILED, REFUSED, HELD, SUPERSEDED = (
    "queued", "grading", "graded", "failed", "refused", "held", "superseded")
ATTEMPTS = (QUEUED, GRADING, GRADED, FAILED)  # what counts against a learner's attempts


def now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class Entry:
    id: str  # the inbound folder's name
    student: str
    assignment: str
    submitted_at: str  # ISO 8601, UTC
    status: str = QUEUED
    reason: str = ""
    score: float | None = None  # after the late penalty
    raw_score: float | None = None
    max_score: float | None = None
    penalty: float = 0.0
    checks: list = field(default_factory=list)  # [{"name", "score", "max_score", "error"}]
    score_only: bool = False  # the feedback showed scores, not the checks' messages (the policy)
    feedback: str | None = None  # file under on-submit/feedback/<key>/
    counted: bool = False  # the attempt the gradebook holds
    seen_at: str = ""
    graded_at: str | None = None
    lang: str = "en"  # the edition of the notebook graded: its page is in that language
    pending: list = field(default_factory=list)  # written answers not yet graded by hand (grader.classroom.total)

    @property
    def key(self) -> str:
        return hashlib.sha256(self.id.encode()).hexdigest()[:16]


def parse_inbound(name: str) -> tuple[str, str, datetime] | None:
    """student, assignment, submission time of an inbound folder name (None: not nbgrader's)."""
    parts = name.rsplit("+", 3)
    if len(parts) == 3:  # nbgrader without its random suffix
        parts.append("")
    if len(parts) != 4 or not parts[0] or not parts[1]:
        return None
    try:
        when = parse_utc(parts[2])
    except (ValueError, OverflowError):
        return None
    return parts[0], parts[1], when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when


class Ledger:
    """on-submit/state.json: every submission seen, written whole and atomically after each change."""

    def __init__(self, course_dir: Path):
        self.path = Path(course_dir) / STATE_DIR / "state.json"
        self.lock = threading.RLock()
        self.entries: dict[str, Entry] = {}
        if self.path.is_file():
            names = {f.name for f in fields(Entry)}
            for raw in json.loads(self.path.read_text())["entries"]:
                entry = Entry(**{k: v for k, v in raw.items() if k in names})
                self.entries[entry.id] = entry

    def save(self) -> None:
        with self.lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"entries": [asdict(e) for e in self.entries.values()]}, indent=1))
            os.replace(tmp, self.path)

    def of(self, student: str | None = None, assignment: str | None = None) -> list[Entry]:
        """Entries, newest submission first."""
        with self.lock:
            found = [e for e in self.entries.values() if (student is None or e.student == student)
                     and (assignment is None or e.assignment == assignment)]
        return sorted(found, key=lambda e: (e.submitted_at, e.id), reverse=True)

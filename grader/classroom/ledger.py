"""The grading service's ledger (grader.classroom.onsubmit.service): one entry per submission in nbgrader's
exchange, and what became of it; `<course dir>/on-submit/ledger.sqlite` (the stdlib's sqlite3), one
row per entry, written as each entry changes (a scan of 1,200 folders is 1,200 row writes in one
transaction, not 1,200 rewrites of the whole ledger). A ledger kept by an earlier version as
`state.json` is read into it on first open and kept as `state.json.migrated`.

    queued -> grading -> graded | failed (its recorded zero and the reason)
    refused (the policy: attempts, time between attempts, rate), held (for the instructor's batch),
    superseded (a newer submission of the same learner and chapter took its place in the queue)

Times in an entry are the service's own clock (`seen_at`, and `submitted_at`: when the content graded
was last changed, by the kernel's clock; grader.classroom.intake.safecopy), never the learner's folder name
or timestamp.txt (kept as `claimed_at`, shown, never used). Every time read back is range-checked.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path

from nbgrader.utils import parse_utc

STATE_DIR = "on-submit"
DATABASE = "ledger.sqlite"
QUEUED, GRADING, GRADED, FAILED, REFUSED, HELD, SUPERSEDED = (
    "queued", "grading", "graded", "failed", "refused", "held", "superseded")
ATTEMPTS = (QUEUED, GRADING, GRADED, FAILED)  # a place in the queue or a grade
EARLIEST, LATEST = datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2100, 1, 1, tzinfo=timezone.utc)


def now() -> datetime:
    return datetime.now(timezone.utc)


def checked_time(value, where: str = "time") -> datetime:
    """An aware UTC datetime from ISO text or a datetime, between 2000 and 2100, else a ValueError."""
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    except ValueError:
        raise ValueError(f"{where}: {str(value)[:40]!r} is not a date and time") from None
    if not isinstance(moment, datetime):
        raise ValueError(f"{where}: {str(value)[:40]!r} is not a date and time")
    moment = moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)
    if not EARLIEST <= moment < LATEST:
        raise ValueError(f"{where}: {moment:%Y-%m-%d} is out of range ({EARLIEST:%Y} to {LATEST:%Y})")
    return moment


@dataclass
class Entry:
    id: str  # the inbound folder's name
    student: str
    assignment: str
    submitted_at: str  # ISO 8601, UTC: the kernel's time of the last change to what is graded
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
    seen_at: str = ""  # when the service first saw the folder (its own clock)
    graded_at: str | None = None  # set once a grade was recorded: only then is it an attempt used
    lang: str = "en"  # the edition of the notebook graded: its page is in that language
    # written answers not yet graded by hand (grader.classroom.grades.total)
    pending: list = field(default_factory=list)
    claimed_at: str = ""  # the time the folder name gives (the learner's word: shown, never used)
    tries: int = 0  # gradings started (a service that stops while grading one tries it again)
    time_limit: float | None = None  # seconds its notebook may run, set when its grading starts (timelimit.fitted)

    @property
    def key(self) -> str:
        return hashlib.sha256(self.id.encode()).hexdigest()[:16]

    @property
    def used_attempt(self) -> bool:
        return self.graded_at is not None and self.status in (GRADED, FAILED)


def parse_inbound(name: str) -> tuple[str, str, datetime | None] | None:
    """student, assignment and the claimed time of an inbound folder name (None: not nbgrader's);
    the time is None when it is not one, or out of range (it is the learner's word only)."""
    parts = name.rsplit("+", 3)
    if len(parts) == 3:  # nbgrader without its random suffix
        parts.append("")
    if len(parts) != 4 or not parts[0] or not parts[1]:
        return None
    try:
        when = parse_utc(parts[2])
    except (ValueError, OverflowError, TypeError):
        return None
    try:
        return parts[0], parts[1], checked_time(when)
    except ValueError:  # a time, but not a plausible one: graded all the same (the service keeps its own)
        return parts[0], parts[1], None


def inbound_groups(inbound: Path, known=()) -> dict[tuple[str, str], list[tuple[float, str, datetime | None]]]:
    """The exchange's inbound folders not in `known`, by learner and chapter, newest first by the kernel's
    clock (each folder's ctime, which a learner cannot set back): (ctime, folder name, claimed time).
    Links and files are left out; so is a folder nbgrader is still copying in (no timestamp.txt yet, and
    changed in the last 5 s). One look at each folder: linear in the folders."""
    groups: dict[tuple[str, str], list] = {}
    with os.scandir(inbound) as found:
        for item in found:
            if item.name in known or not item.is_dir(follow_symlinks=False):
                continue
            info = parse_inbound(item.name)
            if info is None:
                continue
            stamp = item.stat(follow_symlinks=False)
            if not os.path.lexists(os.path.join(item.path, "timestamp.txt")) and time.time() - stamp.st_mtime < 5:
                continue
            groups.setdefault(info[:2], []).append((stamp.st_ctime, item.name, info[2]))
    for items in groups.values():
        items.sort(reverse=True)
    return groups


FIELDS = [f.name for f in fields(Entry)]


class Ledger:
    """Every submission seen: in memory for reading (indexed by learner and chapter), each change
    written to SQLite as it happens (`put`)."""

    def __init__(self, course_dir: Path):
        folder = Path(course_dir) / STATE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / DATABASE
        self.lock = threading.RLock()
        self.entries: dict[str, Entry] = {}
        self._by_learner: dict[tuple[str, str], dict[str, Entry]] = {}
        self._by_student: dict[str, dict[str, Entry]] = {}
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS entries (id TEXT PRIMARY KEY, data TEXT NOT NULL)")
        for (data,) in self.db.execute("SELECT data FROM entries"):
            self._index(_entry(json.loads(data)))
        self._migrate(folder / "state.json")

    def _migrate(self, old: Path) -> None:
        if not old.is_file():
            return
        raw = json.loads(old.read_text()).get("entries", [])
        self.put(*[e for e in map(_entry, raw) if e.id not in self.entries])
        old.rename(old.with_name("state.json.migrated"))

    def _index(self, entry: Entry) -> None:
        self.entries[entry.id] = entry
        self._by_learner.setdefault((entry.student, entry.assignment), {})[entry.id] = entry
        self._by_student.setdefault(entry.student, {})[entry.id] = entry

    def put(self, *entries: Entry) -> None:
        """Add or update these entries, in one transaction."""
        if not entries:
            return
        with self.lock:
            for entry in entries:
                self._index(entry)
            with self._transaction():
                self.db.executemany("INSERT OR REPLACE INTO entries (id, data) VALUES (?, ?)",
                                    [(e.id, json.dumps(asdict(e))) for e in entries])

    def save(self) -> None:
        """Every entry written again (after changes made to entries in place)."""
        with self.lock:
            self.put(*self.entries.values())

    @contextlib.contextmanager
    def _transaction(self):
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def of(self, student: str | None = None, assignment: str | None = None) -> list[Entry]:
        """Entries, newest submission first."""
        with self.lock:
            if student is not None and assignment is not None:
                found = list(self._by_learner.get((student, assignment), {}).values())
            elif student is not None:
                found = list(self._by_student.get(student, {}).values())
            else:
                found = [e for e in self.entries.values() if (student is None or e.student == student)
                         and (assignment is None or e.assignment == assignment)]
        return sorted(found, key=lambda e: (e.submitted_at, e.id), reverse=True)

    def close(self) -> None:
        self.db.close()


def _entry(raw: dict) -> Entry:
    return Entry(**{k: v for k, v in raw.items() if k in FIELDS})

"""Per-learner accommodations: one learner's own on-submit policy for a chapter, in term.toml.

    [accommodations.learner7]
    "02" = { attempts = 10, min_minutes_between = 0, due = 2026-12-01T23:59:00Z, time_limit_seconds = 600 }

Each key overrides the chapter's [on_submit] setting of the same name for this learner alone
(grader.classroom.policy.submitpolicy: `attempts`, `min_minutes_between`, `per_hour`, `time_limit_factor`,
`time_limit_seconds`); `due` is the learner's due date, as a row of the extensions CSV would give it (the
chapter needs a due date in [due], and one learner and chapter gets one of the two, not both): the late
penalty, the grading service's after-due rule and when the checks' messages show all follow it.

A learner named must be in the class, else the term file has an error that names them (a typo would
silently grant nothing). The class is the hub's `COURSE_LEARNERS` (its allow-list, when the service's
environment has it) and the learners in nbgrader's gradebook (everyone graded, and anyone added with
`nbgrader db student add NAME` or `nbgrader db student import roster.csv`).
"""
from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from grader.chapters import find_chapter
from grader.classroom.intake.identity import LEARNERS_ENV, the_class
from grader.classroom.locks import sqlite_path
from grader.classroom.policy.submitpolicy import SubmitPolicy, overridden

POLICY_KEYS = {"attempts", "min_minutes_between", "per_hour", "time_limit_factor", "time_limit_seconds"}
KEYS = POLICY_KEYS | {"due"}


@dataclass(frozen=True)
class Accommodation:
    student: str
    assignment: str
    settings: dict  # the on_submit keys it overrides, as term.toml gives them
    due: datetime | None = None

    def text(self) -> str:
        """"attempts 10, min_minutes_between 0, due 2026-12-01 23:59 UTC", for the class page."""
        parts = [f"{key} {value:g}" if isinstance(value, (int, float)) else f"{key} {value}"
                 for key, value in sorted(self.settings.items())]
        if self.due is not None:
            parts.append(f"due {self.due:%Y-%m-%d %H:%M UTC}")
        return ", ".join(parts)


def parse_accommodations(table, where: str, parse_time) -> dict[tuple[str, str], Accommodation]:
    """(student, assignment) -> the learner's accommodation; `parse_time(value, where)`: term.toml's."""
    if not isinstance(table, dict):
        raise ValueError(f"{where}: accommodations holds one table per learner ([accommodations.NAME])")
    found = {}
    for student, chapters in table.items():
        if not isinstance(chapters, dict) or not student.strip():
            raise ValueError(f'{where}: accommodations.{student} holds one table per chapter ("02" = {{ ... }})')
        for key, settings in chapters.items():
            here = f"{where}: accommodations.{student}.{key}"
            assignment = find_chapter(str(key)).assignment
            if not isinstance(settings, dict) or not settings or set(settings) - KEYS:
                raise ValueError(f"{here}: takes {', '.join(sorted(KEYS))}"
                                 + (f", not {', '.join(sorted(set(settings) - KEYS))}"
                                    if isinstance(settings, dict) and set(settings) - KEYS else ""))
            overridden(SubmitPolicy(), {k: v for k, v in settings.items() if k != "due"}, here)  # checks the values
            due = parse_time(settings["due"], f"{here}.due") if "due" in settings else None
            if (student, assignment) in found:
                raise ValueError(f"{here}: a second accommodation for {student} in {assignment}")
            found[(student, assignment)] = Accommodation(student, assignment,
                                                         {k: v for k, v in settings.items() if k != "due"}, due)
    return found


def merge_due(accommodations: dict, extensions: dict, due: dict, where: str) -> None:
    """An accommodation's due date joins the extensions (every due-date rule reads them), checked as one."""
    for (student, assignment), accommodation in accommodations.items():
        if accommodation.due is None:
            continue
        if assignment not in due:
            raise ValueError(f"{where}: accommodations.{student} gives a due date for {assignment}, which has no "
                             "due date in [due]")
        if (student, assignment) in extensions:
            raise ValueError(f"{where}: {student} has both an extension and an accommodation's due date for "
                             f"{assignment}; keep one")
        extensions[(student, assignment)] = accommodation.due


def class_roster(course_dir: str | Path) -> set[str]:
    """The learners of the class: the hub's COURSE_LEARNERS and the gradebook's students."""
    from grader.coursedir import database_of  # lazy: coursedir imports recording, which imports the class

    learners = set(the_class() or ())
    url = database_of(course_dir)
    path = sqlite_path(url)
    if path is not None:  # read-only: the service reads term.toml every round
        if not path.is_file():
            return learners
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)) as db:
            try:
                return learners | {row[0] for row in db.execute("SELECT id FROM student")}
            except sqlite3.OperationalError:  # no tables yet
                return learners
    from nbgrader.api import Gradebook

    with Gradebook(url) as gb:
        return learners | {s.id for s in gb.students}


def check_roster(accommodations: dict, roster: set[str], where: str) -> None:
    """A ValueError naming each learner given an accommodation who is not in the class."""
    import difflib

    strangers = sorted({s for s, _ in accommodations} - roster)
    if not strangers:
        return
    near = {s: difflib.get_close_matches(s, sorted(roster), n=2, cutoff=0.6) for s in strangers}
    names = "; ".join(s + (f" (near: {', '.join(near[s])})" if near[s] else "") for s in strangers)
    raise ValueError(f"{where}: accommodations for learner(s) not in this class: {names}. The class is "
                     f"${LEARNERS_ENV} and the gradebook's students (`nbgrader db student add NAME`)")


def policy_for(base: SubmitPolicy, accommodation: Accommodation | None) -> SubmitPolicy:
    """The chapter's policy with the learner's accommodation, if any."""
    if accommodation is None or not accommodation.settings:
        return base
    return overridden(base, accommodation.settings, "accommodation")

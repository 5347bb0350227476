"""The instructor's policy for grading on submit: the `[on_submit]` table of term.toml.

    [on_submit]
    chapters = ["02", "03"]          # or "all"; a chapter left out is graded by the instructor's batch only
    attempts = 3                     # graded attempts per learner and chapter (default: no limit)
    counts = "best"                  # which attempt the gradebook keeps: "last" (default) or "best"
    min_minutes_between = 2          # a submission sooner than this after the last graded one is refused
    feedback_before_due = "checks"   # "checks": each check and its message; "score": the scores only
    after_due = "grade"              # "grade": graded at once, the late policy applied; "hold": left for
                                     # the instructor's batch
    per_hour = 20                    # submissions a learner may put in the queue per hour (all chapters)
    time_limit_factor = 5            # a submission may take this many times the chapter's reference
    time_limit_seconds = 300         # or this limit itself (grader.classroom.policy.timelimit)
    [on_submit.chapter."02"]         # any key above, for one chapter
    attempts = 5

grader.classroom.onsubmit.service applies it; grader.classroom.policy.term reads it with the rest of the file, so a
bad table stops `grader autograde` and the service before they grade anything.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from grader.chapters import CHAPTERS, find_chapter

COUNTS = ("last", "best")
FEEDBACK = ("checks", "score")
AFTER_DUE = ("grade", "hold")
PER_CHAPTER = 3  # regrade requests a learner may make per chapter ([requests], grader.classroom.grades.requests)
KEYS = {"chapters", "attempts", "counts", "min_minutes_between", "feedback_before_due", "after_due", "chapter",
        "per_hour", "time_limit_factor", "time_limit_seconds"}


@dataclass(frozen=True)
class SubmitPolicy:
    enabled: bool = False
    attempts: int | None = None  # None: no limit
    counts: str = "last"
    min_seconds_between: float = 0.0
    feedback_before_due: str = "checks"
    after_due: str = "grade"
    per_hour: int = 20
    time_limit_factor: float = 5.0
    time_limit_seconds: float | None = None


def _settings(table: dict, where: str, base: SubmitPolicy) -> SubmitPolicy:
    changes = {}
    if "attempts" in table:
        value = table["attempts"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{where}.attempts: {value!r} is not a whole number of attempts, 1 or more")
        changes["attempts"] = value
    if "min_minutes_between" in table:
        value = table["min_minutes_between"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{where}.min_minutes_between: {value!r} is not a number of minutes, 0 or more")
        changes["min_seconds_between"] = float(value) * 60
    if "per_hour" in table:
        value = table["per_hour"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{where}.per_hour: {value!r} is not a whole number of submissions, 1 or more")
        changes["per_hour"] = value
    for key in ("time_limit_factor", "time_limit_seconds"):
        value = table.get(key)
        if key in table and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise ValueError(f"{where}.{key}: {value!r} is not a number above 0")
        if key in table:
            changes[key] = float(value)
    for key, allowed in (("counts", COUNTS), ("feedback_before_due", FEEDBACK), ("after_due", AFTER_DUE)):
        if key in table:
            if table[key] not in allowed:
                raise ValueError(f"{where}.{key}: {table[key]!r}; choose one of {', '.join(map(repr, allowed))}")
            changes[key] = table[key]
    return replace(base, **changes)


def overridden(base: SubmitPolicy, table: dict, where: str) -> SubmitPolicy:
    """`base` with the settings of `table` (a learner's accommodation: grader.classroom.policy.accommodations)."""
    return _settings(table, where, base)


def parse_on_submit(table: dict, where: str) -> dict[str, SubmitPolicy]:
    """assignment -> its policy, for every chapter (off where the table does not switch it on)."""
    if not isinstance(table, dict):
        raise ValueError(f"{where}: on_submit must be a table ([on_submit])")
    unknown = set(table) - KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {sorted(unknown)} in [on_submit]; known: {', '.join(sorted(KEYS))}")
    chosen = table.get("chapters", [])
    if chosen == "all":
        enabled = {c.assignment for c in CHAPTERS}
    elif isinstance(chosen, list):
        enabled = {find_chapter(str(key)).assignment for key in chosen}
    else:
        raise ValueError(f"{where}: on_submit.chapters is a list of chapters or \"all\", not {chosen!r}")
    base = _settings(table, f"{where}: on_submit", SubmitPolicy())
    policies = {c.assignment: replace(base, enabled=c.assignment in enabled) for c in CHAPTERS}
    overrides = table.get("chapter", {})
    if not isinstance(overrides, dict):
        raise ValueError(f"{where}: on_submit.chapter holds one table per chapter ([on_submit.chapter.\"02\"])")
    for key, sub in overrides.items():
        assignment = find_chapter(str(key)).assignment
        if not isinstance(sub, dict) or set(sub) - (KEYS - {"chapters", "chapter"}):
            raise ValueError(f"{where}: on_submit.chapter.{key} takes attempts, counts, min_minutes_between, "
                             "feedback_before_due, after_due, per_hour, time_limit_factor, time_limit_seconds")
        policies[assignment] = _settings(sub, f"{where}: on_submit.chapter.{key}", policies[assignment])
    return policies


def parse_requests(table, where: str) -> int:
    """term.toml's `[requests]` table: `per_chapter`, the requests a learner may make per chapter."""
    if not isinstance(table, dict) or set(table) - {"per_chapter"}:
        raise ValueError(f"{where}: [requests] takes per_chapter (a whole number, 0 or more) only")
    value = table.get("per_chapter", PER_CHAPTER)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: requests.per_chapter: {value!r} is not a whole number, 0 or more")
    return value

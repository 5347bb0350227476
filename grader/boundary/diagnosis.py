"""Trusted side: the likely mistake behind an exercise's lost points, in the words of the notebook's own check.

After a submission's last cell, for each exercise whose hidden checks failed, the child serves the object
that exercise's test cell judged once more (grader.boundary.child), and the exercise's public check
(`course.checks.<chapter>.check_<exercise>`) runs here against proxies of it, as the hidden checks do
(grader.boundary.proxy): the same stand-ins, calls and comparisons. Its inputs are public, so nothing
hidden is used. Only a failure that names a mistake the check knows (`course.checks.mistake`: its stored numbers)
is kept, as text beside the exercise's report (grader.classroom.grading.recording); a passing check or a generic
"wrong values" adds nothing. Every score was judged before this runs: whatever the learner's object does
here (raise, hang, end its process) costs only the text, and a time budget bounds it.
"""
from __future__ import annotations

import importlib
import time
from typing import Any, Callable

import torch

from course.checks import ON_GRADERS_SIDE, CheckFailed
from grader.boundary.proxy import Session, turn
from grader.boundary.spec import Exercise, in_place_record
from grader.boundary.wire import Lost, WireError

SECONDS = 5.0  # the learner's code, per exercise diagnosed (a public check takes well under a second)
BUDGET = 15.0  # all the diagnoses of one submission, wall clock
GRACE = 2.0  # seconds past SECONDS before a silent child counts as lost (then no more diagnoses)
LIMIT = 500  # characters of a diagnosis kept (grader.classroom.grading.recording bounds what it reads alike)
UNWRITTEN = "not implemented yet"  # grader.boundary.score's reason for a check the skeleton fails


def public_check(chapter_name: str, exercise: str) -> Callable[[Any], None] | None:
    """The notebook's own check of `exercise`, or None where it has none."""
    try:
        module = importlib.import_module(f"course.checks.{chapter_name}")
    except Exception:  # noqa: BLE001 - no check to run: no text, never a failed grading
        return None
    check = getattr(module, f"check_{exercise}", None)
    return check if callable(check) else None


def lost_points(message: Any) -> bool:
    """A judged cell (grader.boundary.proxy.judge_exercise's dict) with a check that failed on written code:
    not a skeleton's "not implemented yet", not a cell with no credit (nothing defined, a time limit, a
    forbidden call: the report says why already)."""
    if type(message) is not dict or message.get("zero_reason"):
        return False
    return any(type(item) is list and len(item) == 2 and item[1] != UNWRITTEN for item in message.get("failed") or [])


def diagnose(exercise: Exercise, check: Callable[[Any], None], conn, seconds: float = SECONDS,
             deadline: float | None = None) -> str | None:
    """Run `check` here on the object the child at `conn` judged for `exercise`, by `deadline` (time.monotonic();
    by default `seconds` and the grace from now): the message of the known mistake it names, else None. Lost
    or WireError when the child stopped answering, ran past the deadline or broke the protocol."""
    found = None
    with turn(), torch.random.fork_rng(devices=[]):
        session = Session(conn, seconds, grace=GRACE, deadline=deadline)
        obj = session.request("begin", exercise.name, dict(exercise.stand_ins), list(exercise.forbidden),
                              float(seconds))
        if obj is not None:
            token = ON_GRADERS_SIDE.set(True)
            try:
                with in_place_record(session.changed_in_place):
                    check(obj)
            except CheckFailed as err:  # raised here, by the check's own code: never the learner's
                found = str(err)[:LIMIT] if err.known else None
            except (Lost, WireError):
                raise
            except Exception:  # noqa: BLE001 - any other failure of the check or the learner's code: no text
                pass
            finally:
                ON_GRADERS_SIDE.reset(token)
        session.request("end")  # raises Lost where the check swallowed it
    return found


def diagnose_all(chapter_name: str, tests: dict[int, Exercise], cells: dict[int, dict], conn,
                 budget: float = BUDGET) -> None:
    """Add `"diagnosis"` to each judged cell (index -> its dict) that lost points and whose public check
    names a known mistake, within `budget` seconds (and the grace: the trusted side's own deadline, whatever
    the child does to its clock); stops at the first child that no longer answers."""
    started = time.monotonic()
    ends = started + budget + GRACE
    for index, exercise in tests.items():
        if not lost_points(cells.get(index)) or (check := public_check(chapter_name, exercise.name)) is None:
            continue
        left = budget - (time.monotonic() - started)
        if left < 1:
            return
        try:
            found = diagnose(exercise, check, conn, min(SECONDS, left),
                             deadline=min(time.monotonic() + min(SECONDS, left) + GRACE, ends))
        except Exception:  # noqa: BLE001 - the child is lost or the conversation broken: no more text
            return
        if found:
            cells[index]["diagnosis"] = found

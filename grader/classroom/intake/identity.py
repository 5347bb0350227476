"""One gate for identity (DESIGN.md invariant 10): `admit_student`.

Every student id that reaches the gradebook or a page passes it, wherever it comes from: a folder of the
exchange (`grader collect`, the grading service), a folder of student folders (`grader autograde`, also
nbgrader's `submitted/` after its own `collect`), an LMS download (grader.classroom.intake.lms). A learner
chooses all of these names (an inbound folder is any name a learner writes into a folder writable by
all), so the gate asks three things, and a refusal is a note for the instructor, graded for nobody:
- a safe name: it becomes a folder name, an nbgrader student id and text on Formgrader's pages, so
  letters, digits and `_.@-` only, starting with a letter or digit (never markup, never `..`);
- a member of the class where the class is known: the hub's `COURSE_LEARNERS` (its allow-list, which the
  hub gives the grading service and the instructor's server); no allow-list, no class to check;
- from an exchange, the owner of the folder: each learner is a unix user (setup-class.sh), and only the
  folder's owner, never its name, says who wrote it (nbgrader's own collect merely warns).
"""
from __future__ import annotations

import os
import pwd
import re
from pathlib import Path

from grader.boundary.score import shown

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}")  # a hub user name, safe as a folder name
LEARNERS_ENV = "COURSE_LEARNERS"


class NotALearner(ValueError):
    """A student id the gate refuses; the text says why (shown to the learner, noted for the instructor)."""


def the_class() -> frozenset[str] | None:
    """The class's learners where it is known ($COURSE_LEARNERS); None where it is not."""
    names = frozenset(name.strip() for name in os.environ.get(LEARNERS_ENV, "").split(",") if name.strip())
    return names or None


def owner_of(path: Path) -> str:
    """The unix user who owns a file, not following a link (its uid when the user is unknown)."""
    uid = path.lstat().st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def admit_student(student: str, folder: Path | None = None) -> str:
    """`student` when it may be graded; else NotALearner saying why. `folder`: the exchange folder it
    came from, whose owner must be that learner (None where the exchange is not read: the owner check
    is off, or the folder is the instructor's copy)."""
    if not isinstance(student, str) or not SAFE_NAME.fullmatch(student):
        raise NotALearner(shown("not a learner name the grader accepts"))
    members = the_class()
    if members is not None and student not in members:
        raise NotALearner(shown(f"{student} is not a learner of this class"))
    if folder is not None:
        owner = owner_of(folder)
        if owner != student:
            raise NotALearner(shown(f"the folder names {student} but the unix user {owner} wrote it"))
    return student


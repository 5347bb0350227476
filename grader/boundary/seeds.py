"""Trusted side: the secret each submission's hidden inputs are drawn from (spec.hidden_inputs), kept with its grade.

The hidden checks mix every seed they use with a secret. `grader autograde` draws a fresh one per
submission, so the inputs a learner's code recorded while it was graded (and printed into its
feedback) are not the inputs of its next grading; `grader regrade` reuses the one kept, so a regrade
asks a submission the same questions and its score changes only where a check or the release did.

They are kept in the course directory, `secrets/<assignment>.json` ({student: secret}, readable by
its owner only), beside `history/`: that folder is the instructor's and no nbgrader step copies it
anywhere a learner sees, whereas `autograded/` is rebuilt by nbgrader's autograde and is what the
feedback is generated from. The sandboxed child never receives a secret (grader.boundary.unit.Job keeps it
in the trusted process).
"""
from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

FOLDER = "secrets"
# One secret for every submission, in a kernel (grader.boundary.runner) and in `grader autograde` alike: to
# reproduce a run or compare the two routes (benchmarks/grading.py). A class leaves it unset.
ENV = "COURSE_GRADING_SEED"


def fixed() -> int | None:
    """The secret $COURSE_GRADING_SEED names; None when it is unset or not a whole number."""
    try:
        return int(os.environ[ENV])
    except (KeyError, ValueError):
        return None


def _file(root: Path, assignment: str) -> Path:
    return Path(root) / FOLDER / f"{assignment}.json"


def load(root: Path, assignment: str) -> dict[str, int]:
    try:
        kept = json.loads(_file(root, assignment).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): v for k, v in kept.items() if type(v) is int and v > 0} if isinstance(kept, dict) else {}


def draw(root: Path, assignment: str, students: list[str], reuse: bool) -> dict[str, int]:
    """student -> secret for this grading: the kept one when `reuse` (a regrade) and there is one,
    else a fresh one; saved before any judging starts."""
    kept = load(root, assignment)
    chosen = {s: kept[s] if reuse and s in kept else secrets.randbits(63) | 1 for s in students}
    path = _file(root, assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({**kept, **chosen}, handle, indent=1, sort_keys=True)
    os.replace(path.with_suffix(".tmp"), path)
    return chosen


def for_submissions(root: Path, submissions: list, reuse: bool = False) -> dict[str, int]:
    """Submission key -> secret, for submissions of any chapters (grader.classroom.submissions.Submission)."""
    chosen = {}
    for assignment in sorted({s.chapter.assignment for s in submissions}):
        subs = [s for s in submissions if s.chapter.assignment == assignment]
        drawn = draw(root, assignment, [s.student for s in subs], reuse)
        chosen.update({s.key: drawn[s.student] for s in subs})
    return chosen

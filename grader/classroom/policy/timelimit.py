"""The graded-on-submit time limit of a chapter, fitted to it: a few times what the chapter's own
reference takes in this grading pool (measured once per chapter and kept in
`on-submit/reference-seconds.json`), never under a floor, never over the pool's own limit.
term.toml's [on_submit] sets the factor (`time_limit_factor`, default 5) or the limit itself
(`time_limit_seconds`) (grader.classroom.policy.submitpolicy). Before the reference is measured the limit is
DEFAULT_SECONDS (5 minutes), not the 30 minutes the batch allows a submission. A slow notebook delays
its own learner alone: the service's workers grade each learner on their own (grader.classroom.onsubmit.service).
"""
from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

from grader.chapters import Chapter
from grader.classroom.ledger import STATE_DIR

FLOOR_SECONDS = 60  # a loaded machine, a cold first run: no reference is judged that tightly
DEFAULT_SECONDS = 300  # no reference measured yet: every chapter's reference runs in well under a minute
FILE = "reference-seconds.json"


def known_seconds(course_dir: Path, chapter: Chapter) -> float | None:
    """The chapter's reference time, if measured in this course directory."""
    path = Path(course_dir) / STATE_DIR / FILE
    kept = json.loads(path.read_text()) if path.is_file() else {}
    return float(kept[chapter.assignment]) if chapter.assignment in kept else None


def measure(pool, course_dir: Path, chapter: Chapter) -> float | None:
    """Time the chapter's reference in `pool` once (after a batch's feedback is out, so no learner
    waits for it); None while there is no release to measure against, or the run failed."""
    import nbformat  # lazy: start-up of the service, which measures once per chapter

    from grader.boundary.unit import Job  # lazy: start-up
    from grader.classroom.grading.batch import job_cells  # lazy: grading imports this module's callers

    if known_seconds(course_dir, chapter) is not None:
        return known_seconds(course_dir, chapter)
    release_dir = Path(course_dir) / "release" / chapter.assignment
    source = Path(course_dir) / "source" / chapter.assignment / chapter.notebook_name  # the answers filled in
    if not (release_dir / chapter.notebook_name).is_file() or not source.is_file():
        return None
    try:  # judge_all: the local pool's and the Dask cluster's
        released = nbformat.read(release_dir / chapter.notebook_name, as_version=4)
        reference = nbformat.read(source, as_version=4)
        job = Job("reference", chapter, job_cells(reference, released), release_dir)
        verdict = pool.judge_all([job], progress=False)["reference"]
    except Exception:  # noqa: BLE001 - no measurement: the pool's own limit applies, grading goes on
        return None
    if verdict.error:
        return None
    path = Path(course_dir) / STATE_DIR / FILE
    kept = json.loads(path.read_text()) if path.is_file() else {}
    kept[chapter.assignment] = round(verdict.seconds, 2)
    path.write_text(json.dumps(kept, indent=1))
    return verdict.seconds


def fitted(policy, reference: float | None, pool_seconds: float) -> float:
    """The limit for one submission of a chapter (seconds of wall clock)."""
    if policy.time_limit_seconds is not None:
        return min(policy.time_limit_seconds, pool_seconds)
    if reference is None:
        return min(DEFAULT_SECONDS, pool_seconds)
    return min(max(FLOOR_SECONDS, policy.time_limit_factor * reference), pool_seconds)


def limited(pool, seconds: float):
    """The pool with its whole-submission limit lowered to `seconds`: a shallow copy (the same fork server
    and children), so workers grading side by side each keep their own learner's limit."""
    lowered = copy.copy(pool)
    lowered.limits = replace(pool.limits, submission_seconds=int(max(1, min(seconds, pool.limits.submission_seconds))))
    return lowered

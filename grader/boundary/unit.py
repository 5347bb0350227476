"""Trusted side: grading one submission is one unit of work, a `Job` in and a `Verdict` out, plain data.

A pool judges a Job (grader.boundary.pool: here, or on a Dask worker, grader.classroom.grading.cluster) and
gives back its Verdict; the class records it (grader.classroom.grading.recording). Neither holds learner code:
a Job holds the cells as text and where the chapter's release folder is, a Verdict one JSON message
per cell. The hidden inputs' secret travels in the Job and stays on the trusted side.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grader.boundary.score import shown
from grader.chapters import Chapter


@dataclass
class Job:
    key: str
    chapter: Chapter
    cells: list[dict]  # per notebook cell: {"kind": "code", "source"} | {"kind": "test", "exercise"} | {"kind": "skip"}
    release_dir: Path
    secret: int = 0  # the hidden inputs' secret (grader.boundary.spec.hidden_inputs): stays in the trusted process


@dataclass
class Verdict:
    cells: dict[int, dict] = field(default_factory=dict)
    error: str | None = None  # why the run ended early, or never ran
    missing: list[str] = field(default_factory=list)  # sandbox parts this machine could not give
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)


def verdict_to_json(verdict: Verdict) -> str:
    return json.dumps(asdict(verdict))


def verdict_from_dict(data: dict) -> Verdict:
    """`asdict(verdict)` back, its cells' indices numbers again; a TypeError, ValueError, KeyError or
    AttributeError where it is not one."""
    cells = {int(index): message for index, message in data["cells"].items() if isinstance(message, dict)}
    return Verdict(cells=cells, error=None if data["error"] is None else str(data["error"]),
                   missing=[str(m) for m in data["missing"]][:5], seconds=float(data["seconds"]),
                   timings=dict(data["timings"]))


def verdict_from_json(text: str) -> Verdict:
    """A Dask worker's verdict, as plain data; anything malformed makes it a failed unit, never a score."""
    try:
        return verdict_from_dict(json.loads(text))
    except (TypeError, ValueError, KeyError, AttributeError) as err:
        return Verdict(error=shown(f"the Dask worker sent an unreadable verdict ({type(err).__name__})"))

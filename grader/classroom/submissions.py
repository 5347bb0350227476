"""A submission, and reading it defensively: which chapter, when, is it a notebook, its graded cells repaired.

`Submission` is what every step of the class passes along (intake finds them, grading stages, judges
and records them, the term dates them, the report and a regrade read their notes); its time comes from
nbgrader's `timestamp.txt` where the exchange (or the LMS) gave one, never from a file's mtime.

nbgrader aborts a batch on a duplicated grade_id (#1083) and cannot grade a deleted test cell,
so before autograde each submission is matched to the released notebook: graded cells it lost
come back from the release, duplicates and unknown ids become ordinary cells. nbgrader itself
then restores the content of every test cell from the gradebook.

A learner's file is hostile JSON, so its shape is checked once, where it is read (`read_learner_notebook`):
a file over MAX_NOTEBOOK_MB is refused before it is parsed, the rest must be an nbformat-4 notebook
by its schema, and nbgrader metadata the schema leaves free (grade_id, flags, points) must have the
types nbgrader writes; a cell whose nbgrader metadata does not is graded as an ordinary cell (and
`repair` restores the release's graded cell). Every later reader can then trust those types.
"""
from __future__ import annotations

import copy
import functools
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat

from grader.boundary.score import shown
from grader.chapters import CHAPTERS, Chapter, find_chapter

if TYPE_CHECKING:
    from grader.boundary.unit import Verdict

TIMESTAMP_FILE = "timestamp.txt"


@dataclass
class Submission:
    path: Path
    student: str
    chapter: Chapter | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    cells: list[dict] = field(default_factory=list)
    verdict: Verdict | None = None
    submitted_at: datetime | None = None  # from the exchange or the LMS; None when unknown
    lang: str = "en"  # the edition the notebook says it is (grader.classroom.phrasebook.edition_of)
    set_aside: bool = False  # another notebook of this learner and chapter is graded instead

    @property
    def key(self) -> str:
        return f"{self.student}/{self.chapter.assignment if self.chapter else self.path.name}"


def read_timestamp(path: Path) -> datetime:
    """nbgrader's `timestamp.txt` ("2026-11-23 14:05:09.123456 UTC"), as an aware datetime. The file
    comes with the learner's submission: only its first bytes are read, and anything else is a ValueError."""
    try:
        with path.open("rb") as handle:
            text = handle.read(100).decode().strip()
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not an nbgrader timestamp ({type(err).__name__})") from None
    for suffix, fmt in ((" UTC", "%Y-%m-%d %H:%M:%S.%f"), (" UTC", "%Y-%m-%d %H:%M:%S"),
                        ("", "%Y-%m-%d %H:%M:%S.%f%z")):
        try:
            stamp = datetime.strptime(text.removesuffix(suffix), fmt)
        except ValueError:
            continue
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)
    raise ValueError(f"{path}: not an nbgrader timestamp: {text[:60]!r}")


def write_timestamp(path: Path, when: datetime) -> None:
    """The same format nbgrader's exchange writes."""
    path.write_text(when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC"))


# A submission time is plausible between these (anything else is a ValueError, never a crash later).
EARLIEST, LATEST = datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2100, 1, 1, tzinfo=timezone.utc)


def submission_time(notebook: Path, student_dir: Path) -> datetime | None:
    """The nearest `timestamp.txt` between the notebook's folder and the learner's folder, range-checked
    and never later than the file itself was written (its ctime, the kernel's clock). Written by the
    grader (`grader collect`, the grading service, an LMS time), it is the grader's; written by
    `nbgrader collect`, it is the learner's claim, and only that bound holds
    (guides/teaching.md: What a learner writes, around the sandbox)."""
    folder = notebook.parent
    while True:
        stamp = folder / TIMESTAMP_FILE
        if stamp.is_file() and not stamp.is_symlink():
            claimed = read_timestamp(stamp)
            if not EARLIEST <= claimed < LATEST:
                raise ValueError(f"{stamp}: {claimed:%Y-%m-%d} is not a plausible submission time")
            return min(claimed, datetime.fromtimestamp(stamp.stat().st_ctime, timezone.utc))
        if folder == student_dir or student_dir not in folder.parents:
            return None
        folder = folder.parent


class BadSubmission(ValueError):
    """A submission that cannot be graded at all (unknown chapter, not a notebook)."""


# What a browser adds to a second download ("self_attention (1)") and JupyterLab to a duplicate
# ("self_attention-Copy1"); a learner's own renames are recognised by content instead.
COPY_SUFFIX = re.compile(r"(?:\s*\(\d+\)|-Copy\d*)+$")


def identify(path: Path) -> Chapter:
    return identify_with_rule(path)[0]


def identify_with_rule(path: Path) -> tuple[Chapter, str | None]:
    """The chapter of a submission and, when its name alone did not say it, the rule that told."""
    try:
        return find_chapter(path.name), None
    except ValueError as err:
        reason = err
    stem = COPY_SUFFIX.sub("", path.name.removesuffix(".ipynb"))
    try:
        chapter = find_chapter(stem)
        return chapter, shown(f"{path.name}: recognised as chapter {chapter.assignment} (its name less a copy suffix)")
    except ValueError:
        pass
    chapter = chapter_of_cells(path)
    if chapter is None:
        raise BadSubmission(shown(f"{path.name}: cannot tell which chapter this is ({reason}; "
                                  "its graded cells are none of a chapter's either)")) from None
    return chapter, shown(f"{path.name}: recognised as chapter {chapter.assignment} by its graded cells "
                          "(its file name is not the chapter's)")


@functools.cache
def grade_ids(chapter: Chapter) -> frozenset[str]:
    """Every grade_id of the chapter's released notebook (its exercise and test cells)."""
    nb = nbformat.read(chapter.course_notebook, as_version=4)
    return frozenset(filter(None, (grade_id_of(c) for c in nb.cells)))


def chapter_of_cells(path: Path) -> Chapter | None:
    """The one chapter sharing the most grade_ids with the notebook; None when no chapter or a tie."""
    try:
        ids = {grade_id_of(c) for c in read_notebook(path).cells} - {None}
    except BadSubmission:
        return None
    shared = sorted(((len(ids & grade_ids(c)), c.number, c) for c in CHAPTERS), reverse=True)
    (best, _, chapter), (second, _, _) = shared[0], shared[1]
    return chapter if best and best > second else None


# Every chapter notebook saved with all the figures of a full run is under 1 MB (measured with
# grader.authoring.execute on the reference: 0.34 MB for chapter 02 to 0.71 MB for chapter 09); 20 MB leaves
# room for a learner's own plots while bounding what parsing a file costs (several times its size).
MAX_NOTEBOOK_MB = 20
GRADE_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")  # nbgrader's own rule for a grade_id, and a sane length
FLAGS = ("grade", "solution", "locked", "task")
# nbgrader's hidden-test markers, which the source notebook holds and its release never does (a solution's
# own markers are no sign: a learner's answer may keep them): a submission holding them is the source,
# read through a link or copied, with the model answers and the hidden tests.
SOURCE_MARKS = re.compile(r"^\s*#+\s*(BEGIN|END) HIDDEN TESTS\b", re.M)


def read_notebook(path: Path) -> nbformat.NotebookNode:
    return read_learner_notebook(path)[0]


def read_learner_notebook(path: Path, max_mb: float = MAX_NOTEBOOK_MB) -> tuple[nbformat.NotebookNode, list[str]]:
    """A learner's notebook, its shape checked (see the module docstring), and what was set right."""
    if path.is_symlink():  # a link to a file the grader can read and the learner cannot (a source notebook)
        raise BadSubmission(shown(f"{path.name} is a link to another file, not a notebook"))
    size = path.stat().st_size if path.is_file() else 0
    if size > max_mb * 2 ** 20:
        raise BadSubmission(shown(f"{path.name}: the notebook is {size / 2 ** 20:.1f} MB, "
                                  f"over the limit of {max_mb:g} MB"))
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as err:  # noqa: BLE001 - every way a file can fail to be a notebook
        first = str(err).splitlines()[0][:200] if str(err) else ""
        raise BadSubmission(shown(f"{path.name} is not a readable Jupyter notebook: "
                                  f"{type(err).__name__}: {first}")) from None
    marked = next((i for i, c in enumerate(nb.cells) if SOURCE_MARKS.search(str(c.get("source", "")))), None)
    if marked is not None:  # reported as an alarm (a zero with this reason), never scored
        raise BadSubmission(shown(f"ALARM: {path.name} holds the class's source notebook (cell {marked + 1} has its "
                                  "hidden-test markers): not scored; check how the learner got it"))
    notes = []
    for index, cell in enumerate(nb.cells):
        problem = nbgrader_problem(cell.metadata.get("nbgrader"))
        if problem:
            del cell.metadata["nbgrader"]
            notes.append(f"cell {index + 1}: its nbgrader metadata {problem}: graded as an ordinary cell")
    return nb, notes


def nbgrader_problem(meta) -> str | None:
    """What is wrong with a cell's nbgrader metadata (None: nothing, or it has none)."""
    if meta is None:
        return None
    if not isinstance(meta, dict):
        return f"is a {type(meta).__name__}, not an object"
    grade_id = meta.get("grade_id")
    if not isinstance(grade_id, str) or not GRADE_ID.fullmatch(grade_id):
        return f"has a grade_id that is not a short name ({type(grade_id).__name__} {repr(grade_id)[:40]})"
    wrong = [k for k in FLAGS if k in meta and not isinstance(meta[k], bool)]
    points = meta.get("points", 0)
    if isinstance(points, bool) or not isinstance(points, (int, float)) or not math.isfinite(points) or points < 0:
        wrong.append("points")
    if not isinstance(meta.get("schema_version", 3), int) or not isinstance(meta.get("checksum", ""), str):
        wrong.append("schema_version or checksum")
    return f"has {', '.join(wrong)} of the wrong type" if wrong else None


def grade_id_of(cell) -> str | None:
    """A cell's grade_id; None for an ordinary cell, and for one whose grade_id is not a name."""
    meta = cell.get("metadata", {}).get("nbgrader") if isinstance(cell, dict) else None
    grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
    return grade_id if isinstance(grade_id, str) else None


_grade_id = grade_id_of


def repair(submitted: nbformat.NotebookNode,
           released: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, list[str]]:
    """Match the submission's graded cells to the release; return it and what was repaired."""
    known = [_grade_id(c) for c in released.cells if _grade_id(c)]
    notes: list[str] = []
    seen: set[str] = set()
    cells = []
    for cell in submitted.cells:
        grade_id = _grade_id(cell)
        if grade_id is not None and (grade_id not in known or grade_id in seen):
            cell = copy.deepcopy(cell)
            del cell.metadata["nbgrader"]
            notes.append(shown(f"cell {grade_id!r} is a duplicate: graded as an ordinary cell") if grade_id in seen
                         else shown(f"cell {grade_id!r} is unknown: graded as an ordinary cell"))
            grade_id = None
        if grade_id:
            seen.add(grade_id)
        cells.append(cell)
    for index, released_cell in enumerate(released.cells):
        grade_id = _grade_id(released_cell)
        if not grade_id or grade_id in seen:
            continue
        previous = [_grade_id(c) for c in released.cells[:index] if _grade_id(c)]
        position = len(cells)
        for i, cell in enumerate(cells):
            if _grade_id(cell) in previous:
                position = i + 1
        cells.insert(position, copy.deepcopy(released_cell))
        seen.add(grade_id)
        notes.append(shown(f"cell {grade_id!r} was missing: restored from the release"))
    released_cells = {_grade_id(c): c for c in released.cells if _grade_id(c)}
    for i, cell in enumerate(cells):
        original = released_cells.get(_grade_id(cell))
        if original is None:
            continue
        if cell.get("cell_type") != original.cell_type or cell.metadata.nbgrader != original.metadata.nbgrader:
            # nbgrader's metadata and the cell's type are the release's: a submission cannot re-type a
            # cell, move points or flip a grade flag (nbgrader itself would abort on some of these).
            restored = copy.deepcopy(original)
            if original.metadata.nbgrader.get("solution"):
                restored.source = cell.get("source", "")
            cells[i] = restored
            notes.append(shown(f"cell {_grade_id(cell)!r} had its type or grading metadata changed: "
                               "restored from the release"))
    repaired = copy.deepcopy(submitted)
    repaired.cells = cells
    return repaired, notes


def set_aside_duplicates(submissions: list) -> None:
    """One notebook per learner and chapter is graded: the one named as the chapter, else the one
    submitted last, else the first by file name; the others get an error saying which was graded
    instead (and are not staged, so they cannot overwrite its grade)."""
    groups: dict[tuple[str, str], list] = {}
    for sub in submissions:
        try:
            chapter, rule = identify_with_rule(sub.path)
        except BadSubmission:
            continue
        groups.setdefault((sub.student, chapter.assignment), []).append((rule is None, sub))
    for (student, assignment), group in groups.items():
        if len(group) < 2:
            continue
        exact = [sub for named, sub in group if named]
        timed = [sub for _, sub in group if sub.submitted_at is not None]
        if len(exact) == 1:
            chosen, why = exact[0], "it is named as the chapter"
        elif len(timed) == len(group) and len({s.submitted_at for s in timed}) == len(group):
            chosen, why = max(timed, key=lambda s: s.submitted_at), "it was submitted last"
        else:
            chosen = min((sub for _, sub in group), key=lambda s: str(s.path))
            why = "first by file name: neither its name nor a submission time tells them apart; check by hand"
        others = [sub for _, sub in group if sub is not chosen]
        chosen.notes.append(f"{len(group)} notebooks of {assignment} from {student}: graded {chosen.path.name} "
                            f"({why}); not graded: {', '.join(s.path.name for s in others)}")
        for sub in others:
            sub.set_aside = True
            sub.error = shown(f"not graded: {student} handed in {len(group)} notebooks of {assignment}; "
                              f"{chosen.path.name} was graded instead ({why})")

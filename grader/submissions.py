"""Reading submissions defensively: which chapter, is it a notebook, and repairing its graded cells.

nbgrader aborts a batch on a duplicated grade_id (#1083) and cannot grade a deleted test cell,
so before autograde each submission is matched to the released notebook: graded cells it lost
come back from the release, duplicates and unknown ids become ordinary cells. nbgrader itself
then restores the content of every test cell from the gradebook.
"""
from __future__ import annotations

import copy
from pathlib import Path

import nbformat

from grader.chapters import Chapter, find_chapter


class BadSubmission(ValueError):
    """A submission that cannot be graded at all (unknown chapter, not a notebook)."""


def identify(path: Path) -> Chapter:
    try:
        return find_chapter(path.name)
    except ValueError as err:
        raise BadSubmission(f"{path.name}: cannot tell which chapter this is ({err})") from None


def read_notebook(path: Path) -> nbformat.NotebookNode:
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as err:  # noqa: BLE001 - every way a file can fail to be a notebook
        raise BadSubmission(f"{path.name} is not a readable Jupyter notebook: "
                            f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from None
    return nb


def grade_id_of(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta.get("grade_id") if isinstance(meta, dict) else None


_grade_id = grade_id_of


def repair(submitted: nbformat.NotebookNode, released: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, list[str]]:
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
            notes.append(f"cell {grade_id!r} {'is a duplicate' if grade_id in seen else 'is unknown'}: "
                         "graded as an ordinary cell")
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
        notes.append(f"cell {grade_id!r} was missing: restored from the release")
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
            notes.append(f"cell {_grade_id(cell)!r} had its type or grading metadata changed: restored from the release")
    repaired = copy.deepcopy(submitted)
    repaired.cells = cells
    return repaired, notes

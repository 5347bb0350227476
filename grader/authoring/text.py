"""A chapter's authored source: `chapters/NN_<name>/<name>.md`, a notebook written as MyST markdown
(jupytext), which a reviewer reads and diffs as text.

It holds the narrative, the demo and public-check cells and the nbgrader metadata of the graded
cells, whose bodies say where `grader build` takes them from (`filled_by`): an exercise's cell from
solutions/, its test cell from the hidden tests' stub, a written answer from grader/rubrics/. Nothing generated is
ever written back here: the build goes one way, chapters/ -> grader/source/ -> course/.
"""
from __future__ import annotations

import jupytext
import nbformat

from grader.chapters import Chapter, exercise_of, is_answer_cell, is_test_cell

FORMAT = "md:myst"
NOTEBOOK_METADATA = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}}


def filled_by(chapter: Chapter, cell) -> str | None:
    """The body a generated cell has in the text source (None for a cell authored there)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if is_answer_cell(cell):
        return f"(grader build fills this answer from grader/rubrics/{chapter.name}.md)"
    if meta.get("solution"):
        return f"# grader build fills this cell from solutions/{chapter.name}.py: {meta.get('grade_id')}"
    if is_test_cell(cell):
        return f"# grader build fills this cell: the hidden tests of {exercise_of(cell)}"
    return None


def read_text_source(chapter: Chapter) -> nbformat.NotebookNode:
    """The authored notebook, with stable cell ids (nbgrader grade_ids where there is one)."""
    if not chapter.text_source.is_file():
        raise ValueError(f"{chapter.assignment}: no text source {chapter.text_source}")
    nb = jupytext.read(chapter.text_source, fmt=FORMAT)
    nb.metadata = nbformat.from_dict(NOTEBOOK_METADATA)
    for index, cell in enumerate(nb.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        cell.id = grade_id or f"{cell.cell_type[:2]}{index:03d}"
    return nb


def write_text(nb: nbformat.NotebookNode) -> str:
    """The canonical text of a notebook (what `read_text_source` reads back cell for cell)."""
    return jupytext.writes(nb, fmt=FORMAT)

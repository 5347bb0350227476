"""Malformed fields and oversized files (issue 29, section 5 and section 4's last bullet): one
submission never stops the batch, and what comes in with the file is bounded.

On the original grader a grade_id of the wrong type killed `grader autograde` before any row was
recorded (every classmate's test fails), nbgrader metadata of the wrong shape made nbgrader's own
autograde fail (zero for honest code), and a 100 MB notebook, or 66 MB of saved images, was graded
in full (867 MB and 808 MB peak in the grading process; 100 MB and 63 MB feedback files).
"""
from __future__ import annotations

import base64
import random

import nbformat

from tests.adversarial.cases import FULL, Case, Paths, notebook


def cell_with(nb: nbformat.NotebookNode, grade_id: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def nbgrader_metadata(grade_id: str, value):
    """The reference, with the nbgrader metadata (or its grade_id) of one graded cell replaced."""
    def build(paths: Paths) -> nbformat.NotebookNode:
        nb = notebook()
        cell = cell_with(nb, grade_id)
        if isinstance(value, dict) and "whole" in value:
            cell.metadata["nbgrader"] = value["whole"]
        else:
            cell.metadata.nbgrader["grade_id"] = value
        return nb
    return build


def forged_graded_cell(paths: Paths) -> nbformat.NotebookNode:
    """An added cell claiming 100 points with no grade_id."""
    nb = notebook()
    cell = nbformat.v4.new_code_cell("1e9")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": False, "points": 100, "grade_id": None,
                                 "schema_version": 3}
    nb.cells.append(cell)
    return nb


def oversized(paths: Paths) -> str:
    nb = notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("x" * 25 * 2 ** 20))
    return nbformat.writes(nb)


def saved_images(paths: Paths) -> nbformat.NotebookNode:
    """About 18 MB of saved image outputs (under the file limit), spread over the course's code cells."""
    nb = notebook()
    code = [c for c in nb.cells if c.cell_type == "code" and not c.metadata.get("nbgrader")]
    rng = random.Random(29)
    for cell in code:
        image = base64.b64encode(rng.randbytes(18 * 2 ** 20 * 3 // 4 // len(code))).decode()
        cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": image})]
    return nb


CASES = [
    Case("grade-id-a-list", nbgrader_metadata("softmax", ["softmax"]), FULL,
         reason="grade_id that is not a short name"),
    Case("grade-id-a-dict-on-a-test-cell", nbgrader_metadata("test_softmax", {"id": "test_softmax"}), FULL,
         reason="grade_id that is not a short name"),
    Case("nbgrader-metadata-a-list", nbgrader_metadata("test_scaled_dot_product_attention", {"whole": [1, 2]}), FULL,
         reason="is a list, not an object"),
    Case("graded-cell-without-grade-id", forged_graded_cell, FULL, reason="grade_id that is not a short name"),
    Case("oversized-notebook", oversized, 0.0, reason="over the limit of 20 MB"),
    Case("huge-saved-images", saved_images, FULL, reason="saved outputs dropped"),
]

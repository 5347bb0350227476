"""Invariant 5: every chapter runs top to bottom with the solutions in, and every hidden-test
cell awards full points there (no error, nothing on stderr, the full score as its result)."""
import pytest
from nbformat import NotebookNode

from grader.chapters import CHAPTERS
from grader.execute import execute_source, graded_outputs
from nbgrader.utils import determine_grade


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.assignment for c in CHAPTERS])
def test_chapter_runs_with_solutions(chapter):
    nb, seconds = execute_source(chapter)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert not errors, f"{errors[0].ename}: {errors[0].evalue}"
    for grade_id, (points, outputs) in graded_outputs(nb).items():
        cell = NotebookNode(cell_type="code", outputs=outputs,
                            metadata={"nbgrader": {"grade": True, "solution": False, "points": points}})
        assert determine_grade(cell) == (points, points), f"{grade_id}: {outputs}"
    print(f"{chapter.assignment}: {seconds:.1f} s")

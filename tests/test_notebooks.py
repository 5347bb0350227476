"""Invariant 5: every chapter runs top to bottom with the solutions in, and every hidden-test
cell awards full points there (no error, nothing on stderr, the full score as its result).
Where a chapter trains a model, the result its narrative states is reached."""
import re

import pytest
from nbformat import NotebookNode

from grader.chapters import CHAPTERS
from grader.execute import execute_source, graded_outputs
from nbgrader.utils import determine_grade


# chapter name -> (a line the notebook prints, the least value its number may take)
STATED_RESULTS = {
    "multi_head_attention": (r"H = 2: [\d,]+ attention parameters, accuracy left neighbour ([\d.]+)%", 99.0),
    "add_and_norm": (r"Pre-LN, no warm-up\s+final loss [\d.]+\s+accuracy on \d+ new sequences ([\d.]+)%", 85.0),
    "decoder_masking": (r"exact-match accuracy on \d+ held-out sequences: ([\d.]+)%", 98.0),
    "bert_pretraining": (r"held-out masked-token accuracy ([\d.]+)% \(most-frequent-token baseline", 45.0),
}


def printed_text(nb: NotebookNode) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.output_type == "stream")


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
    if chapter.name in STATED_RESULTS:
        pattern, least = STATED_RESULTS[chapter.name]
        found = re.search(pattern, printed_text(nb))
        assert found, f"the notebook did not print a line matching {pattern!r}"
        assert float(found.group(1)) >= least, found.group(0)
        print(found.group(0))
    print(f"{chapter.assignment}: {seconds:.1f} s")

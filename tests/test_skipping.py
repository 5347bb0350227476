"""A grading run leaves out course-authored cells no score depends on (grader.classroom.grading.skipping): the
scores are those of a full run for every chapter, a cell the learner added or edited always runs, and the feedback
shows the learner's own outputs for a cell that was left out."""
import copy

import nbformat
import pytest

from grader.authoring import samples
from grader.boundary.unit import Verdict
from grader.chapters import CHAPTERS, LANGUAGES, find_chapter, is_answer_cell, is_test_cell
from grader.classroom.grading import skipping
from grader.classroom.grading.batch import grade_paths, job_cells
from grader.classroom.grading.recording import checks_of, fill


def code(source):
    return {"kind": "code", "source": source}


def test_unsafe_cells_always_run():
    for source in ("torch.set_default_dtype(torch.float64)", "%matplotlib inline", "import os\nos.chdir('/')",
                   "from os import chdir", "def f():\n    global x\n    x = 1\nf()", "from torch import *",
                   "setattr(torch, 'x', 1)", "open('data.txt', 'w').write('x')", "torch.save(model, 'm.pt')",
                   "exec('y = 1')", "get_ipython().ast_transformers.clear()"):
        assert skipping.facts(source).unsafe, source
    assert skipping.facts("x = torch.randn(3)\nplot(f, x)\nprint(x.sum())").unsafe is None


EDITIONS = CHAPTERS + [c.edition(lang) for lang in LANGUAGES for c in CHAPTERS]  # English, then the others


@pytest.mark.parametrize("chapter", EDITIONS, ids=[f"{c.lang}-{c.assignment}" for c in EDITIONS])
def test_no_course_cell_runs_in_every_grading(chapter):
    """A course cell that uses `open`, `globals` or the like always runs, and so does every cell it reads: 09's
    ablation cell made each grading of 09 rerun nine demo and training cells (3.4 s). The chapters have none."""
    nb = nbformat.read(chapter.course_notebook, as_version=4)
    unsafe = [(i, skipping.facts(cell.source).unsafe) for i, cell in enumerate(nb.cells)
              if cell.cell_type == "code" and not is_answer_cell(cell) and not is_test_cell(cell)]
    assert [(i, why) for i, why in unsafe if why] == []


def test_free_names_of_function_bodies_are_read_later():
    facts = skipping.facts("def f(x, dim=-1):\n    return torch.exp(x - EPS)\ny = [f(v) for v in VALUES]\n")
    assert {"f", "y"} <= facts.binds
    assert {"EPS", "torch"} <= facts.uses_later and "x" not in facts.uses_later
    assert {"f", "VALUES"} <= facts.uses_now


def test_what_is_left_out():
    cells = [code("import torch\nSCALE = 2.0"),  # 0 setup: the answer reads SCALE
             code("history = []"),  # 1 data the answer reads later ...
             code("history.append(1)"),  # 2 ... changed in place by a course cell: runs
             code("def double(x):\n    return SCALE * x + len(history)"),  # 3 the learner's answer
             code("print(double(torch.ones(2)))"),  # 4 a demo: left out
             code("torch.nn.Module.extra = 1"),  # 5 patches a class: runs
             code("shown = double(3)"),  # 6 a demo whose name a learner cell reads: runs
             code("print(shown)"),  # 7 added by the learner
             {"kind": "test", "exercise": "double"}]
    assert skipping.left_out(cells, course={0, 1, 2, 4, 5, 6}) == {4}
    assert skipping.left_out(cells[:7] + cells[8:], course={0, 1, 2, 4, 5, 6}) == {4, 6}


def released_and_reference(chapter):
    release = nbformat.read(chapter.course_notebook, as_version=4)
    return release, samples.reference(chapter)


def kinds(cells):
    return [c["kind"] for c in cells]


def test_added_and_edited_cells_run_with_what_they_need():
    chapter = find_chapter("02")
    release, nb = released_and_reference(chapter)
    full, cells = job_cells(nb, release, rerun_all=True), job_cells(nb, release)
    left = [i for i, (a, b) in enumerate(zip(kinds(full), kinds(cells))) if a == "code" and b == "skip"]
    assert len(left) >= len([c for c in full if c["kind"] == "code"]) // 2
    # every solution cell and the setup cell run
    for i, cell in enumerate(nb.cells):
        solution = cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution")
        if solution or "import torch" in cell.source:
            assert cells[i]["kind"] == "code", cell.source[:60]
    # a left-out cell that binds a name: a learner cell added at the end reading it makes it run
    binder = next(i for i in left if skipping.facts(full[i]["source"]).binds)
    name = sorted(skipping.facts(full[binder]["source"]).binds)[0]
    added = copy.deepcopy(nb)
    added.cells.append(nbformat.v4.new_code_cell(f"print({name})"))
    cells_added = job_cells(added, release)
    assert cells_added[binder]["kind"] == "code" and cells_added[-1]["kind"] == "code"
    # a course cell the learner edited runs
    edited = copy.deepcopy(nb)
    edited.cells[left[-1]].source += "\n# my note"
    assert job_cells(edited, release)[left[-1]]["kind"] == "code"
    # --rerun-all leaves nothing out
    assert not any("saved" in c for c in full) and left


def test_feedback_shows_the_learners_own_outputs_of_a_left_out_cell():
    chapter = find_chapter("02")
    release, nb = released_and_reference(chapter)
    cells = job_cells(nb, release)
    index = next(i for i, c in enumerate(cells) if c["kind"] == "skip" and nb.cells[i].cell_type == "code")
    cells[index]["saved"] = [nbformat.v4.new_output("stream", name="stdout", text="my own run\n"),
                             {"output_type": "bogus"}]
    graded = copy.deepcopy(nb)
    fill(graded, chapter, cells, Verdict(), checks_of(chapter))
    texts = [o.get("text", "") for o in graded.cells[index].outputs]
    assert texts[0].startswith("[not re-run while grading") and texts[1:] == ["my own run\n"]


def wrong(chapter, pick):
    """The reference with one catalogued mistake in every exercise (`pick` chooses which)."""
    mistakes = {}
    for variant in [v for v in samples.wrong_variants(chapter) if not v.zero]:  # realistic mistakes only
        mistakes.setdefault(variant.exercise, []).append(variant.source)
    return samples.with_answers(chapter, {**samples._solutions(chapter),
                                          **{name: pick(sources) for name, sources in mistakes.items()}})


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.assignment for c in CHAPTERS])
def test_scores_are_those_of_a_full_run(chapter, tmp_path):
    notebooks = {"reference": samples.reference(chapter), "untouched": samples.released(chapter),
                 "first-mistakes": wrong(chapter, lambda s: s[0]), "last-mistakes": wrong(chapter, lambda s: s[-1])}
    paths = []
    for kind, nb in notebooks.items():
        path = tmp_path / kind / chapter.notebook_name
        path.parent.mkdir()
        nbformat.write(nb, path)
        paths.append(str(path))
    secret = 0x5EC12E7  # both runs ask the same hidden inputs (a catalogued mistake may pass one draw's check)
    quick = grade_paths(paths, jobs=2, timeout=120, secret=secret)
    full = grade_paths(paths, jobs=2, timeout=120, rerun_all=True, secret=secret)
    for kind, fast, slow in zip(notebooks, quick, full):
        scores = [{k: t["score"] for k, t in run["tests"].items()} for run in (fast, slow)]
        assert scores[0] == scores[1], kind
        assert "error" not in fast and "error" not in slow, (kind, fast.get("error"), slow.get("error"))
    automatic = sum(t["max_score"] for t in quick[0]["tests"].values())  # written answers: pending
    assert quick[0]["score"] == automatic and quick[1]["score"] == 0
    assert 0 < quick[2]["score"] < quick[2]["max_score"]


def test_a_cell_text_is_analysed_once_and_each_caller_gets_its_own_facts(monkeypatch):
    # a class's notebooks share their course cells: one parse per text, and what one caller changes of its
    # facts is not what the next gets
    import ast

    from grader.classroom.grading import skipping

    parsed = []
    original = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *args, **kwargs: (parsed.append(1), original(*args, **kwargs))[1])
    source = "import math\nscale = math.sqrt(2.0)  # a text no other test analyses\ndef f(x):\n    return x * scale\n"
    first = skipping.facts(source)
    first.binds.add("changed")
    second = skipping.facts(source)
    assert len(parsed) == 1 and second.binds == {"math", "scale", "f"} and second.uses_later == {"scale"}

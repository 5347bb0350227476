"""What a learner meets before writing anything: a public check on an unwritten exercise names it,
a blank notebook run top to bottom stops only with messages that name the exercise a cell waits
for, every exercise has one heading form, and a check's numbers are printed legibly."""
import inspect
import os
import re

import nbformat
import pytest
from nbclient import NotebookClient

from course.checks import NotWrittenYet
from course.toolkit import GRADING_ENV
from grader.boundary.specs import exercises
from grader.chapters import CHAPTERS
from tests.helpers import skeleton_namespace

REVIEWED = CHAPTERS  # every chapter follows the forms tested here
CLEAR_ERRORS = {"NotWrittenYet", "WaitingForExercise"}


def checks_module(chapter):
    return __import__(f"course.checks.{chapter.name}", fromlist=["_"])


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.assignment for c in CHAPTERS])
def test_public_check_names_an_unwritten_exercise(chapter):
    skeleton, module = skeleton_namespace(chapter), checks_module(chapter)
    for name in exercises(chapter.name):
        check = getattr(module, f"check_{name}")
        with pytest.raises(NotWrittenYet, match=f"not implemented yet: write `{name}` above"):
            check(skeleton[name])


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.assignment for c in CHAPTERS])
def test_every_check_carries_the_decorator(chapter):
    """The learner reads `@public_check` on each check of the chapter module: one per exercise, none hidden in
    an import hook, none left undecorated."""
    module = checks_module(chapter)
    checks = {name: fn for name, fn in vars(module).items() if name.startswith("check_") and callable(fn)}
    assert {name.removeprefix("check_") for name in checks} == set(exercises(chapter.name))
    for name, fn in checks.items():
        assert getattr(fn, "exercise", None) == name.removeprefix("check_"), f"{name} lacks @public_check"
    source = inspect.getsource(module)
    assert source.count("@public_check\ndef check_") == len(checks)


@pytest.mark.parametrize("chapter", REVIEWED, ids=[c.assignment for c in REVIEWED])
def test_blank_notebook_stops_only_with_clear_messages(chapter):
    nb = nbformat.read(chapter.course_notebook, as_version=4)
    os.environ.pop(GRADING_ENV, None)
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(chapter.course_dir)}}).execute()
    unclear, checks_seen = [], set()
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.output_type != "error":
                continue
            if output.ename not in CLEAR_ERRORS:
                unclear.append(f"cell {index}: {output.ename}: {output.evalue[:120]}")
            found = re.search(r"write `(\w+)` above", output.evalue)
            if output.ename == "NotWrittenYet" and found:
                checks_seen.add(found.group(1))
    assert not unclear, "cells of the blank notebook that fail without naming the exercise they wait for:\n" + \
        "\n".join(unclear)
    assert checks_seen == set(exercises(chapter.name)), "public checks that did not name their exercise"


HEADING = re.compile(r"^### Exercise (\d+): `(\w+)` \((\d+(?:\.\d+)?) points?\)$", re.M)


@pytest.mark.parametrize("chapter", REVIEWED, ids=[c.assignment for c in REVIEWED])
def test_exercise_headings_have_one_form(chapter):
    nb = nbformat.read(chapter.course_notebook, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    found = HEADING.findall(text)
    specs = exercises(chapter.name)
    assert [name for _, name, _ in found] == list(specs), \
        "one '### Exercise N: `name` (P points)' per exercise, in order"
    assert [int(n) for n, _, _ in found] == list(range(1, len(specs) + 1)), "exercises numbered 1, 2, ..."
    for _, name, points in found:
        assert float(points) == specs[name].points, f"{name}: the heading says {points} points"
    assert not re.search(r"\*\*Exercise", text), "an old '**Exercise (N points).**' heading is left"


def test_noam_off_by_one_message_is_legible():
    from course.checks.decoder_masking import check_noam_learning_rate

    def shifted(step, d_model, warmup_steps, factor=1.0):  # a schedule whose steps count from 0
        step = step - 1 if step > 1 else step
        return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)

    with pytest.raises(AssertionError) as failure:
        check_noam_learning_rate(shifted)
    message = str(failure.value)
    numbers = re.findall(r"\d\.\d+e-\d+", message)
    assert len(numbers) == 2 and len({len(n) for n in numbers}) == 1, message
    assert "steps count from 1" in message, message

"""The numbers the public checks store (`# --- stored numbers` blocks in course/checks/<chapter>.py) are
what the reference and the known mistakes give now, every stored mistake makes its check name it,
and the checks pass the reference quickly without it. `python -m tests.snapshots --write` rewrites them."""
import importlib
import time

import pytest

from course.checks import CheckFailed
from grader.boundary.specs import exercises
from grader.chapters import CHAPTERS
from tests.helpers import reference_namespace
from tests.snapshots import ATOL, RTOL, blocks, checks_path, compare, implementation, recipes

NAMES = [c.name for c in CHAPTERS]
MISTAKES = [(chapter, entry) for chapter in NAMES for entry in recipes(chapter) if entry.mistake is not None]
FAST = 1.0  # seconds: a public check answers in well under a second


def checks(chapter: str):
    return importlib.import_module(f"course.checks.{chapter}")


@pytest.mark.parametrize("chapter", NAMES)
def test_stored_numbers_are_what_the_code_gives_now(chapter):
    _, problems = compare(chapter)
    assert not problems, (
        f"course/checks/{chapter}.py stores numbers that differ from what tests/snapshots/{chapter}.py computes "
        f"(beyond {ATOL} + {RTOL} * |value|):\n  " + "\n  ".join(problems[:20])
        + "\nrewrite them: .venv/bin/python -m tests.snapshots --write, then grader build && grader release --write")


@pytest.mark.parametrize("chapter", NAMES)
def test_each_stored_block_is_in_its_place(chapter):
    """One block per group of recipes, each holding exactly its recipes' constants in their order."""
    found = blocks(checks_path(chapter).read_text())
    want: dict[str, list[str]] = {}
    for entry in recipes(chapter):
        want.setdefault(entry.where, []).append(entry.name)
    assert dict(found) == want
    assert len(found) == len(want), "a stored block appears twice"


@pytest.mark.parametrize("chapter,entry", MISTAKES, ids=[f"{c}-{e.name}" for c, e in MISTAKES])
def test_the_check_names_each_stored_mistake(chapter, entry):
    assert entry.says, f"{entry.name}: say which words of its check's message name the mistake"
    check = getattr(checks(chapter), f"check_{entry.exercise}")
    with pytest.raises(CheckFailed) as failure:
        check(implementation(chapter, entry.exercise, entry.mistake))
    assert entry.says in str(failure.value), f"{entry.mistake.label}: {failure.value}"


@pytest.mark.parametrize("chapter", NAMES)
def test_public_checks_pass_the_reference_quickly(chapter, capsys):
    namespace = reference_namespace(next(c for c in CHAPTERS if c.name == chapter))
    slow = {}
    for name in exercises(chapter):
        check = getattr(checks(chapter), f"check_{name}")
        took = []
        for _ in range(2):  # the better of two runs: the first may pay for torch's lazy set-up
            start = time.perf_counter()
            check(namespace[name])
            took.append(time.perf_counter() - start)
        if min(took) > FAST:
            slow[name] = round(min(took), 2)
    assert "public checks pass" in capsys.readouterr().out
    assert not slow, f"public checks slower than {FAST} s on the reference (seconds): {slow}"

"""Fair grading: every rule a hidden check enforces is stated in the exercise's docstring, which
the learner reads in the released notebook.

A check names the phrases that state its rule with `@ex.check("...", states=("in place",))`.
Chapters whose spec declares any `states` are audited further: a check whose description names
a rule (RULE_PHRASES) must find that phrase in the docstring too, and every library routine an
exercise forbids must be named there. Chapters written without `states` are not audited.
"""
import inspect

import pytest

from grader.boundary.specs import exercises
from grader.chapters import CHAPTERS
from tests.helpers import skeleton_namespace

# Words in a check's description that announce a rule the learner must have been told.
RULE_PHRASES = ("ValueError", "in place", "float64", "dtype", "int32", "eval mode", "training mode",
                "no_grad")
# Parts of a dotted routine name too generic to identify it in prose.
GENERIC = {"torch", "nn", "functional", "Tensor", "forward", "special", "Module"}


def flat(text: str) -> str:
    return " ".join(text.split()).lower()


def docstrings(chapter) -> dict[str, str]:
    """Each exercise's docstring as the learner sees it (the skeleton in the released notebook)."""
    namespace = skeleton_namespace(chapter)
    return {name: flat(inspect.getdoc(namespace[name]) or "") for name in exercises(chapter.name)}


def audited(chapter) -> bool:
    return any(check.states for ex in exercises(chapter.name).values() for check in ex.checks)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.assignment for c in CHAPTERS])
def test_declared_rules_are_in_the_docstring(chapter):
    docs = docstrings(chapter)
    missing = [f"{name}: {phrase!r} (check: {check.description})"
               for name, ex in exercises(chapter.name).items() for check in ex.checks
               for phrase in check.states if flat(phrase) not in docs[name]]
    assert not missing, "phrases a hidden check enforces but the docstring does not state:\n" + "\n".join(missing)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.assignment for c in CHAPTERS])
def test_rule_checks_are_stated(chapter):
    if not audited(chapter):
        pytest.skip("this chapter's checks declare no `states`")
    docs = docstrings(chapter)
    missing = [f"{name}: {phrase!r} (check: {check.description})"
               for name, ex in exercises(chapter.name).items() for check in ex.checks
               for phrase in RULE_PHRASES
               if flat(phrase) in flat(check.description) and flat(phrase) not in docs[name]]
    assert not missing, "checks that enforce a rule the docstring does not state:\n" + "\n".join(missing)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.assignment for c in CHAPTERS])
def test_forbidden_routines_are_named(chapter):
    if not audited(chapter):
        pytest.skip("this chapter's checks declare no `states`")
    docs = docstrings(chapter)
    missing = []
    for name, ex in exercises(chapter.name).items():
        for routine in ex.forbidden:
            parts = [p for p in routine.split(".") if p not in GENERIC]
            if not any(p.lower() in docs[name] for p in parts):
                missing.append(f"{name}: {routine}")
    assert not missing, "forbidden routines the docstring does not name:\n" + "\n".join(missing)

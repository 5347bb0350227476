"""A forbidden routine is recorded by its kernel in the in-kernel route too (grader.boundary.forbid), however it
is spelled or captured, while the checks' own oracles, which call the same routines, are not."""
import pytest

from grader.boundary.runner import evaluate
from grader.boundary.specs import exercises
from grader.chapters import find_chapter
from tests.helpers import reference_namespace, run_source

CHAPTER = find_chapter("02")
SPELLINGS = {
    "torch._softmax": "torch._softmax(x, dim, False)",
    "torch._C.TensorBase.softmax": "torch._C.TensorBase.softmax(x, dim)",
    "x.softmax": "x.softmax(dim)",
    "torch._safe_softmax": "torch._safe_softmax(x, dim)",
    "captured before the test": "_captured(x, dim=dim)",
    "log_softmax().exp()": "torch._log_softmax(x, dim, False).exp()",
}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_softmax_scores_zero_in_a_kernel(spelling):
    source = f"_captured = torch.Tensor.softmax\n\ndef softmax(x, dim=-1):\n    return {SPELLINGS[spelling]}\n"
    result = evaluate(exercises(CHAPTER.name)["softmax"], run_source(source, reference_namespace(CHAPTER)))
    assert result.score == 0 and "which this exercise asks you to write yourself" in result.zero_reason


def test_the_oracles_and_the_stand_ins_are_not_the_learners_calls():
    for name, exercise in exercises(CHAPTER.name).items():
        result = evaluate(exercise, reference_namespace(CHAPTER))
        assert result.zero_reason is None and result.score == result.points, result.report()

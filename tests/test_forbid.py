"""A forbidden routine is recorded by its kernel in the in-kernel route too (grader.boundary.forbid), however it
is spelled or captured, while the checks' own oracles, which call the same routines, are not. In the sandbox's
child the recorders see the learner's code, never the wire's own tensors (forbid.unrecorded)."""
import contextlib

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from grader.boundary.runner import evaluate
from grader.boundary.spec import Exercise
from grader.boundary.specs import exercises
from grader.chapters import find_chapter
from tests.helpers import evaluate_in_child, reference_namespace, run_source

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


@contextlib.contextmanager
def every_operator(routines):
    """A recorder that records every ATen operator it sees, as the child's recorders are entered."""
    calls: list[str] = []

    class Seen(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            calls.append(f"aten.{func.overloadpacket.__name__}")
            return func(*args, **(kwargs or {}))

    with Seen():
        yield calls


def test_the_child_records_the_learners_operators_and_not_the_wires():
    """Tensors in and out of a call (decoded, snapshotted, compared, encoded) are the grader's own operators:
    with the recorders watching them too, every call cost several microseconds of Python per operator."""
    passes = Exercise("passes", points=1)

    @passes.check("a tensor in, a tensor out, a generator and a parameter beside it")
    def _(fn):
        x = torch.randn(64, 64)
        out = fn(x, torch.nn.Parameter(torch.ones(3)), torch.Generator().manual_seed(1))
        torch.testing.assert_close(out, x)

    for source, seen in (("def passes(x, p, g):\n    return x\n", None),
                         ("def passes(x, p, g):\n    return x.softmax(-1).log().exp() * 0 + x\n", "aten._softmax")):
        result = evaluate_in_child(passes, run_source(source, {}), record=every_operator)
        if seen is None:
            assert result.zero_reason is None and result.score == 1, result.report()
        else:
            assert seen in result.zero_reason, result.report()

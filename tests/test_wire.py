"""The plain-data wire between the trusted grader and the sandboxed child (grader.boundary.wire), and what
the child's fork server holds."""
import collections
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.boundary.wire import Codec, WireError, rebuild, tensor_bytes


def round_trip(value):
    codec, frames = Codec(), []
    header = codec.encode(value, frames)
    return Codec().decode(header, frames)


def test_plain_values_come_back_as_they_went():
    value = [None, True, 3, -2.5, float("inf"), "text", (1, (2, "x")), {(1, 2): "pair", "k": [1]},
             collections.OrderedDict(a=1, b=2), {1, 2}, frozenset({3}), b"\x00\xff", torch.Size([2, 3]),
             torch.bfloat16, torch.device("cpu"), slice(1, None, 2), Ellipsis]
    back = round_trip(value)
    assert back == value
    assert [type(v) for v in back] == [type(v) for v in value]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool, torch.uint8])
def test_tensors_keep_dtype_shape_and_values(dtype):
    t = (torch.arange(24).reshape(2, 3, 4) % 5).to(dtype)
    for value in (t, t[:, 1], t.transpose(0, 2), torch.empty(0, 3, dtype=dtype), t[0, 0, 0]):
        back = round_trip(value)
        assert type(back) is torch.Tensor and back.dtype == value.dtype and back.shape == value.shape
        assert torch.equal(back, value)


def test_generator_state_travels():
    g = torch.Generator().manual_seed(7)
    back = round_trip(g)
    assert torch.equal(torch.rand(3, generator=back), torch.rand(3, generator=g))


def test_other_objects_go_as_references_never_as_code():
    codec, frames = Codec(), []
    header = codec.encode([len, object()], frames)
    assert all(set(node) == {"$ref"} for node in header)
    with pytest.raises(WireError):
        Codec().decode(header, frames)


@pytest.mark.parametrize("header,frames", [
    ({"$t": 0, "dtype": "float32", "shape": [2]}, [b"\x00" * 7]),
    ({"$t": 0, "dtype": "object", "shape": [1]}, [b"\x00" * 8]),
    ({"$t": 3, "dtype": "float32", "shape": [1]}, [b"\x00" * 4]),
    ({"$t": 0, "dtype": "float32", "shape": [-1]}, [b""]),
    ({"$pickle": "gASV"}, []),
    ({"a": 1, "b": 2}, []),
])
def test_malformed_messages_are_refused(header, frames):
    with pytest.raises(WireError):
        Codec().decode(header, frames)


def test_tensor_bytes_are_the_raw_values():
    assert tensor_bytes(torch.tensor([1.0], dtype=torch.float32)) == b"\x00\x00\x80\x3f"


def test_remote_exceptions_are_rebuilt_as_builtins_only():
    err = rebuild({"type": "MyError", "mro": ["ValueError", "Exception", "BaseException"], "message": "m", "line": 4})
    assert isinstance(err, ValueError) and type(err).__name__ == "MyError" and err.remote_line == 4
    assert type(rebuild({"type": "SystemExit", "mro": ["SystemExit", "BaseException"]})) is not SystemExit


def test_the_fork_server_holds_no_specs_no_answers_no_course():
    code = ("import sys, grader.boundary.child\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('solutions', 'course', 'tests')"
            " or m.startswith('grader.boundary.specs')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("side", ["grader.boundary.child", "grader.boundary.proxy"])
def test_neither_side_imports_dtensor_to_compare_plain_tensors(side):
    """Issue 47: torch.testing.assert_close imported torch.distributed.tensor (sympy, torch.fx: 1-2 s) on its first
    call, in the fork server and again in the grading process, for DTensors that never cross the boundary."""
    code = (f"import sys, torch, {side}\n"
            "torch.testing.assert_close(torch.ones(2), torch.ones(2))\n"
            "try:\n"
            "    torch.testing.assert_close(torch.ones(2), torch.zeros(2))\n"
            "except AssertionError:\n"
            "    print('unequal refused')\n"
            "print([m for m in ('torch.distributed.tensor',) if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["unequal refused", "[]"]


@pytest.mark.parametrize("key", ["02", "06"])
def test_judging_imports_no_symbolic_shapes_on_either_side(key):
    """Issue 47: torch's symbolic shapes (sympy: half a CPU-second a process) were imported by a backward with
    given gradients (the child continuing a check's backward through the learner's graph, the trusted side
    answering a stand-in's), so the fork server preloaded them for every child and the grading process paid
    them too; and by the key_padding_mask of chapter 06's oracles (torch's layers). Chapter 02's checks
    backpropagate through the learner's tensors, chapter 06's run those oracles: full marks, and neither
    side has imported sympy."""
    code = ("import sys, grader.boundary.child\n"
            "from grader.boundary.specs import exercises\n"
            "from grader.chapters import find_chapter\n"
            "from tests.helpers import evaluate_in_child, reference_namespace\n"
            f"chapter = find_chapter({key!r})\n"
            "namespace = reference_namespace(chapter)\n"
            "for exercise in exercises(chapter.name).values():\n"
            "    result = evaluate_in_child(exercise, namespace)\n"
            "    print(exercise.name, result.score == exercise.points)\n"
            "print('sympy', 'sympy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    lines = out.splitlines()
    assert lines[-1] == "sympy False"
    assert len(lines) > 2 and all(line.endswith(" True") for line in lines[:-1]), out


def test_a_backward_from_given_gradients_is_torchs():
    """grader.boundary.gradients: the same gradients as torch.autograd's, and torch's refusal of a gradient
    that does not fit its output."""
    from grader.boundary import gradients

    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(4, dtype=torch.float64, requires_grad=True)
    outputs = lambda: [(x * y).tanh(), (x @ y) ** 2]  # noqa: E731
    grads = [torch.randn(3, 4, dtype=torch.float64), torch.randn(3, dtype=torch.float64)]
    want = torch.autograd.grad(outputs(), [x, y], grads)
    assert all(torch.allclose(a, b, rtol=1e-12, atol=0) for a, b in zip(gradients.grad(outputs(), [x, y], grads), want))
    gradients.backward(outputs(), grads)
    assert torch.allclose(x.grad, want[0], rtol=1e-12, atol=0) and torch.allclose(y.grad, want[1], rtol=1e-12, atol=0)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        gradients.backward([(x * y).sum(0)], [torch.ones(3, 4, dtype=torch.float64)])


def test_the_worker_sets_the_course_grading_switch():
    from course.toolkit import GRADING_ENV
    from grader.boundary.child import GRADING_ENV as WORKER_ENV

    assert WORKER_ENV == GRADING_ENV


def test_one_frame_is_decoded_at_most_once():
    """Issue 29: a forged reply that names one 64 MB frame 24 times took the grader to 1.95 GB."""
    frames = [b"\x00" * 4096]
    node = {"$t": 0, "dtype": "float32", "shape": [1024]}
    assert Codec().decode([node], frames)[0].shape == (1024,)
    with pytest.raises(WireError, match="one frame twice"):
        Codec().decode([node] * 24, frames)
    gen = {"$gen": 0}
    with pytest.raises(WireError, match="one frame twice"):
        Codec().decode([node, gen], frames)


@pytest.mark.parametrize("make", [
    lambda n: ["x" * n] * 8,  # strings
    lambda n: [{"$bytes": "AAAA" * (n // 4)}] * 8,  # bytes
    lambda n: [[0] * (n // 72)] * 8,  # containers (each item counted as 64 + 8 bytes)
])
def test_what_a_message_decodes_into_is_bounded(monkeypatch, make):
    import grader.boundary.wire as wire

    monkeypatch.setattr(wire, "MAX_DECODED_BYTES", 100_000)
    Codec().decode(make(10_000), [])
    with pytest.raises(WireError, match="decodes into more than"):
        Codec().decode(make(20_000), [])


def test_echoed_tensors_count_against_the_bound(monkeypatch):
    import grader.boundary.wire as wire

    class Echoing(Codec):
        def decode_ref(self, node):
            return torch.zeros(1000)  # a fresh copy each time, as the trusted side's echo is

    monkeypatch.setattr(wire, "MAX_DECODED_BYTES", 100_000)
    Echoing().decode([{"$echo": 1}] * 10, [])
    with pytest.raises(WireError, match="decodes into more than"):
        Echoing().decode([{"$echo": 1}] * 100, [])

"""Trusted side (and the kernel, in the stock-nbgrader route): how hidden tests are written.

An Exercise holds named checks; helpers compare plain tensors, draw hidden inputs from a secret and
judge in-place changes; the library routines exercises forbid are named here once.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import zlib
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from grader.boundary import standins
from grader.boundary.standins import FixedDropout  # noqa: F401 - the specs import it from here

# The weight of a check of an exercise's core behaviour (its values on ordinary input, each argument it is
# asked to use); an edge case (dtype, device, the input left as it was, gradients, ValueError) weighs 1.
CORE = 3.0


@dataclass
class Check:
    description: str
    run: Callable[[Any], None]
    states: tuple[str, ...] = ()  # phrases the exercise's docstring must contain (tests/test_docstrings.py)
    side: bool = False  # a side rule (ValueError, in place): pays only beside a check of the answer itself
    weight: float = 1.0  # its share of the points: the core behaviour weighs more than an edge case
    part: str = ""  # what it calls ("__init__": the constructor only); a side rule pays beside its own part


@dataclass
class Exercise:
    """One graded exercise: the learner object `name` is handed to each check in turn.

    `forbidden` lists dotted library routines the learner's code must not call (recorded at
    run time); calling one, or importing the reference package, scores zero. `stand_ins` maps
    names of other exercises this one may call (SelfAttention calls the learner's
    scaled_dot_product_attention) to correct versions used while its checks run, so a mistake
    costs points once, in the exercise where it was made.
    """

    name: str
    points: float
    forbidden: tuple[str, ...] = ()
    stand_ins: dict[str, Callable] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    def check(self, description: str, states: tuple[str, ...] = (), side: bool = False, weight: float = 1.0,
              part: str = ""):
        """Register a check. `states` names the phrases of the exercise's docstring that tell the
        learner the rule this check enforces ("in place", "ValueError", ...); optional. A `side`
        check tests a rule beside the answer (bad input raises ValueError, the input is left as it
        was), which an answer that does nothing (returns None, always raises) also keeps: it pays
        only when a check of the same `part` that is not a side check passed too
        (grader.boundary.score.side_rules_pay), so a constructor's checks never pay a forward's
        side rules. `weight`: the check's share of the points (guides/teaching.md: How partial credit reads)."""
        def register(fn: Callable[[Any], None]):
            self.checks.append(Check(description, fn, tuple(states), side, float(weight), part))
            return fn

        return register

    def side_check(self, description: str, states: tuple[str, ...] = (), weight: float = 1.0, part: str = ""):
        """`check(..., side=True)`."""
        return self.check(description, states, side=True, weight=weight, part=part)

    def weights(self) -> dict[str, float]:
        """Each check's weight, by description (grader.boundary.score.Result.score)."""
        return {c.description: c.weight for c in self.checks}


def collect(namespace: dict) -> dict[str, Exercise]:
    """The Exercise objects of a spec module, in definition order, keyed by name."""
    return {v.name: v for v in namespace.values() if isinstance(v, Exercise)}


# ---------------------------------------------------------------- forbidden library routines
# What exercises forbid (`Exercise.forbidden`), by family, for the chapters to combine. Where two
# routines reach one kernel, the first listed names it in the reason a learner reads
# (grader.boundary.forbid.kernels_of), so a chapter's combination keeps its order.
SOFTMAX = ("torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax", "torch.special.softmax",
           "torch.log_softmax", "torch.nn.functional.log_softmax", "torch.Tensor.log_softmax",
           "torch.special.log_softmax")
LAYER_NORM = ("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.nn.LayerNorm.forward")
RMS_NORM = ("torch.nn.RMSNorm.forward", "torch.nn.functional.rms_norm")
GELU = ("torch.nn.functional.gelu",)
LOSSES = ("torch.nn.functional.cross_entropy", "torch.nn.functional.kl_div")
SCALED_DOT_PRODUCT = ("torch.nn.functional.scaled_dot_product_attention",)
MULTI_HEAD_FUNCTION = ("torch.nn.functional.multi_head_attention_forward",)
MULTI_HEAD_MODULE = ("torch.nn.MultiheadAttention.forward",)
MULTI_HEAD_ATTENTION = MULTI_HEAD_MODULE + MULTI_HEAD_FUNCTION + SCALED_DOT_PRODUCT
ENCODER_LAYER = ("torch.nn.TransformerEncoderLayer.forward",)
DECODER_LAYER = ("torch.nn.TransformerDecoderLayer.forward",)
ENCODER = ENCODER_LAYER + ("torch.nn.TransformerEncoder.forward",)
DECODER = DECODER_LAYER + ("torch.nn.TransformerDecoder.forward",)
TRANSFORMER = ("torch.nn.Transformer.forward",) + DECODER + ENCODER


# The secret of the exercise being judged. Every hidden input is drawn from a check's own seed mixed
# with it, so what a learner's code records while one submission is graded (and prints into its
# feedback) says nothing about the inputs of the next grading. 0 means the seeds as written: the
# in-kernel route and the tests stay reproducible. Set only by the trusted process, never sent.
_SECRET = [0]


@contextlib.contextmanager
def hidden_inputs(secret: int):
    """Draw hidden inputs from `secret` while judging one exercise (the caller serialises exercises)."""
    saved, _SECRET[0] = _SECRET[0], int(secret) % (1 << 128)
    try:
        yield
    finally:
        _SECRET[0] = saved


def secret_now() -> int:
    """The secret hidden inputs are drawn from now (grader.boundary.proxy keeps it aside while it waits)."""
    return _SECRET[0]


def secret_back(secret: int) -> None:
    _SECRET[0] = secret


def mixed(seed: int) -> int:
    """`seed` itself under secret 0, otherwise a keyed hash of it: seeds that differ stay different,
    and one derived seed (a generator's state reaches the learner's code) reveals nothing of another."""
    if not _SECRET[0]:
        return seed
    digest = hashlib.blake2b(str(seed).encode(), key=_SECRET[0].to_bytes(16, "little"), digest_size=8)
    return int.from_bytes(digest.digest(), "little") >> 1


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(mixed(seed))


def manual_seed(seed: int) -> None:
    """torch.manual_seed for a check's own use of the global generator (dropout), mixed like `seeded`."""
    torch.manual_seed(mixed(seed))


def seeded_by_name(name: str, seed: int) -> torch.Generator:
    """A generator seeded by a parameter's name: the values a spec loads never depend on the order
    in which the learner created the layers."""
    return seeded(seed + zlib.crc32(name.encode()) % 100000)


def documented_shapes(module: torch.nn.Module, names: set) -> dict[str, tuple[int, ...]]:
    """name -> shape of each documented parameter of `module`, in name order; an AssertionError
    that names the missing ones (and what was found instead)."""
    params = dict(module.named_parameters())
    missing = sorted(names - set(params))
    if missing:
        names = ", ".join(missing[:4]) + (" ..." if len(missing) > 4 else "")
        raise AssertionError(f"missing parameters {names}; found {', '.join(sorted(params)[:6])} ...")
    return {name: tuple(params[name].shape) for name in sorted(names)}


def random_weights(module: torch.nn.Module, names: set, seed: int) -> dict:
    """Seeded values for every documented parameter (each seeded by its own name, so the
    order in which the learner created the layers does not matter); loaded into `module`."""
    state = {}
    for name, shape in documented_shapes(module, names).items():
        g = seeded_by_name(name, seed)
        if "norm" in name:
            value = (1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn(shape, generator=g)
        elif len(shape) == 2:
            value = torch.randn(shape, generator=g) / math.sqrt(shape[1])
        else:
            value = 0.1 * torch.randn(shape, generator=g)
        state[name] = value
    module.load_state_dict(state, strict=False)
    return state


def randn(*shape: int, seed: int) -> torch.Tensor:
    """A float32 tensor seeded on its own, so tests never depend on creation order."""
    return torch.randn(*shape, generator=seeded(seed))


def assert_tensor(actual: Any, expected: torch.Tensor, *, atol: float = 1e-6,
                  rtol: float = 1e-5, what: str = "output") -> None:
    """Exact type, dtype and shape, then values within the stated tolerance."""
    if type(actual) is not torch.Tensor:
        raise AssertionError(f"{what} should be a torch.Tensor, got {actual.__class__.__name__}")
    if actual.dtype != expected.dtype:
        raise AssertionError(f"{what} has dtype {actual.dtype}, expected {expected.dtype}")
    if actual.shape != expected.shape:
        raise AssertionError(f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    try:
        torch.testing.assert_close(actual.detach(), expected, atol=atol, rtol=rtol)
    except AssertionError:
        raise AssertionError(f"{what} has wrong values: {_mismatch(actual.detach(), expected, atol, rtol)}") from None


def _mismatch(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str:
    """How far off the values are, in the course's words (torch's own message is English prose that
    a translated edition's feedback could not translate)."""
    got, want = actual.to(torch.float64), expected.to(torch.float64)
    wrong = ~torch.isclose(got, want, atol=atol, rtol=rtol)  # nan is never close, as in assert_close
    gap = torch.where(wrong, (got - want).abs().nan_to_num(nan=math.inf), torch.zeros_like(got))
    if not wrong.any():
        return f"they differ from the expected values beyond atol={atol:g}, rtol={rtol:g}"
    at = tuple(int(i) for i in torch.unravel_index(gap.argmax(), gap.shape)) if gap.dim() else ()
    most = (got - want).abs()[at].item()  # nan where the output is nan
    return (f"{int(wrong.sum())} of {wrong.numel()} values differ, the most by {most:.3g} "
            f"at index {at} (allowed: {atol:g} + {rtol:g} * |expected|)")


def load_torch_attention(torch_attn: torch.nn.MultiheadAttention, state: dict[str, torch.Tensor],
                         prefix: str) -> None:
    """Copy the course's W_q, W_k, W_v, W_o (keys `<prefix>.W_q.weight`, ...; biases when present)
    into nn.MultiheadAttention, which stacks the three input projections in `in_proj`."""
    with torch.no_grad():
        torch_attn.in_proj_weight.copy_(torch.cat([state[f"{prefix}.W_{p}.weight"] for p in "qkv"]))
        torch_attn.out_proj.weight.copy_(state[f"{prefix}.W_o.weight"])
        if f"{prefix}.W_q.bias" in state:
            torch_attn.in_proj_bias.copy_(torch.cat([state[f"{prefix}.W_{p}.bias"] for p in "qkv"]))
            torch_attn.out_proj.bias.copy_(state[f"{prefix}.W_o.bias"])


def fix_dropout(module: torch.nn.Module) -> torch.nn.Module:
    """Replace every nn.Dropout inside `module` by a FixedDropout with the same p, by name (in the
    sandboxed child, where `module` is a learner object there)."""
    if hasattr(type(module), "_grader_fix_dropout"):
        module._grader_fix_dropout()
        return module
    return standins.fix_dropout(module)


def blocked(pad: torch.Tensor, heads: int, queries: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """A (B*heads, queries, S) attn_mask for torch's attention layers (True = blocked), an oracle's: the padded
    keys `pad` (B, S), and `mask` (queries, S) where given. Torch's key_padding_mask means the same, but
    checking its shape imports torch's symbolic shapes (sympy: half a CPU-second of the grading process)."""
    out = pad[:, None, None, :].expand(-1, heads, queries, -1)
    if mask is not None:
        out = out | mask
    return out.reshape(-1, queries, pad.shape[1])


def assert_pair(result: Any, what: str = "result") -> tuple[Any, Any]:
    """Attention functions return (output, weights)."""
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(f"{what} should be a tuple (output, weights), got {type(result).__name__}")
    return result


def assert_raises_value_error(fn: Callable, *args, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except ValueError as err:
        if not str(err).strip():
            raise AssertionError("the ValueError should say what was wrong (its message is empty)")
        return
    except Exception as err:  # noqa: BLE001 - any other type is the learner's mistake
        raise AssertionError(f"expected ValueError, got {type(err).__name__}: {err}") from None
    raise AssertionError("expected a ValueError for bad arguments, but nothing was raised")


# ---------------------------------------------------------------- in-place changes (issue 29)
# A check computes its expected values from inputs it kept before calling the learner's code, and
# judges an in-place change to an input by the in-place rule alone. Where the judge runs the checks
# (grader.boundary.proxy) the learner's in-place changes are recorded and never written into the check's
# objects; in the stock-nbgrader route (grader.boundary.runner, in the learner's kernel) the learner's code
# gets copies and the same record (grader.boundary.kept); the kept copy tells wherever nothing recorded.
_IN_PLACE_RECORD: ContextVar = ContextVar("in_place_record", default=None)


@contextlib.contextmanager
def in_place_record(changed: Callable[[Any], bool]):
    """While the judge runs one exercise's checks: `changed(obj)` says whether the learner's code
    changed the check's object `obj` in place (grader.boundary.proxy.Session.changed_in_place)."""
    token = _IN_PLACE_RECORD.set(changed)
    try:
        yield
    finally:
        _IN_PLACE_RECORD.reset(token)


def changed_in_place(value: Any, before: Any) -> bool:
    """Did the learner's code change the check's `value` (a tensor, a generator, or a list, tuple
    or dict holding them) in place? `before` is what the check kept before the call (`kept`)."""
    return _recorded(value) or not _same(value, before)


def kept(value: Any) -> Any:
    """A copy of `value` to compare with after the learner's call: tensors cloned, generators'
    states, containers rebuilt."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, torch.Generator):
        return value.get_state()
    if type(value) in (list, tuple):
        return type(value)(kept(v) for v in value)
    if type(value) is dict:
        return {k: kept(v) for k, v in value.items()}
    return value


def _recorded(value: Any, depth: int = 0) -> bool:
    record = _IN_PLACE_RECORD.get()
    if record is None or depth > 20:
        return False
    if record(value):
        return True
    inner = value.values() if type(value) is dict else value if type(value) in (list, tuple) else ()
    return any(_recorded(v, depth + 1) for v in inner)


def _same(value: Any, before: Any) -> bool:
    if value is before:
        return True
    if isinstance(value, torch.Tensor):
        return (type(before) is torch.Tensor and value.shape == before.shape and value.dtype == before.dtype
                and torch.equal(value.detach(), before))
    if isinstance(value, torch.Generator):
        return type(before) is torch.Tensor and torch.equal(value.get_state(), before)
    if type(value) in (list, tuple):
        return type(before) is type(value) and len(value) == len(before) and all(map(_same, value, before))
    if type(value) is dict:
        return type(before) is dict and value.keys() == before.keys() and all(_same(value[k], before[k]) for k in value)
    return type(value) is type(before) and value == before

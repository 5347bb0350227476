"""Child side (and the kernel, in the stock-nbgrader route): record the library routines an exercise forbids.

A routine is forbidden by its *kernel* where it has one of its own: a `TorchDispatchMode` sees every
ATen operator the learner's code reaches, whatever Python spelling led there (`F.softmax`,
`torch._softmax`, `torch._C.TensorBase.softmax`, `x.softmax`, a reference captured in an earlier
cell), so `KERNELS` maps each forbidden routine to the operators only it dispatches to (found by
running each routine under the mode; log_softmax and nll_loss are not listed for cross_entropy, for
instance, since a learner may call them). A routine made of other operators (a composite:
`nn.MultiheadAttention.forward`, `F.rms_norm` on the CPU, `torch.distributions.Normal`) has no kernel
to recognise; it is recorded by its Python name, wrapped while the test cell runs, and, for a torch
function, by identity in a `TorchFunctionMode` (which also sees a reference captured earlier).

Where grading is sandboxed this runs in the child, beside the learner's code (grader.boundary.serve), which
could pop the modes or restore the names: the rule is as strong as in any kernel. No check's oracle
runs there, so every call counts (`in_sandbox`): a file name is no alibi, since the learner's code can
compile its own under the grader's folder. In the stock-nbgrader route it runs in the kernel, where
the checks' own oracles call the same routines: a call counts only when the nearest caller outside
torch is not grader code.
"""
from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

GRADER_DIR = str(Path(__file__).resolve().parents[1])  # the grader package, oracles included
TORCH_DIR = str(Path(torch.__file__).resolve().parent)

_SOFTMAX = ("_softmax", "_safe_softmax")
_SDPA = ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
         "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
         "_scaled_dot_product_fused_attention_overrideable", "_scaled_dot_product_attention_math_for_mps")
_ENCODER = ("_transformer_encoder_layer_fwd", "_native_multi_head_attention")
# forbidden routine -> the ATen operators (overload packets) that only it reaches
KERNELS = {
    **dict.fromkeys(("torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax",
                     "torch.special.softmax"), _SOFTMAX),
    **dict.fromkeys(("torch.log_softmax", "torch.nn.functional.log_softmax", "torch.Tensor.log_softmax",
                     "torch.special.log_softmax"), ("_log_softmax",)),
    "torch.nn.functional.scaled_dot_product_attention": _SDPA,
    **dict.fromkeys(("torch.nn.functional.multi_head_attention_forward", "torch.nn.MultiheadAttention.forward"),
                    ("_native_multi_head_attention",)),
    **dict.fromkeys(("torch.nn.TransformerEncoderLayer.forward", "torch.nn.TransformerEncoder.forward"), _ENCODER),
    **dict.fromkeys(("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.nn.LayerNorm.forward"),
                    ("native_layer_norm",)),
    **dict.fromkeys(("torch.nn.RMSNorm.forward", "torch.nn.functional.rms_norm"), ("_fused_rms_norm",)),
    "torch.nn.functional.gelu": ("gelu",),
    **dict.fromkeys(("torch.repeat_interleave", "torch.Tensor.repeat_interleave"), ("repeat_interleave",)),
}
# Routines whose kernel every call reaches; the others reach theirs on some paths only (SDPA's math path,
# nn.MultiheadAttention's slow path, RMSNorm on the CPU, repeat_interleave with int repeats) and are also
# watched by identity, which costs a Python call per torch call.
ALWAYS_KERNEL = {dotted for dotted, names in KERNELS.items()
                 if names in (_SOFTMAX, ("_log_softmax",), ("native_layer_norm",), ("gelu",))}


def _resolve(dotted: str) -> tuple[Any, str]:
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:-1]:
            owner = getattr(owner, attr)
        return owner, parts[-1]
    raise ValueError(f"cannot resolve {dotted}")


def _called_by_learner(depth: int = 2) -> bool:
    """The nearest caller outside torch (and these recorders) decides: grader code is an oracle,
    anything else is the learner."""
    frame = sys._getframe(depth)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(TORCH_DIR) and filename != __file__:
            return not filename.startswith(GRADER_DIR)
        frame = frame.f_back
    return False


def kernels_of(routines: tuple[str, ...]) -> dict[Any, str]:
    """ATen overload packet -> the forbidden routine it stands for, for those this torch has."""
    found = {}
    for dotted in routines:
        for name in KERNELS.get(dotted, ()):
            packet = getattr(torch.ops.aten, name, None)
            if packet is not None:
                found.setdefault(packet, f"{dotted} (aten.{name})")
    return found


class KernelRecorder(TorchDispatchMode):
    """Records a forbidden kernel reached from learner code; every operator runs as it would."""

    def __init__(self, kernels: dict, calls: list, learner):
        super().__init__()
        self.kernels, self.calls, self.learner = kernels, calls, learner

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # else torch wraps __torch_dispatch__ with dynamo, whose import costs a child ~1 s

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        dotted = self.kernels.get(func.overloadpacket)
        if dotted is not None and self.learner():
            self.calls.append(dotted)
        return func(*args, **(kwargs or {}))


class FunctionRecorder(TorchFunctionMode):
    """Records a forbidden torch function by identity, however the learner's code got hold of it."""

    def __init__(self, functions: dict, calls: list, learner):
        super().__init__()
        self.functions, self.calls, self.learner = functions, calls, learner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            dotted = self.functions.get(func)
        except TypeError:  # an unhashable callable is none of ours
            dotted = None
        if dotted is not None and self.learner():
            self.calls.append(dotted)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _names_wrapped(routines: tuple[str, ...], calls: list, learner):
    """Wrap each routine by its Python name so a call from learner code is recorded; restore them."""
    restore = []
    for dotted in routines:
        owner, attr = _resolve(dotted)
        had_own = attr in vars(owner)
        original = getattr(owner, attr)

        def wrapper(*args, _original=original, _dotted=dotted, **kwargs):
            if learner():
                calls.append(_dotted)
            return _original(*args, **kwargs)

        setattr(owner, attr, wrapper)
        restore.append((owner, attr, original if had_own else None))
    try:
        yield
    finally:
        for owner, attr, original in reversed(restore):
            if original is None:
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)


@contextlib.contextmanager
def recording(routines: tuple[str, ...], oracles_beside: bool = True):
    """Record, into the list it yields, each forbidden routine the learner's code calls meanwhile.
    `oracles_beside`: the checks' oracles run in this process too (the kernel route), so grader code's
    calls are theirs; else (`in_sandbox`) every call is the learner's."""
    calls: list[str] = []
    learner = _called_by_learner if oracles_beside else (lambda: True)
    if not routines:
        yield calls
        return
    functions = {}
    for dotted in [r for r in routines if r not in ALWAYS_KERNEL]:
        original = getattr(*_resolve(dotted))
        if not isinstance(original, type) and getattr(original, "__hash__", None) is not None:
            functions.setdefault(original, dotted)
    kernels = kernels_of(routines)
    modes = ([FunctionRecorder(functions, calls, learner)] if functions else []) + \
        ([KernelRecorder(kernels, calls, learner)] if kernels else [])
    for mode in modes:
        mode.__enter__()
    try:
        with _names_wrapped(routines, calls, learner):
            yield calls
    finally:
        for mode in reversed(modes):
            with contextlib.suppress(Exception):  # learner code may have popped it already
                mode.__exit__(None, None, None)


class unrecorded:
    """The grader's own torch calls beside the learner's, out of the recorders' sight: the wire's tensors
    (grader.boundary.wire.Endpoint.translating) and the snapshots the child compares after a call. No learner
    code runs there (the wire takes exact tensors only), and every torch call is spared both modes' Python."""

    def __enter__(self):
        self.guards = (torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch())
        for guard in self.guards:
            guard.__enter__()

    def __exit__(self, *exc):
        for guard in reversed(self.guards):
            guard.__exit__(*exc)


def in_sandbox(routines: tuple[str, ...]):
    """`recording` in the sandboxed child, where no oracle runs: every call is the learner's."""
    return recording(routines, oracles_beside=False)

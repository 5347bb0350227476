"""What grader.website.share does with a kernel's values: compare them across runs (fingerprint), find the
strings they hold, map those to the other edition's, put recorded values back in place; the random
generators' states."""
from __future__ import annotations

import hashlib
import inspect
import io
import random
import re
import types

import torch


def is_code(value) -> bool:
    return isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type))


def opaque(value) -> bool:
    return inspect.isgenerator(value) or inspect.iscoroutine(value) or isinstance(value, io.IOBase)


def fingerprint(value, strings, seen=None, depth=0):
    """What a value holds, for comparing runs: numbers, tensors, containers, objects' attributes. Strings go
    through `strings` (None where no string may count, e.g. from the other edition). An iterator's position
    cannot be read: it gives "opaque"."""
    seen = set() if seen is None else seen
    if is_code(value):
        return "code"
    if opaque(value) or depth > 6:
        return "opaque"
    if isinstance(value, str):
        return ("str", strings(value))
    if value is None or isinstance(value, (bool, int, float, complex)):
        return repr(value)
    if isinstance(value, torch.Tensor):
        data = value.detach().cpu().contiguous()
        raw = (data.float() if data.dtype == torch.bfloat16 else data).numpy().tobytes()
        return ("tensor", str(data.dtype), tuple(data.shape), hashlib.sha256(raw).hexdigest())
    if isinstance(value, torch.Generator):
        return ("generator", hashlib.sha256(value.get_state().numpy().tobytes()).hexdigest())
    if id(value) in seen:
        return "seen"
    seen.add(id(value))
    if isinstance(value, torch.nn.Module):
        return ("module", type(value).__qualname__, fingerprint(value.state_dict(), strings, seen, depth + 1),
                value.training)
    if hasattr(value, "state_dict") and callable(value.state_dict):  # optimisers, schedulers
        try:
            return (type(value).__qualname__, fingerprint(value.state_dict(), strings, seen, depth + 1))
        except Exception:  # noqa: BLE001 - a state it cannot give is a state we cannot compare
            return "opaque"
    if isinstance(value, dict):
        return ("dict", [(fingerprint(k, strings, seen, depth + 1), fingerprint(v, strings, seen, depth + 1))
                         for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [fingerprint(v, strings, seen, depth + 1) for v in value])
    if isinstance(value, (set, frozenset)):
        return ("set", sorted(repr(fingerprint(v, strings, seen, depth + 1)) for v in value))
    if hasattr(value, "__dict__"):
        return (type(value).__qualname__, fingerprint(vars(value), strings, seen, depth + 1))
    return "opaque"


def translate(value, mapping: dict[str, str], seen=None):
    """The value with its strings mapped (in place for containers and objects' attributes)."""
    seen = set() if seen is None else seen
    if isinstance(value, str):
        return mapping.get(value, value)
    if id(value) in seen or isinstance(value, (torch.Tensor, torch.nn.Module, type, types.ModuleType)):
        return value
    seen.add(id(value))
    if isinstance(value, dict):
        items = [(translate(k, mapping, seen), translate(v, mapping, seen)) for k, v in value.items()]
        value.clear()
        value.update(items)
    elif isinstance(value, list):
        value[:] = [translate(v, mapping, seen) for v in value]
    elif isinstance(value, tuple):
        return type(value)(translate(v, mapping, seen) for v in value) if not hasattr(value, "_fields") else \
            type(value)(*(translate(v, mapping, seen) for v in value))
    elif hasattr(value, "__dict__") and not callable(value):
        for key, item in list(vars(value).items()):
            setattr(value, key, translate(item, mapping, seen))
    return value


def strings_of(value, seen=None) -> set[str]:
    seen = set() if seen is None else seen
    if isinstance(value, str):
        return {value}
    if id(value) in seen or isinstance(value, (torch.Tensor, type, types.ModuleType)):
        return set()
    seen.add(id(value))
    if isinstance(value, torch.nn.Module):
        return set()  # its state is tensors; its attribute names are code
    if hasattr(value, "state_dict") and callable(value.state_dict):  # an optimiser: its state is what is kept
        try:
            return strings_of(value.state_dict(), seen)
        except Exception:  # noqa: BLE001 - no state to give: its attributes then
            pass
    found = set()
    items = (list(value.items()) if isinstance(value, dict) else list(value) if isinstance(value, (list, tuple, set))
             else list(vars(value).items()) if hasattr(value, "__dict__") and not callable(value) else [])
    for item in items:
        found |= strings_of(item, seen)
    return found


def put_back(namespace: dict, name: str, value, rebound: bool) -> None:
    """A recorded value into the kernel: bound to the name where the statement bound it anew, else into the
    object already there (what else holds that object, an optimiser its model's parameters, sees the change)."""
    current = namespace.get(name)
    if rebound or current is None:
        namespace[name] = value
    elif isinstance(current, torch.nn.Module) and type(current) is type(value):
        current.load_state_dict(value.state_dict())
        for ours, theirs in zip(current.modules(), value.modules()):
            ours.training = theirs.training
    elif isinstance(current, torch.Generator) and isinstance(value, torch.Generator):
        current.set_state(value.get_state())
    elif (current is not None and type(current) is type(value) and hasattr(current, "load_state_dict")
          and not isinstance(current, torch.Tensor)):
        current.load_state_dict(value.state_dict())
    elif isinstance(current, list) and type(value) is list:
        current[:] = value
    elif isinstance(current, dict) and type(value) is dict:
        current.clear()
        current.update(value)
    else:
        namespace[name] = value


def random_states() -> dict:
    import numpy

    return {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": numpy.random.get_state()}


def set_random_states(before: dict, after: dict) -> None:
    """PyTorch's generator as the recorded run left it; Python's and NumPy's too where they started alike
    (unseeded, each process starts them apart: what the statement drew from them was chance in both runs)."""
    import numpy

    torch.set_rng_state(after["torch"])
    ours = random_states()
    if repr(ours["python"]) == repr(before["python"]):
        random.setstate(after["python"])
    if repr(ours["numpy"]) == repr(before["numpy"]):
        numpy.random.set_state(after["numpy"])


def neutral_text(text: str) -> bool:
    """A string no edition translates: ASCII, and a name (a dict key of the toolkit) or no word at all."""
    return text.isascii() and (text.isidentifier() or not re.search(r"[A-Za-z]{2}", text))

"""Realistic wrong implementations (each must lose points) and correct-but-different ones."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    exercise: str  # the exercise name this source redefines
    label: str  # the mistake (or the alternative approach) in a few words
    source: str  # Python source defining `exercise`
    zero: bool = False  # must score nothing at all for the exercise (an answer that does nothing)
    at_most: float | None = None  # a clearly wrong answer keeps at most this share of the points (guides/teaching.md)


_MODULE = "class {name}(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
_FORWARD = _MODULE + "        super().__init__()\n\n    def forward(self, *args, **kwargs):\n"
# kind -> source of an answer that computes nothing ("forward ...", "__init__ ...": a module)
DO_NOTHING = {
    "returns None": "def {name}(*args, **kwargs):\n    return None\n",
    "raises ValueError": "def {name}(*args, **kwargs):\n    raise ValueError('not written yet')\n",
    "forward returns None": _FORWARD + "        return None\n",
    "forward raises ValueError": _FORWARD + "        raise ValueError('not written yet')\n",
    "__init__ raises ValueError": _MODULE + "        raise ValueError('not written yet')\n",
}


def do_nothing(exercise: str, *kinds: str) -> list[Variant]:
    """Answers that compute nothing, which side rules (ValueError, in place) must not pay (issue 29)."""
    return [Variant(exercise, f"does nothing: {kind}", DO_NOTHING[kind].format(name=exercise), zero=True)
            for kind in kinds]

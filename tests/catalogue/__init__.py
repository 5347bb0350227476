"""Realistic wrong implementations (each must lose points) and correct-but-different ones."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    exercise: str  # the exercise name this source redefines
    label: str  # the mistake (or the alternative approach) in a few words
    source: str  # Python source defining `exercise`

"""The numbers the public checks store, and how each is computed again.

A public check (`course/checks/<chapter>.py`) runs without reference code, so it keeps a few numbers:
what the reference gives on the check's fixed inputs, and what known mistakes give on the same inputs
(that is how a failing check names the mistake). They sit in the chapter module between the lines

    # --- stored numbers: <block> ---
    ...
    # --- end of stored numbers ---

as plain Python literals, so a learner reads them next to the check and `grader build` carries them
into the chapter folder with the module. This package writes them: `tests/snapshots/<chapter>.py`
lists one `Stored` per number, saying which implementation gives it (the reference in `solutions/`, a
mistake of `tests/catalogue/`, or a mistake kept here that the catalogue does not hold) and how the
check calls it (the probe). Run from the repository root:

    .venv/bin/python -m tests.snapshots            # compare: lists every stored number that differs
    .venv/bin/python -m tests.snapshots --write    # rewrite the blocks from what the code gives now

`tests/test_snapshots.py` fails when a stored number differs from what this computes by more than
`ATOL + RTOL * |value|`, and runs each check on each mistake to see that it names it.
"""
from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch

from grader.chapters import CHAPTERS, REPO
from tests.helpers import as_a_cell, reference_namespace

ATOL = 2e-6  # a number is stored to 6 decimals (an error of 5e-7), and float32 differs a little across torch builds
RTOL = 1e-5
WIDTH = 120
START = re.compile(r"^# --- stored numbers: (\S+) ---$")
END = "# --- end of stored numbers ---"


@dataclass(frozen=True)
class Mistake:
    """A wrong implementation of the exercise: the catalogue entry `label` (source None), or one kept here."""
    label: str
    source: str | None = None


def catalogued(label: str) -> Mistake:
    return Mistake(label)


def kept_here(label: str, source: str) -> Mistake:
    """A mistake the public check names that the catalogue does not hold (a check-only variant)."""
    return Mistake(label, source)


@dataclass(frozen=True)
class Stored:
    """One stored number: `probe(implementation)` of the exercise, as the check calls it.

    name: the module constant; block: the `stored numbers` block it sits in (the exercise by default);
    mistake: None for the reference; says: words of the message the check gives for that mistake;
    note: a comment written above the constant; digits: decimals kept (sig: significant digits instead);
    tensor: written as torch.tensor(...) rather than a list.
    """
    name: str
    exercise: str
    probe: Callable[[Any], Any]
    mistake: Mistake | None = None
    says: str | None = None
    note: str | None = None
    block: str | None = None
    digits: int = 6
    sig: int | None = None
    tensor: bool = False

    @property
    def where(self) -> str:
        return self.block or self.exercise


def chapter_names() -> list[str]:
    return [c.name for c in CHAPTERS]


def _chapter(name: str):
    return next(c for c in CHAPTERS if c.name == name)


def recipes(chapter: str) -> list[Stored]:
    return importlib.import_module(f"tests.snapshots.{chapter}").STORED


def checks_path(chapter: str):
    return REPO / "course" / "checks" / f"{chapter}.py"


# ------------------------------------------------------------------ implementations
def mistake_source(chapter: str, exercise: str, mistake: Mistake) -> str:
    if mistake.source is not None:
        return mistake.source
    catalogue = importlib.import_module(f"tests.catalogue.{chapter}")
    found = [v for v in catalogue.WRONG if v.label == mistake.label and v.exercise == exercise]
    if len(found) != 1:
        raise LookupError(f"tests/catalogue/{chapter}.py has no {exercise} mistake labelled {mistake.label!r}")
    return found[0].source


@cache
def _reference(chapter: str) -> dict:
    return reference_namespace(_chapter(chapter))


def implementation(chapter: str, exercise: str, mistake: Mistake | None = None) -> Any:
    """The exercise as the reference writes it, or with the mistake (the rest of the chapter is the reference)."""
    if mistake is None:
        return _reference(chapter)[exercise]
    return as_a_cell(mistake_source(chapter, exercise, mistake), reference_namespace(_chapter(chapter)))[exercise]


# ------------------------------------------------------------------ values
def plain(value: Any, entry: Stored) -> Any:
    """A probe's result as nested lists of rounded floats (or ints, bools), tuples and dicts kept."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if value.dtype.is_floating_point:
            value = value.double()
        return plain(value.tolist(), entry)
    if isinstance(value, dict):
        return {k: plain(v, entry) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(plain(v, entry) for v in value)
    if isinstance(value, list):
        return [plain(v, entry) for v in value]
    if isinstance(value, int):  # bools too
        return value
    if isinstance(value, float):
        rounded = float(f"{value:.{entry.sig}g}") if entry.sig else round(value, entry.digits)
        return rounded + 0.0  # no -0.0
    raise TypeError(f"{entry.name}: cannot store a {type(value).__name__}")


def compute(chapter: str, only: set[str] | None = None) -> dict[str, Any]:
    """Each stored name of the chapter -> the value the code gives now."""
    values = {}
    for entry in recipes(chapter):
        if only is not None and entry.name not in only:
            continue
        fn = implementation(chapter, entry.exercise, entry.mistake)
        with torch.random.fork_rng(devices=[]):  # the probes draw nothing that matters; seeded all the same
            torch.manual_seed(0)
            values[entry.name] = plain(entry.probe(fn), entry)
    return values


def stored(chapter: str) -> dict[str, Any]:
    """Each constant in the module's stored blocks -> its value as written (tensors as lists)."""
    module = importlib.import_module(f"course.checks.{chapter}")
    names = [name for _, block in blocks(checks_path(chapter).read_text()) for name in block]
    return {name: _as_plain(getattr(module, name)) for name in names}


def _as_plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.tolist()
    return value


def differences(expected: Any, got: Any, atol: float = ATOL, path: str = "") -> list[str]:
    """Where `got` (stored) differs from `expected` (computed), beyond atol + RTOL * |expected|."""
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return [f"{path}: keys {sorted(got) if isinstance(got, dict) else got!r} != {sorted(expected)}"]
        return [d for k in expected for d in differences(expected[k], got[k], atol, f"{path}[{k!r}]")]
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return [f"{path}: {got!r} has another shape than {expected!r}"]
        return [d for i, (e, g) in enumerate(zip(expected, got)) for d in differences(e, g, atol, f"{path}[{i}]")]
    if isinstance(expected, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        if math.isclose(got, expected, rel_tol=RTOL, abs_tol=atol):
            return []
        return [f"{path}: stored {got!r}, computed {expected!r}"]
    return [] if type(got) is type(expected) and got == expected else [f"{path}: stored {got!r}, computed {expected!r}"]


def compare(chapter: str) -> tuple[int, list[str]]:
    """How many numbers the chapter stores, and each way they differ from what the code gives now
    (beyond ATOL + RTOL * |value|; numbers kept to `sig` significant digits: RTOL alone)."""
    entries = {e.name: e for e in recipes(chapter)}
    values, have = compute(chapter), stored(chapter)
    problems = [f"{name} is stored but no recipe computes it" for name in sorted(set(have) - set(values))]
    problems += [f"{name} is computed but not stored" for name in sorted(set(values) - set(have))]
    problems += [f"{name}{where}" for name in values if name in have
                 for where in differences(values[name], have[name], 0.0 if entries[name].sig else ATOL)]
    return len(values), problems


# ------------------------------------------------------------------ the blocks in a module
def blocks(text: str) -> list[tuple[str, list[str]]]:
    """(block name, the constants assigned in it) for each stored block, in order."""
    found, current = [], None
    for line in text.splitlines():
        start = START.match(line)
        if start:
            if current is not None:
                raise ValueError(f"stored block {current[0]} has no end line")
            current = (start.group(1), [])
        elif line == END:
            if current is None:
                raise ValueError("an end of stored numbers without a start")
            found.append(current)
            current = None
        elif current is not None and re.match(r"^[A-Za-z_]\w* = ", line):
            current[1].append(line.split(" = ", 1)[0])
    if current is not None:
        raise ValueError(f"stored block {current[0]} has no end line")
    return found


def literal(value: Any, column: int, trailing: int = 0) -> str:
    """`value` as a Python literal that starts at `column` and is followed by `trailing` characters on its
    last line, wrapped so that no line is longer than WIDTH."""
    flat = repr(value)
    if column + len(flat) + trailing <= WIDTH or not isinstance(value, (list, tuple, dict)) or not value:
        return flat
    opening, closing = {list: ("[", "]"), tuple: ("(", ")"), dict: ("{", "}")}[type(value)]
    if isinstance(value, tuple) and len(value) == 1:
        closing = ",)"
    items = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
    last = len(items) - 1
    if all(not isinstance(v, (list, tuple, dict)) for _, v in items):  # scalars fill lines
        lines, line = [], ""
        for i, (key, v) in enumerate(items):
            piece = (f"{key!r}: " if isinstance(value, dict) else "") + repr(v)
            piece += closing if i == last else ","
            if line and column + 1 + len(line) + len(piece) + (trailing if i == last else 0) > WIDTH:
                lines.append(line.rstrip())
                line = ""
            line += piece + " "
        lines.append(line.rstrip())
        return opening + ("\n" + " " * (column + 1)).join(lines)
    parts = []
    for i, (key, v) in enumerate(items):
        head = f"{key!r}: " if isinstance(value, dict) else ""
        after = len(closing) + trailing if i == last else 1
        parts.append(head + literal(v, column + 1 + len(head), after))
    return opening + (",\n" + " " * (column + 1)).join(parts) + closing


def render(entry: Stored, value: Any) -> str:
    head = f"{entry.name} = torch.tensor(" if entry.tensor else f"{entry.name} = "
    text = head + literal(value, len(head)) + (")" if entry.tensor else "")
    note = entry.note or (entry.mistake and f"mistake: {entry.mistake.label}")
    if note:
        text = f"# {note}\n{text}"
    return text


def rewrite(chapter: str, values: dict[str, Any]) -> str:
    """The module's text with every stored block written from `values`."""
    path = checks_path(chapter)
    text = path.read_text()
    entries = recipes(chapter)
    by_block: dict[str, list[Stored]] = {}
    for entry in entries:
        by_block.setdefault(entry.where, []).append(entry)
    present = [name for name, _ in blocks(text)]
    missing = sorted(set(by_block) - set(present))
    if missing:
        raise ValueError(f"{path.relative_to(REPO)} has no stored block for {missing}: add the lines "
                         f"'# --- stored numbers: {missing[0]} ---' and '{END}' where the numbers belong")
    unknown = sorted(set(present) - set(by_block))
    if unknown:
        raise ValueError(f"{path.relative_to(REPO)} has stored blocks no recipe fills: {unknown}")
    out, skipping = [], False
    for line in text.splitlines():
        start = START.match(line)
        if start:
            out.append(line)
            out += [render(e, values[e.name]) for e in by_block[start.group(1)]]
            skipping = True
        elif line == END:
            out.append(line)
            skipping = False
        elif not skipping:
            out.append(line)
    return "\n".join(out) + "\n"

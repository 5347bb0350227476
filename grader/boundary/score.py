"""Trusted side (and the learner's kernel, in the stock-nbgrader route): an exercise's score from its checks.

`run_each` runs every check of an exercise on the learner's object (a proxy of the child's object where
the judge runs the checks, grader.boundary.proxy; the object itself in a kernel, grader.boundary.runner)
into a `Result`: the checks that passed, those that failed and why, and the partial credit, the fraction
that passed; or no credit at all, with the reason. Both routes score with this one rule.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.boundary.spec import Exercise


@dataclass
class Result:
    name: str
    points: float
    passed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (check, why)
    zero_reason: str | None = None

    @property
    def score(self) -> float:
        total = len(self.passed) + len(self.failed)
        if self.zero_reason or total == 0:
            return 0.0
        return round(self.points * len(self.passed) / total, 3)

    def report(self) -> str:
        lines = [f"{self.name}: {self.score:g} / {self.points:g} points"]
        if self.zero_reason:
            lines.append(f"  no credit: {self.zero_reason}")
        lines += [f"  ok    {c}" for c in self.passed]
        lines += [f"  FAIL  {c}: {why}" for c, why in self.failed]
        return "\n".join(lines)


def run_each(exercise: Exercise, obj: Any, result: Result, passthrough: tuple = ()) -> None:
    """Run every check on `obj` into `result`; what the learner's code raised becomes a failure (a
    time limit reached in the judge's child, a zero for the exercise), `passthrough` propagates."""
    for check in exercise.checks:
        try:
            check.run(obj)
        except passthrough:
            raise
        except NotImplementedError:
            result.failed.append((check.description, "not implemented yet"))
        except AssertionError as err:
            result.failed.append((check.description, str(err) or "assertion failed"))
        except Exception as err:  # noqa: BLE001 - the learner's code raised
            line = getattr(err, "remote_line", None)  # set on an exception raised in the judge's child
            if type(err).__name__ == "CellTimeout" and hasattr(err, "remote_line"):
                result.zero_reason = "the cell ran past its time limit and was interrupted"
                return
            if line is None:
                where = traceback.extract_tb(err.__traceback__)
                line = where[-1].lineno if where else 0
            result.failed.append((check.description, f"{type(err).__name__}: {err} (line {line})"))
        else:
            result.passed.append(check.description)
    side_rules_pay(exercise, result)


SIDE_UNPAID = "a side rule pays only when the answer is also right on valid input (no other check passed)"


def side_rules_pay(exercise: Exercise, result: Result) -> None:
    """A passed side check counts only beside a passed check of the answer itself: a softmax that
    returns None leaves its input alone, and one that always raises raises the ValueErrors."""
    side = {c.description for c in exercise.checks if c.side}
    if not side or any(d not in side for d in result.passed):
        return
    result.failed += [(d, SIDE_UNPAID) for d in result.passed]
    result.passed.clear()


def forbidden_reason(calls) -> str:
    return f"the solution calls {', '.join(sorted(set(calls)))}, which this exercise asks you to write yourself"

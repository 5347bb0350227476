"""Trusted side (and the learner's kernel, in the stock-nbgrader route): an exercise's score from its checks.

`run_each` runs every check of an exercise on the learner's object (a proxy of the child's object where
the judge runs the checks, grader.boundary.proxy; the object itself in a kernel, grader.boundary.runner)
into a `Result`: the checks that passed, those that failed and why, and the partial credit, the fraction
that passed; or no credit at all, with the reason. Both routes score with this one rule.
"""
from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from grader.boundary.spec import Exercise


def shown(text: str) -> str:
    """Marks a text a learner's graded feedback shows: grader.classroom.phrasebook finds each one in the
    source and translates it for a translated edition (the hidden checks' own texts need no mark)."""
    return text


HEAD = shown("{name}: {score} / {points} points")
NO_CREDIT = shown("  no credit: {reason}")
PASSED = shown("  ok    {check}")
FAILED = shown("  FAIL  {check}: {why}")
LIKELY_MISTAKE = shown("  Likely mistake (from the notebook's own check): {mistake}")
NAMED_ERROR = shown("{mistake} (your code raised {error})")
# A check's message that is only what Python raised (run_each's "{type}: {error} (line {n})"): the named
# mistake says more, so it carries that.
PYTHON_ERROR = re.compile(r"\w*(?:Error|Exception): .*\(line \d+\)", re.S)


def points(value: float) -> str:
    """A score as a person writes it, the same in every view: at most two decimals ("4.67", not 4.667)."""
    return f"{round(float(value), 2):g}"


def _english(template: str, **values) -> str:
    return template.format(**values)


@dataclass
class Result:
    name: str
    points: float
    passed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (check, why)
    zero_reason: str | None = None
    weights: dict[str, float] = field(default_factory=dict)  # check -> weight (Exercise.weights); 1 if absent
    diagnosis: str | None = None  # the known mistake the public check names (grader.boundary.diagnosis)

    @property
    def score(self) -> float:
        """The weighted share of the checks that passed, times the points."""
        passed = sum(self.weights.get(c, 1.0) for c in self.passed)
        total = passed + sum(self.weights.get(c, 1.0) for c, _ in self.failed)
        if self.zero_reason or total == 0:
            return 0.0
        return round(self.points * passed / total, 3)

    def report(self, say: Callable[..., str] = _english) -> str:
        """The lines a learner reads, the likely mistake first (the checks' own lines say how far off);
        `say(template, **values)` puts them in their language (grader.classroom.phrasebook.Phrasebook.say)."""
        lines = [say(HEAD, name=self.name, score=points(self.score), points=points(self.points))]
        if self.zero_reason:
            lines.append(say(NO_CREDIT, reason=self.zero_reason))
        if self.diagnosis:
            lines.append(say(LIKELY_MISTAKE, mistake=self.diagnosis))
        lines += [say(PASSED, check=c) for c in self.passed]
        lines += [say(FAILED, check=c, why=self._named(why, say)) for c, why in self.failed]
        return "\n".join(lines)

    def _named(self, why: str, say: Callable[..., str]) -> str:
        if self.diagnosis and PYTHON_ERROR.fullmatch(why.strip()):
            return say(NAMED_ERROR, mistake=self.diagnosis, error=why)
        return why


ERROR_CHARS = 500  # of an exception's text in a check's message


def one_line(err: BaseException, limit: int | None = ERROR_CHARS) -> str:
    """An exception's text as one line of the report: the learner's code may raise it, so its newlines and
    control characters become spaces (it can never start a report line, e.g. a forged "Likely mistake"), and a
    long one is cut at `limit` (None: a check's own message, whose whole text the translation matches)."""
    text = re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+", " ", str(err))  # not stripped: a message's own shape stays
    return text if limit is None or len(text) <= limit else text[:limit] + "…"


def run_each(exercise: Exercise, obj: Any, result: Result, passthrough: tuple = ()) -> None:
    """Run every check on `obj` into `result`; what the learner's code raised becomes a failure (a
    time limit reached in the judge's child, a zero for the exercise), `passthrough` propagates."""
    result.weights = exercise.weights()
    for check in exercise.checks:
        try:
            check.run(obj)
        except passthrough:
            raise
        except NotImplementedError:
            result.failed.append((check.description, shown("not implemented yet")))
        except AssertionError as err:
            result.failed.append((check.description, one_line(err, limit=None) or shown("assertion failed")))
        except Exception as err:  # noqa: BLE001 - the learner's code raised
            line = getattr(err, "remote_line", None)  # set on an exception raised in the judge's child
            if type(err).__name__ == "CellTimeout" and hasattr(err, "remote_line"):
                result.zero_reason = shown("the cell ran past its time limit and was interrupted")
                return
            if line is None:
                where = traceback.extract_tb(err.__traceback__)
                line = where[-1].lineno if where else 0
            result.failed.append((check.description, shown(f"{type(err).__name__}: {one_line(err)} (line {line})")))
        else:
            result.passed.append(check.description)
    side_rules_pay(exercise, result)


SIDE_UNPAID = shown("a side rule pays only when the answer is also right on valid input (no other check passed)")


def side_rules_pay(exercise: Exercise, result: Result) -> None:
    """A passed side check counts only beside a passed check of the answer itself, of the same part: a
    softmax that returns None leaves its input alone, one that always raises raises the ValueErrors, and
    a module whose forward always raises passes its constructor's checks but earns no forward's side rule."""
    passed = set(result.passed)
    answered = {c.part for c in exercise.checks if not c.side and c.description in passed}
    unpaid = [c.description for c in exercise.checks if c.side and c.description in passed and c.part not in answered]
    if unpaid:
        result.passed[:] = [d for d in result.passed if d not in unpaid]
        result.failed += [(d, SIDE_UNPAID) for d in unpaid]


def forbidden_reason(calls) -> str:
    return shown(f"the solution calls {', '.join(sorted(set(calls)))}, which this exercise asks you to write yourself")

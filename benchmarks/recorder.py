"""What recording forbidden routines costs (grader.boundary.forbid: a TorchDispatchMode and a TorchFunctionMode
around the learner's code while its checks run), printed (not asserted).

    .venv/bin/python benchmarks/recorder.py            # every chapter
    .venv/bin/python benchmarks/recorder.py 07 08      # some chapters

Each chapter's reference answers are judged as a graded notebook is (the checks here, the learner's
code in a forked child: tests.helpers.evaluate_in_child), with the sandbox's recorder and with the
Python-name recording only (the recorder before issue 29); the best of `--repeat` runs of each, in CPU
seconds of the children (where the recorder runs).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.helpers, from a checkout

from grader.boundary import forbid
from grader.boundary.specs import exercises
from grader.chapters import CHAPTERS, find_chapter
from tests.helpers import evaluate_in_child, reference_namespace


@contextlib.contextmanager
def names_only(routines):
    calls: list[str] = []
    with forbid._names_wrapped(routines, calls, lambda: True):
        yield calls


def judge_chapter(chapter, recorder) -> float:
    """CPU seconds of the children, where the recorder runs (less noisy than wall time on a busy machine)."""
    before = os.times()
    for exercise in exercises(chapter.name).values():
        evaluate_in_child(exercise, reference_namespace(chapter), record=recorder)
    after = os.times()
    return after.children_user + after.children_system - before.children_user - before.children_system


def best(chapter, repeat: int, recorder) -> float:
    return min(judge_chapter(chapter, recorder) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("chapters", nargs="*")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    chapters = [find_chapter(k) for k in args.chapters] or CHAPTERS
    print("CPU seconds of the sandboxed children while each chapter's checks run")
    print(f"{'chapter':<26} {'names only (s)':>15} {'kernels too (s)':>16} {'overhead':>9}")
    for chapter in chapters:
        plain = best(chapter, args.repeat, names_only)
        full = best(chapter, args.repeat, forbid.in_sandbox)
        print(f"{chapter.assignment:<26} {plain:>15.2f} {full:>16.2f} {100 * (full / plain - 1):>8.0f}%")


if __name__ == "__main__":
    main()

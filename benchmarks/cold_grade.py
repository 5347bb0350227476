"""A cold `grader grade` of one notebook against a bare `python -c "import torch"` (issue 47: goal <= 2.5x),
printed (not asserted): both run as new processes, alternately, so that a shared machine's load falls on
both sides alike; medians of wall and CPU seconds (the process tree's user+sys) and their ratios.

    .venv/bin/python benchmarks/cold_grade.py                     # chapters 02 and 06, 5 pairs each
    .venv/bin/python benchmarks/cold_grade.py --chapters 02 --repeat 9
    .venv/bin/python benchmarks/cold_grade.py --importtime        # also: the slowest imports of a grading run
    .venv/bin/python benchmarks/cold_grade.py --baseline /tmp/main   # also another tree of the grader, in turn

--baseline: a copy of another commit's tree (`git archive main | tar -x -C /tmp/main`, then its generated
source folders: `cp -r grader/source* /tmp/main/grader/`), graded with this environment's python in the same
rotation, so that a before/after comparison shares the machine's load.

"Cold" is a new interpreter for each run; the page cache is warm (one untimed run of each goes first, and it
fills the grader's release cache, as a learner's first `grader grade` does).
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from grader.authoring import samples
from grader.chapters import find_chapter

TORCH = [sys.executable, "-c", "import torch"]
GRADER = [sys.executable, "-m", "grader", "grade"]


def timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and the process tree's CPU seconds (user+sys, its reaped children included)."""
    import time

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def compare(commands: dict[str, list[str]], repeat: int) -> dict[str, tuple[float, float]]:
    """Each command run `repeat` times, in turn; the median wall and CPU seconds of each."""
    for command in commands.values():  # warm the page cache and the release cache
        timed(command)
    runs: dict[str, list] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, command in commands.items():
            runs[name].append(timed(command))
    return {name: (statistics.median(r[0] for r in got), statistics.median(r[1] for r in got))
            for name, got in runs.items()}


def in_tree(tree: Path) -> list[str]:
    """`grader grade` of another tree of the grader, with this environment's python. -P: `-m` would put the
    working directory (this checkout, where the benchmark is run from) before PYTHONPATH, and grade with it."""
    return ["env", f"PYTHONPATH={tree}", sys.executable, "-P", "-m", "grader", "grade"]


def slowest_imports(notebook: Path, top: int = 15) -> list[tuple[float, str]]:
    """The top-level imports of a grading run (the grading process and the fork server, whose import
    lines interleave), by cumulative seconds (`python -X importtime`)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "grader", "grade", str(notebook)],
                          capture_output=True, text=True, check=True)
    rows = []
    for line in done.stderr.splitlines():
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if found and len(found.group(2)) <= 1:  # top level: imported by the grader's own code
            rows.append((int(found.group(1)) / 1e6, found.group(3)))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chapters", nargs="+", default=["02", "06"])
    parser.add_argument("--repeat", type=int, default=5, help="alternating pairs per chapter")
    parser.add_argument("--importtime", action="store_true", help="the slowest imports of a grading run")
    parser.add_argument("--baseline", type=Path, help="another tree of the grader, graded in the same rotation")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPU cores, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f} "
          "(a shared machine: the pairs alternate so that load falls on both sides)")
    with tempfile.TemporaryDirectory(prefix="cold-grade-") as tmp:
        for key in args.chapters:
            chapter = find_chapter(key)
            notebook = Path(tmp) / chapter.assignment / chapter.notebook_name
            notebook.parent.mkdir()
            nbformat.write(samples.reference(chapter), notebook)
            commands = {"`import torch`": TORCH, "`grader grade` (cold)": GRADER + [str(notebook)]}
            if args.baseline:
                commands[f"baseline {args.baseline}"] = in_tree(args.baseline) + [str(notebook)]
            got = compare(commands, args.repeat)
            print(f"{chapter.assignment}: medians of {args.repeat} runs each, in turn; new processes, warm page cache")
            torch_wall, torch_cpu = got["`import torch`"]
            for name, (wall, cpu) in got.items():
                print(f"  {name:<26} {wall:6.2f} s {cpu:6.2f} CPU-s = {wall / torch_wall:4.2f}x wall, "
                      f"{cpu / torch_cpu:4.2f}x CPU of `import torch` (goal <= 2.5x)", flush=True)
            if args.importtime:
                print("  the slowest top-level imports (grading process and fork server; cumulative s):")
                for seconds, name in slowest_imports(notebook):
                    print(f"    {seconds:6.2f}  {name}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

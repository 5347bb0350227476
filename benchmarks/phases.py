"""Where a batch's time goes (issue 47): `grader autograde` of a class run in this process with each phase
timed, printed as a table of wall and CPU seconds, summed over the batch and per notebook.

    .venv/bin/python benchmarks/grading.py --profile --no-stock --students 12 --chapters 01 02 03 04 05 06

The trusted phases (staging, the hidden checks and the diagnosis run here against proxies, nbgrader's
autograde into the gradebook, feedback HTML and the CSV export) are timed around the functions that do
them, their CPU as the calling thread's. The child's phases (fork and confine, the IPython shell, the
learner's cells, serving the checks' calls inside the forbidden-op recorder) come from the timings the
pool keeps in each verdict (grader.boundary.pool: the child's own word, used for this table only). The
whole tree's CPU is this process's, its reaped children's (the fork server, once stopped, with the
children it reaped; the nbgrader helper, grader.classroom.grading.nbgrader_helper, whose autograde and
feedback this process awaits: their wall here, their CPU the helper's) and what the processes that ran the
cells said they used (never reaped by any of ours: /usr/bin/time does not count them either).
"""
from __future__ import annotations

import contextlib
import os
import re
import resource
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

WALL, CPU = defaultdict(float), defaultdict(float)
_lock = threading.Lock()


def _add(phase: str, wall: float, cpu: float | None) -> None:
    with _lock:
        WALL[phase] += wall
        if cpu is not None:
            CPU[phase] += cpu


def _timed(owner, name: str, phase: str) -> None:
    """Replace owner.name by the same function that adds its wall and this thread's CPU to `phase`."""
    original = getattr(owner, name)

    def timed(*args, **kwargs):
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            _add(phase, time.perf_counter() - wall, time.thread_time() - cpu)

    setattr(owner, name, timed)


def _child_phases(verdict) -> None:
    timings, said = verdict.timings, verdict.timings.get("child_cpu", {})
    cells = sum(m.get("seconds", 0) for m in verdict.cells.values() if isinstance(m.get("seconds"), (int, float)))
    _add("child: fork, confine", timings.get("start") or 0.0, None)
    _add("child: IPython shell", timings.get("shell") or 0.0, said.get("shell"))
    _add("child: learner's cells", cells, said.get("cells"))
    _add("child: serving checks (recorder on)", 0.0, said.get("tests"))
    _add("trusted: job folder copy", timings.get("copy") or 0.0, None)


def instrument() -> None:
    from grader.boundary import diagnosis, proxy
    from grader.boundary.pool import Pool
    from grader.classroom.grading import batch as grading
    from grader.classroom.grading import recording
    _timed(grading, "release_all", "trusted: release")
    _timed(grading, "stage", "trusted: stage (read, repair, write)")
    _timed(grading, "record", "trusted: nbgrader autograde (in the helper)")
    _timed(grading, "feedback_and_export", "trusted: feedback HTML + CSV")
    _timed(grading, "result_of", "trusted: results (gradebook reads)")
    _timed(recording, "write_course_csv", "  of which CSV export")
    _timed(proxy, "judge_exercise", "trusted: hidden checks (vs proxies)")
    _timed(diagnosis, "diagnose_all", "trusted: diagnosis")
    judge = Pool.judge

    def judged(self, job):
        wall = time.perf_counter()
        verdict = judge(self, job)
        _add("judge: one child, wall (all of above)", time.perf_counter() - wall, None)
        _child_phases(verdict)
        return verdict

    Pool.judge = judged


def _cpu(who) -> float:
    used = resource.getrusage(who)
    return used.ru_utime + used.ru_stime


def _tree_cpu() -> float:
    return _cpu(resource.RUSAGE_SELF) + _cpu(resource.RUSAGE_CHILDREN)


def import_costs(top: int = 8) -> list[tuple[str, float]]:
    """`python -X importtime` of what a grading process imports: the slowest top-level packages (s)."""
    code = ("import grader.classroom.grading.batch, grader.boundary.proxy, grader.boundary.diagnosis, "
            "nbconvert.exporters")
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True).stderr
    found = {}
    for line in err.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| ( *)(\S+)", line)
        if m and len(m[2]) <= 1:  # a top-level import (its cumulative time)
            found[m[3]] = found.get(m[3], 0) + int(m[1]) / 1e6
    return sorted(found.items(), key=lambda kv: -kv[1])[:top]


def profile(inbox: Path, course_dir: Path, jobs: int) -> float:
    """Grade `inbox` as `grader autograde` does, timed by phase; print the table; return the whole tree's
    CPU seconds per notebook."""
    from grader.boundary import forkserver
    from grader.classroom.grading.batch import autograde_class

    WALL.clear()
    CPU.clear()
    started_cpu, started, own = _tree_cpu(), time.perf_counter(), _cpu(resource.RUSAGE_SELF)
    forkserver.start()
    instrument()
    # multiprocessing re-runs a main script by its path in every child before its target (1.3 CPU-s for
    # this benchmark's; `grader`'s console script takes 0.02 s, `python -m grader` none): not here
    main = sys.modules["__main__"]
    path = main.__dict__.pop("__file__", None)
    try:
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            autograde_class(inbox, course_dir, jobs=jobs, progress=False)
    finally:
        if path is not None:
            main.__file__ = path
    forkserver.stop()  # reaped: its CPU, and its children's, count in RUSAGE_CHILDREN
    wall, cpu, own = time.perf_counter() - started, _tree_cpu() - started_cpu, _cpu(resource.RUSAGE_SELF) - own
    # the process that runs the cells is PID 1 of a namespace, killed with the child after its diagnoses, never
    # reaped by anything of ours: its CPU is missing from RUSAGE_CHILDREN (and from /usr/bin/time), so its word
    said = sum(v for k, v in CPU.items() if k.startswith("child"))
    cpu += said
    count = len(list(Path(course_dir).glob("autograded/*/*/*.ipynb")))
    print(f"\nprofile of one batch ({count} notebooks, --jobs {jobs}; wall of a phase is summed over its threads "
          "and children, so the judge's overlap)")
    print(f"{'phase':<42} {'wall s':>8} {'CPU s':>8} {'wall/nb':>8} {'CPU/nb':>8}")
    for phase in sorted(WALL, key=lambda p: (not p.startswith("judge"), not p.startswith("child"), p)):
        c = CPU.get(phase)
        print(f"{phase:<42} {WALL[phase]:>8.2f} {'-' if c is None else f'{c:.2f}':>8} "
              f"{WALL[phase] / count:>8.3f} {'-' if c is None else f'{c / count:.3f}':>8}")
    rest = cpu - sum(v for k, v in CPU.items() if not k.startswith(" "))
    print(f"{'rest (imports, fork server, confine, ...)':<42} {'':>8} {rest:>8.2f} {'':>8} {rest / count:>8.3f}")
    print(f"{'trusted process (all its threads)':<42} {'':>8} {own:>8.2f} {'':>8} {own / count:>8.3f}")
    print(f"{'fork server, children, nbgrader helper':<42} {'':>8} {cpu - own - said:>8.2f} {'':>8} "
          f"{(cpu - own - said) / count:>8.3f}")
    print(f"{'processes running the cells (their word)':<42} {'':>8} {said:>8.2f} {'':>8} {said / count:>8.3f}")
    print(f"{'whole batch (process tree, CPU user+sys)':<42} {wall:>8.2f} {cpu:>8.2f} {wall / count:>8.3f} "
          f"{cpu / count:>8.3f}")
    print("imports of a grading process (python -X importtime, cumulative s): "
          + ", ".join(f"{name} {s:.2f}" for name, s in import_costs()))
    return cpu / count

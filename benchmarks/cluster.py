"""Grading a class on a Dask cluster against the local pool: notebooks per second, and what
10,000 learners x 9 chapters would take.

    .venv/bin/python benchmarks/cluster.py [--students 8] [--chapter 02] [--workers 1 2] [--at 64]

The same class is graded three ways into fresh course directories: the local pool (--jobs 2),
then a LocalCluster of 1 and of 2 worker processes (one thread each) through
`grader autograde --scheduler`. Each run is the whole `grader autograde` (release, judge, record,
feedback, export), timed end to end; the time the driver spends recording (nbgrader's autograde,
one notebook after another in the trusted process) and the time workers spend judging are shown
apart, because they scale differently: judging with the number of workers, recording not at all.
The projection for 10,000 x 9 notebooks uses them: max(judging / workers, recording), per
driver; shard the class over several drivers (course directories sharing one PostgreSQL
gradebook, see guides/beyond-one-machine.md) to divide the recording too.
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grader.classroom.grading.batch as grading
from grader.authoring import samples
from grader.chapters import find_chapter

NOTEBOOKS = 10_000 * 9


def write_class(folder: Path, chapter, students: int) -> None:
    for n in range(students):
        nb = samples.reference(chapter) if n % 2 == 0 else samples.partly_wrong(chapter)
        (folder / f"learner{n:04d}").mkdir(parents=True)
        nbformat.write(nb, folder / f"learner{n:04d}" / chapter.notebook_name)


def timed_run(inbox: Path, course: Path, chapter, scheduler: str | None, jobs: int) -> dict:
    """One `autograde_class`, with the driver's recording and the units' judging timed apart."""
    recording, judging = [0.0], [0.0]
    record = grading.record

    def timed_record(course_dir, api, submission):
        started = time.perf_counter()
        try:
            return record(course_dir, api, submission)
        finally:
            recording[0] += time.perf_counter() - started
            judging[0] += submission.verdict.seconds if submission.verdict else 0.0

    grading.record = timed_record
    try:
        started = time.perf_counter()
        grading.autograde_class(inbox, course, jobs=jobs, timeout=120, chapters=[chapter], progress=False,
                                scheduler=scheduler)
        wall = time.perf_counter() - started
    finally:
        grading.record = record
    return {"wall": wall, "record": recording[0], "judge": judging[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=8)
    parser.add_argument("--chapter", default="02")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--at", type=int, default=64, help="workers (one core each) assumed for the projection")
    args = parser.parse_args()
    from distributed import LocalCluster

    from grader.boundary import forkserver

    chapter = find_chapter(args.chapter)
    forkserver.start()
    with tempfile.TemporaryDirectory(prefix="grader-bench-cluster-") as tmp:
        root = Path(tmp)
        write_class(root / "inbox", chapter, args.students)
        # A first run warms the release cache and the page cache: not timed.
        grading.autograde_class(root / "inbox", root / "warm", jobs=2, chapters=[chapter], progress=False)
        runs = {"local pool (--jobs 2)": timed_run(root / "inbox", root / "local", chapter, None, 2)}
        for workers in args.workers:
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
                runs[f"Dask, {workers} worker(s)"] = timed_run(root / "inbox", root / f"dask{workers}", chapter,
                                                               cl.scheduler_address, 1)
    n = args.students
    print(f"{n} notebooks of chapter {chapter.assignment}, half reference, half with catalogued mistakes")
    print(f"{'':<24} {'wall s':>8} {'notebooks/s':>12} {'judge s/nb':>11} {'record s/nb':>12}")
    for name, r in runs.items():
        print(f"{name:<24} {r['wall']:>8.1f} {n / r['wall']:>12.3f} {r['judge'] / n:>11.2f} {r['record'] / n:>12.2f}")
    best = min((r for name, r in runs.items() if name.startswith("Dask")), key=lambda r: r["wall"])
    judge, record = best["judge"] / n, best["record"] / n
    judging, recording = NOTEBOOKS * judge / args.at / 3600, NOTEBOOKS * record / 3600
    drivers = max(1, math.ceil(recording / judging)) if judging else 1
    print(f"projection, 10,000 x 9 = {NOTEBOOKS:,} notebooks on {args.at} Dask workers (one core each): judging "
          f"{judging:.1f} h; recording {recording:.1f} h for one driver, so {max(judging, recording):.1f} h with one "
          f"driver, {max(judging, recording / drivers):.1f} h with {drivers} drivers (shards sharing one PostgreSQL "
          "gradebook)")
    print("(chapter 02 is among the quickest to judge; later chapters train small models and take longer per notebook)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

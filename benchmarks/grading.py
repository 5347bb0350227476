"""How fast the grader is, printed (not asserted): `grader grade` cold against a bare `import torch`,
and `grader autograde` of a class against stock `nbgrader autograde` of the same folder, with the
projection to a class of 100 students x 9 chapters.

    .venv/bin/python benchmarks/grading.py                              # 4 students x chapters 01 02
    .venv/bin/python benchmarks/grading.py --students 30 --chapters 01 02 03 04 05 06 --jobs 2   # the issue's class
    .venv/bin/python benchmarks/grading.py --no-stock                   # skip the (slow) stock nbgrader run
    .venv/bin/python benchmarks/grading.py --profile --no-stock       # where a batch's time goes, by phase
    .venv/bin/python benchmarks/grading.py --stall                      # one learner stops their own clock

--stall (issue 44, item 6): an honest classmate graded alone, then in a batch (--jobs 2, --timeout 5) beside a
learner whose softmax switches off the grader's alarm inside a hidden check (tests/adversarial/cases.STALLS):
each notebook's time from the batch's start to its verdict, and the stalled exercise's score and message.

The class mixes the reference, the untouched release and catalogued wrong answers (grader.authoring.samples).
Stock nbgrader runs each notebook in a fresh Jupyter kernel, the hidden checks inside it; ours runs
each in a child forked from a warm, sandboxed pool and records the verdict through nbgrader.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from grader.authoring import samples
from grader.boundary import seeds
from grader.chapters import find_chapter
from grader.coursedir import CourseDir

MAKERS = [("reference", samples.reference), ("untouched", samples.released), ("wrong", samples.partly_wrong)]


def seconds(command: list[str], **kwargs) -> float:
    """Wall seconds of `command`; its process tree's CPU seconds (user+sys) in `LAST_CPU`."""
    start, before = time.perf_counter(), children_cpu()
    subprocess.run(command, check=True, capture_output=True, **kwargs)
    LAST_CPU[0] = children_cpu() - before
    return time.perf_counter() - start


LAST_CPU = [0.0]


def checks_cpu(chapter, repeat: int) -> float:
    """CPU seconds of one chapter's checks on its reference answers, recorder on (benchmarks/recorder.py): the
    median of `repeat` runs (one run of 06 read 0.66 and 1.07 CPU-s in two runs of this benchmark)."""
    from recorder import judge_chapter

    from grader.boundary import forbid

    return statistics.median(judge_chapter(chapter, forbid.in_sandbox) for _ in range(repeat))


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def write_class(inbox: Path, chapters, students: int) -> int:
    count = 0
    for i in range(students):
        kind, make = MAKERS[i % len(MAKERS)]
        for chapter in chapters:
            path = inbox / f"s{i:03d}-{kind}" / chapter.notebook_name
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(make(chapter), path)
            count += 1
    return count


def gradebook_scores(course: Path) -> dict:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {(s.student.id, a.name): round(s.score, 3) for a in gb.assignments for s in a.submissions}


def stock_autograde(inbox: Path, course: Path, chapters, timeout: int) -> float:
    """nbgrader's own autograde (kernels, hidden checks in-kernel) on the same submissions."""
    root = CourseDir(course, chapters, timeout=timeout)
    with (course / "nbgrader_config.py").open("a") as config:  # the benchmark's own notebooks: stock kernels allowed
        config.write("from nbgrader.converters import Autograde\n"
                     "c.Autograde.autograde_preprocessors = Autograde.autograde_preprocessors.default()\n")
    for chapter in chapters:
        root.release(chapter)
        for student in sorted(inbox.iterdir()):
            target = course / "submitted" / student.name / chapter.assignment
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(student / chapter.notebook_name, target / chapter.notebook_name)
    start, cpu = time.perf_counter(), children_cpu()
    for chapter in chapters:
        root.nbgrader("autograde", chapter.assignment, "--force")
    LAST_CPU[0] = children_cpu() - cpu  # nbgrader's and its kernels' (each reaped)
    return time.perf_counter() - start


def stall(jobs: int, timeout: int) -> None:

    from grader.boundary.pool import Pool
    from grader.classroom.grading.batch import grade_paths

    sys.path.append(str(Path(__file__).resolve().parents[1]))  # after the installed grader: tests' attacks
    from tests.adversarial.cases import notebook, stalling

    started, finished, judge = [0.0], {}, Pool.judge

    def timed(self, job):
        verdict = judge(self, job)
        finished[job.key.split("/")[0]] = time.perf_counter() - started[0]
        return verdict

    Pool.judge = timed
    with tempfile.TemporaryDirectory(prefix="stall-bench-") as tmp:
        honest, hostile = Path(tmp) / "honest.ipynb", Path(tmp) / "hostile.ipynb"
        nbformat.write(notebook(), honest)
        nbformat.write(stalling("signal.setitimer(signal.ITIMER_REAL, 0)\n    time.sleep(3600)"), hostile)
        grade_paths([str(honest)], timeout=timeout, jobs=jobs)  # fills the release cache
        for paths, what in (([honest], "alone"), ([hostile, honest], "beside the stalling learner")):
            started[0] = time.perf_counter()
            results = grade_paths([str(p) for p in paths], timeout=timeout, jobs=jobs)
            times = [finished.get(f"submission{i + 1:03d}", float("nan")) for i in range(len(paths))]
            print(f"honest classmate {what}: {times[-1]:6.1f} s to its verdict, score {results[-1]['score']:g}")
            if len(paths) == 2:
                softmax = results[0]["tests"]["test_softmax"]
                print(f"stalling learner: {times[0]:6.1f} s (--timeout {timeout}), softmax {softmax['score']:g} / "
                      f"{softmax['max_score']:g}, total {results[0]['score']:g}: {softmax.get('error')}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a shared machine: compare runs "
          "side by side)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=4)
    parser.add_argument("--chapters", nargs="+", default=["01", "02"])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-stock", action="store_true")
    parser.add_argument("--profile", action="store_true",
                        help="also grade the class in this process, timed by phase (benchmarks/phases.py)")
    parser.add_argument("--stall", action="store_true", help="only the stalling learner's batch (issue 44)")
    parser.add_argument("--timeout", type=int, default=5, help="the cell time limit of --stall")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the cold `grader grade` and of `import torch`")
    parser.add_argument("--secret", type=int, default=1,
                        help="the hidden inputs' secret of both routes (grader.boundary.seeds)")
    args = parser.parse_args()
    if args.stall:
        return stall(args.jobs, args.timeout)
    # One secret for both routes, so that "same scores" compares like with like: `grader autograde`
    # otherwise draws one per submission, and a wrong answer's partial score depends on the inputs.
    os.environ[seeds.ENV] = str(args.secret)
    chapters = [find_chapter(c) for c in args.chapters]
    grader = [sys.executable, "-m", "grader"]
    print(f"{os.cpu_count()} CPU cores, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}")

    with tempfile.TemporaryDirectory(prefix="grading-bench-") as tmp:
        tmp = Path(tmp)
        one = tmp / "one" / chapters[0].notebook_name
        one.parent.mkdir()
        nbformat.write(samples.reference(chapters[0]), one)
        from cold_grade import TORCH, compare  # alternating runs, medians (benchmarks/cold_grade.py)

        got = compare({"torch": TORCH, "grade": grader + ["grade", str(one)]}, args.repeat)
        (torch_s, torch_cpu), (grade_s, grade_cpu) = got["torch"], got["grade"]
        print(f"bare `import torch`:                     {torch_s:6.1f} s  {torch_cpu:5.1f} CPU-s  "
              f"(median of {args.repeat}, alternating)")
        print(f"`grader grade` one notebook, cold:       {grade_s:6.1f} s  {grade_cpu:5.1f} CPU-s  = "
              f"{grade_s / torch_s:.1f}x import torch (CPU {grade_cpu / torch_cpu:.1f}x)  (median of {args.repeat}; "
              "goal <= 2.5x)")

        # the release cache is keyed by the set of chapters: filled for this class's before either route is
        # timed (the stock route's release is not timed either), else ours pays nbgrader's generate_assignment
        CourseDir(tmp / "warm", chapters).release_cached(chapters)
        inbox = tmp / "inbox"
        count = write_class(inbox, chapters, args.students)
        print(f"class: {args.students} students x {len(chapters)} chapters = {count} notebooks, --jobs {args.jobs}")
        ours_s = seconds(grader
                         + ["autograde", str(inbox), "--course-dir", str(tmp / "ours"), "--jobs", str(args.jobs)])
        per, ours_cpu = ours_s / count, LAST_CPU[0]
        print(f"`grader autograde`:                      {ours_s:6.1f} s  ({per:.2f} s per notebook, release, "
              f"feedback and export included); {ours_cpu:.1f} CPU-s = {ours_cpu / count:.2f} CPU-s per notebook")
        # The same for one student: what a run costs whatever its size (starting the pool, release,
        # feedback set-up), so that the projection does not spread it over only this class.
        small = tmp / "inbox-one"
        first = sorted(inbox.iterdir())[0]
        shutil.copytree(first, small / first.name)
        small_s = seconds(grader
                          + ["autograde", str(small), "--course-dir", str(tmp / "ours-one"), "--jobs", str(args.jobs)])
        marginal = max(ours_s - small_s, 0.0) / max(count - len(chapters), 1)
        print(f"`grader autograde` of one student:       {small_s:6.1f} s  -> each further notebook {marginal:.2f} s")
        batch_cpu = ours_cpu / count  # without the processes that ran the cells (never reaped: --profile has them)
        if args.profile:
            from phases import profile

            batch_cpu = profile(inbox, tmp / "profiled", args.jobs)
        ratio_a = None
        if not args.no_stock:
            stock_s = stock_autograde(inbox, tmp / "stock", chapters, timeout=120)
            same = gradebook_scores(tmp / "ours") == gradebook_scores(tmp / "stock")
            stock_cpu = LAST_CPU[0]
            print(f"stock `nbgrader autograde` (sequential): {stock_s:6.1f} s  ({stock_s / count:.2f} s per notebook)"
                  f"  {stock_cpu:.1f} CPU-s; same scores: {same}")
            ratio_a = (stock_s / ours_s, stock_cpu / (batch_cpu * count), same)  # whole tree with --profile
        checks = {c.assignment[:2]: checks_cpu(c, 3) for c in chapters}  # benchmarks/recorder.py's, recorder on
        own = sum(checks.values()) / len(checks)  # per notebook: every chapter has as many notebooks
        print("\nthe issue's table, side by side in this run (load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):")
        if ratio_a is None:
            print("(a) batch vs stock `nbgrader autograde`: not run (--no-stock)")
        else:
            print(f"(a) batch vs stock `nbgrader autograde`, same scores {ratio_a[2]}: {ratio_a[0]:.1f}x faster "
                  f"(wall), {ratio_a[1]:.1f}x less CPU (goal >= 10x)")
        print(f"(b) batch CPU per notebook {batch_cpu:.2f} CPU-s "
              f"({'whole tree, --profile' if args.profile else 'without the cells processes: add --profile'}) vs "
              f"the checks' own {own:.2f} CPU-s (median of 3 runs; "
              + ", ".join(f"{k}: {v:.2f}" for k, v in checks.items()) + f") = {batch_cpu / own:.1f}x (goal <= 2x)")
        print(f"projection, 100 students x 9 chapters: {(small_s + marginal * (900 - len(chapters))) / 60:.0f} min "
              f"(one student's run + 900 - {len(chapters)} further notebooks; {per * 900 / 60:.0f} min at this class's "
              "average rate) (goal <= 20 min on 2 cores)")


if __name__ == "__main__":
    main()

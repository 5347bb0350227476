"""`grader`: build, release, grade, autograde and demo (see the README's instructor path)."""
from __future__ import annotations

import argparse
import json
import sys

from grader.chapters import CHAPTERS, find_chapter


def _chapters(keys: list[str]):
    return [find_chapter(k) for k in keys] if keys else list(CHAPTERS)


def cmd_build(args) -> int:
    stale = build_mod().build(_chapters(args.chapters), check=args.check)
    for path in stale:
        print(("stale: " if args.check else "wrote: ") + path)
    if args.check and stale:
        print("Generated source notebooks are out of date: run `grader build`.", file=sys.stderr)
        return 1
    print(f"{len(stale)} file(s) {'stale' if args.check else 'written'}")
    return 0


def cmd_release(args) -> int:
    differ = build_mod().release(_chapters(args.chapters), write=args.write)
    for path in differ:
        print(("updated: " if args.write else "differs from the nbgrader release: ") + path)
    if differ and not args.write:
        print("course/ is not what nbgrader releases: run `grader build && grader release --write`.",
              file=sys.stderr)
        return 1
    print("release matches course/" if not differ else f"{len(differ)} learner file(s) updated")
    return 0


def cmd_grade(args) -> int:
    start_fork_server()  # it imports torch while this process imports nbgrader
    from grader.grading import format_table, grade_paths

    try:
        results = grade_paths(args.paths, timeout=args.timeout, jobs=args.jobs, limits=_limits(args),
                              rerun_all=args.rerun_all)
    finally:
        stop_fork_server()
    print(json.dumps(results, indent=2) if args.json else format_table(results))
    return 0


def cmd_autograde(args) -> int:
    start_fork_server()
    from grader.grading import autograde_class

    try:
        summary = autograde_class(args.submissions, args.course_dir, db_url=args.db, jobs=args.jobs,
                                  timeout=args.timeout, limits=_limits(args), progress=not args.quiet,
                                  rerun_all=args.rerun_all, scheduler=args.scheduler)
    finally:
        stop_fork_server()
    print(summary)
    return 0


def _limits(args):
    from grader.sandbox import Limits

    return Limits(memory_mb=args.memory_mb, cpu_seconds=args.cpu_seconds)


def _sandbox_options(p) -> None:
    p.add_argument("--timeout", type=int, default=120, help="seconds per cell")
    p.add_argument("--memory-mb", type=int, default=4096, help="memory one submission may use")
    p.add_argument("--cpu-seconds", type=int, default=900, help="CPU time one submission may use")
    p.add_argument("--rerun-all", action="store_true",
                   help="also re-run the course's demo and experiment cells no score depends on (same scores, slower)")


def cmd_demo(args) -> int:
    from grader.demo import run_demo

    return run_demo(args.course_dir, chapters=_chapters(args.chapters))


def start_fork_server() -> None:
    from grader.sandbox import start_fork_server as start

    start()


def stop_fork_server() -> None:
    from grader.sandbox import stop_fork_server as stop

    stop()


def build_mod():
    from grader import build

    return build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grader", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("build", help="generate the nbgrader source notebooks")
    p.add_argument("chapters", nargs="*")
    p.add_argument("--check", action="store_true", help="only report stale files (exit 1 if any)")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("release", help="nbgrader generate_assignment; compare with course/")
    p.add_argument("chapters", nargs="*")
    p.add_argument("--write", action="store_true", help="copy the release into course/")
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("grade", help="grade submitted notebooks offline")
    p.add_argument("paths", nargs="+")
    p.add_argument("--json", action="store_true")
    p.add_argument("--jobs", type=int, default=1, help="notebooks graded at once")
    _sandbox_options(p)
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("autograde", help="grade a class (one folder per student) into a gradebook")
    p.add_argument("submissions")
    p.add_argument("--course-dir", default="nbgrader-course")
    p.add_argument("--db", default=None, help="SQLAlchemy URL (default: SQLite in the course dir)")
    p.add_argument("--jobs", type=int, default=2, help="notebooks graded at once (up to one per core)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="grade on this dask.distributed cluster (its workers import this grader; README: Beyond one machine)")
    _sandbox_options(p)
    p.set_defaults(func=cmd_autograde)

    p = sub.add_parser("demo", help="the instructor path end to end on sample students")
    p.add_argument("chapters", nargs="*")
    p.add_argument("--course-dir", default=None, help="keep the course directory here")
    p.set_defaults(func=cmd_demo)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:
        print(f"grader: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

"""`grader demo`: the instructor path end to end on sample students."""
from __future__ import annotations

from grader.cli.common import chapters_named, ready_sources

HELP = "the instructor path end to end on sample students"


def add_arguments(p) -> None:
    p.add_argument("chapters", nargs="*")
    p.add_argument("--course-dir", default=None, help="keep the course directory here")


def run(args) -> int:
    from grader.authoring.demo import run_demo  # lazy: start-up

    ready_sources(chapters_named(args.chapters))
    return run_demo(args.course_dir, chapters=chapters_named(args.chapters))

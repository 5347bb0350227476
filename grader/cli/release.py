"""`grader release`: nbgrader generate_assignment, compared with (or written into) course/."""
from __future__ import annotations

from grader.cli.common import release_course

HELP = "nbgrader generate_assignment; compare with course/"


def add_arguments(p) -> None:
    p.add_argument("chapters", nargs="*")
    p.add_argument("--write", action="store_true", help="copy the release into course/")
    p.add_argument("--course-dir", default=None, help="release into this nbgrader course directory (a class's)")
    p.add_argument("--lang", choices=["en", "zh", "all"], default=None,
                   help="the edition: en or zh (default: both into course/ and course/zh/; en with --course-dir)")


def run(args) -> int:
    return release_course(args.chapters, args.write, args.course_dir, args.lang)

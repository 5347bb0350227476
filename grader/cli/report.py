"""`grader report`: an HTML report of one chapter across the class."""
from __future__ import annotations

from grader.chapters import find_chapter
from grader.cli.common import DB_HELP

HELP = "an HTML report of one chapter across the class"


def add_arguments(p) -> None:
    p.add_argument("chapter")
    p.add_argument("--course-dir", default="nbgrader-course")
    p.add_argument("--db", default=None, help=DB_HELP)
    p.add_argument("--output", "-o", default=None, help="default: COURSE_DIR/reports/<chapter>.html")


def run(args) -> int:
    from grader.classroom.grades.report import write_report  # lazy: start-up

    print(f"wrote {write_report(args.course_dir, find_chapter(args.chapter), args.output, db_url=args.db)}")
    return 0

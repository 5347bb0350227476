"""`grader export`: grades for Canvas or Moodle, learners matched through a roster CSV."""
from __future__ import annotations

from pathlib import Path

from grader.chapters import find_chapter
from grader.cli.common import DB_HELP

HELP = "grades for Canvas or Moodle, learners matched through a roster CSV"


def add_arguments(p) -> None:
    p.add_argument("chapters", nargs="*")
    p.add_argument("--lms", choices=["canvas", "moodle"], required=True)
    p.add_argument("--roster", required=True, help="the LMS's roster or gradebook export (CSV)")
    p.add_argument("--match", default=None, help="roster column holding the nbgrader student id "
                   "(default: 'SIS Login ID' for Canvas, 'Username' for Moodle)")
    p.add_argument("--exercises", action="store_true", help="also one column per exercise")
    p.add_argument("--pending", choices=["blank", "partial"], default="blank",
                   help="a chapter with written answers not yet graded by hand: leave its grade empty (default) "
                   "or write the points so far; either way the learners are listed")
    p.add_argument("--column", action="append", default=[], metavar="CHAPTER=COLUMN",
                   help="the LMS's existing column for a chapter, e.g. '02=Self-attention (1234)' (repeatable); "
                   "default: a column named after the chapter, which Canvas imports as a new assignment")
    p.add_argument("--course-dir", default="nbgrader-course")
    p.add_argument("--db", default=None, help=DB_HELP)
    p.add_argument("--output", "-o", default=None, help="default: COURSE_DIR/<lms>-grades.csv")


def run(args) -> int:
    from grader.classroom.grades import export  # lazy: start-up
    from grader.classroom.grades.total import late_policy  # lazy: start-up
    from grader.coursedir import database_of  # lazy: start-up (nbgrader)

    db_url = args.db or database_of(args.course_dir)
    result = export.build(db_url, [find_chapter(c) for c in args.chapters], Path(args.roster), args.lms, args.match,
                          args.exercises, export.column_names(args.column), late_policy(args.course_dir),
                          args.pending)
    out = Path(args.output or Path(args.course_dir) / f"{args.lms}-grades.csv")
    export.write(result, out)
    print(export.summary(result, out))
    return 0

"""`grader collect`: nbgrader collect, safely (the exchange's newest submissions into submitted/)."""
from __future__ import annotations

from grader.cli.common import CHECK_OWNER_HELP, exchange_option

HELP = ("nbgrader collect, safely: the exchange's newest submissions into "
        "COURSE_DIR/submitted/ (no links followed, regular files only, the grader's own times)")


def add_arguments(p) -> None:
    p.add_argument("--course-dir", default="nbgrader-course")
    exchange_option(p)
    p.add_argument("--no-check-owner", dest="check_owner", action="store_false", help=CHECK_OWNER_HELP)


def run(args) -> int:
    from grader.classroom.intake.collect import collect  # lazy: start-up

    for note in collect(args.exchange, args.course_dir, check_owner=args.check_owner):
        print(note)
    return 0

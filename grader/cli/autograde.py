"""`grader autograde`: a class (one folder per learner, or an LMS download) graded into a gradebook."""
from __future__ import annotations

from pathlib import Path

from grader.boundary import forkserver, heap
from grader.cli.common import class_options, limits, ready_sources, sandbox_options

HELP = "grade a class (one folder per student, or an LMS download) into a gradebook"


def add_arguments(p) -> None:
    p.add_argument("submissions",
                   help="one folder per student, nbgrader's submitted/, or an LMS download (zip or folder)")
    p.add_argument("--pattern", default=None,
                   help="LMS file names: a regex with the named groups student and optional file, timestamp")
    class_options(p)
    p.add_argument("--submitted-at", default=None,
                   help="submission time (ISO 8601, UTC unless a zone is given) for notebooks with no timestamp.txt")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="grade on this dask.distributed cluster (its workers import this grader; "
                        "guides/beyond-one-machine.md)")
    sandbox_options(p)


def run(args) -> int:
    heap.defer()  # until the imports are done (grader.boundary.heap)
    from grader.classroom.policy.term import load_term  # lazy: start-up

    term = load_term(args.course_dir, args.term, args.submitted_at)  # a bad term file stops before grading
    ready_sources()
    folder = Path(args.submissions)  # a zip (an LMS download) is not opened here: warmed as for any chapter
    forkserver.start(meta=not folder.is_dir() or forkserver.needs_meta(folder.rglob("*.ipynb"), unknown=False))
    from grader.classroom.grading.batch import autograde_class  # lazy: start-up

    try:
        summary = autograde_class(args.submissions, args.course_dir, db_url=args.db, jobs=args.jobs,
                                  timeout=args.timeout, limits=limits(args), progress=not args.quiet,
                                  rerun_all=args.rerun_all, term=term, pattern=args.pattern,
                                  scheduler=args.scheduler)
    finally:
        forkserver.stop()
    print(summary)
    return 0

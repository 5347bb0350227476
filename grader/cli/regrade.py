"""`grader regrade`: a chapter graded again for the class (old -> new per learner), or the last regrade undone."""
from __future__ import annotations

from grader.boundary import forkserver, heap
from grader.chapters import find_chapter
from grader.cli.common import class_options, limits, ready_sources, sandbox_options

HELP = "grade a chapter again for the class; show old -> new per learner"


def add_arguments(p) -> None:
    p.add_argument("chapter")
    class_options(p)
    p.add_argument("--never-lower", action="store_true",
                   help="keep a learner's old scores where the new total is lower")
    p.add_argument("--undo", action="store_true", help="put back the scores from before the last regrade")
    p.add_argument("--reason", default="", help="why (kept in the history)")
    p.add_argument("--student", action="append", default=[],
                   help="only this learner (repeatable): e.g. after accepting their regrade request")
    sandbox_options(p)


def run(args) -> int:
    from grader.classroom.grading.regrade import format_changes, regrade, undo  # lazy: start-up

    chapter = find_chapter(args.chapter)
    ready_sources([chapter])
    if args.undo:
        print(format_changes(undo(args.course_dir, chapter, db_url=args.db), chapter))
        return 0
    from grader.classroom.policy.term import load_term  # lazy: start-up

    term = load_term(args.course_dir, args.term)
    heap.defer()  # until the imports are done (grader.boundary.heap)
    forkserver.start()
    try:
        rows = regrade(args.course_dir, chapter, term=term, never_lower=args.never_lower, jobs=args.jobs,
                       timeout=args.timeout, progress=not args.quiet, reason=args.reason, db_url=args.db,
                       limits=limits(args), rerun_all=args.rerun_all, students=args.student or None)
    finally:
        forkserver.stop()
    print(format_changes(rows, chapter))
    return 0

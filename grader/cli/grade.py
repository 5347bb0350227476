"""`grader grade`: submitted notebooks graded offline, a table or JSON."""
from __future__ import annotations

import json

from grader.boundary import forkserver, heap
from grader.cli.common import limits, ready_sources, sandbox_options

HELP = "grade submitted notebooks offline"


def add_arguments(p) -> None:
    p.add_argument("paths", nargs="+")
    p.add_argument("--json", action="store_true")
    p.add_argument("--jobs", type=int, default=1, help="notebooks graded at once")
    sandbox_options(p)


def run(args) -> int:
    heap.defer()  # until the imports are done (grader.boundary.heap)
    # it imports torch while this process checks the sources and imports nbgrader
    forkserver.start(meta=forkserver.needs_meta(args.paths))
    ready_sources()
    from grader.classroom.grading.batch import format_table, grade_paths  # lazy: start-up

    try:
        results = grade_paths(args.paths, timeout=args.timeout, jobs=args.jobs, limits=limits(args),
                              rerun_all=args.rerun_all)
    finally:
        forkserver.stop()
    print(json.dumps(results, indent=2) if args.json else format_table(results))
    return 0

"""`grader similarity`: pairs of learners ranked by how alike their answers are (instructor only)."""
from __future__ import annotations

import json
import sys

from grader.chapters import find_chapter

HELP = "pairs of learners ranked by how alike their answers are (instructor only)"


def add_arguments(p) -> None:
    p.add_argument("chapter")
    p.add_argument("--course-dir", default="nbgrader-course")
    p.add_argument("--json", action="store_true", help="every pair and group, and the notes: {pairs: [{a, b, score, "
                   "exercises: {grade_id: score}}], groups: [{members, share, exercises}], notes}")
    p.add_argument("--html", default=None, metavar="OUT", help="write the most alike pairs side by side to OUT")
    p.add_argument("--top", type=int, default=20, help="pairs in the table and the HTML page (default 20)")


def run(args) -> int:
    from grader.classroom.similarity.pairs import as_json, format_table, similarity  # lazy: start-up (numpy)

    result = similarity(args.course_dir, find_chapter(args.chapter))
    if args.html:
        from grader.classroom.similarity.html import write_html  # lazy: start-up

        print(f"wrote {write_html(result, args.html, args.top)}", file=sys.stderr if args.json else sys.stdout)
    print(json.dumps(as_json(result), indent=1) if args.json else format_table(result, args.top))
    return 0

"""`grader requests`: the grading service's regrade requests, oldest first, each with its context."""
from __future__ import annotations

import json
from pathlib import Path

HELP = "the regrade requests of the grading service, oldest first"


def add_arguments(p) -> None:
    p.add_argument("--course-dir", default="nbgrader-course")
    p.add_argument("--json", action="store_true", help="as JSON, with what each answer changed")


def run(args) -> int:
    from dataclasses import asdict  # lazy: start-up

    from grader.classroom.grades.requests import Requests, contexts  # lazy: start-up
    from grader.classroom.grades.total import course_totals, late_policy
    from grader.classroom.ledger import DATABASE, STATE_DIR, Ledger

    found = Requests(args.course_dir).all()
    try:
        late = late_policy(args.course_dir)
    except ValueError:  # a term.toml with an error: the scores shown without its late penalty
        late = None
    entries = Ledger(args.course_dir).of() if (Path(args.course_dir) / STATE_DIR / DATABASE).is_file() else []
    around = contexts(args.course_dir, found, entries, course_totals(args.course_dir, late))
    if args.json:
        print(json.dumps([{**r.as_json(), "changes": r.changes, "context": asdict(around[r.id])} for r in found],
                         indent=1, ensure_ascii=False))
        return 0

    def line(text: str) -> str:  # a learner's words: no terminal control characters, one line
        return "".join(c if c.isprintable() else " " for c in text)[:200]

    for r in found:
        print(f"{r.id} {r.status:<8} {line(r.student)} {r.assignment} {line(r.item)} ({r.asked_at}): {line(r.note)}")
        context = around[r.id]
        print(f"    now {context.score or '?'}: {line(context.said) or '-'}"
              + (f" · Formgrader: /{context.formgrader}" if context.formgrader else ""))
        if r.answered_by:
            points = "" if r.points is None else f" points {r.points:g}"
            print(f"    {r.answered_at} {line(r.answered_by)}{points}: {line(r.reason)}")
    print(f"{len(found)} request(s), {sum(r.status == 'open' for r in found)} open")
    return 0

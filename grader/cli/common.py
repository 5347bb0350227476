"""What the verbs share: the chapters named, the source folders built on demand, the sandbox's limits and
the class's options."""
from __future__ import annotations

import os
import sys

from grader import sources
from grader.boundary.confine import Limits  # no torch: a few ctypes and os calls
from grader.chapters import CHAPTERS, Chapter, find_chapter


def chapters_named(keys: list[str]):
    return [find_chapter(k) for k in keys] if keys else list(CHAPTERS)


def ready_sources(chapters: list[Chapter] = CHAPTERS) -> None:
    """Build the nbgrader source folders a command reads where they are missing or stale (one line says
    so); nothing is imported when they are fresh."""
    if sources.stale(sources.editions(chapters)):
        build_mod().ensure(chapters)


def release_course(keys: list[str], write: bool, course_dir: str | None, lang: str | None) -> int:
    """`grader release` (and `grader build --check`): exit 1 where course/ is not what nbgrader releases."""
    lang = lang or ("en" if course_dir else "all")
    langs = ("en", "zh") if lang == "all" else (lang,)
    ready_sources(chapters_named(keys))
    differ = build_mod().release(chapters_named(keys), write=write, course_dir=course_dir,
                                 langs=langs)
    for path in differ:
        print(("updated: " if write else "differs from the nbgrader release: ") + path)
    if differ and not write:
        print("course/ is not what nbgrader releases from chapters/ now: run `grader release --write` and commit "
              "course/.",
              file=sys.stderr)
        return 1
    print("release matches course/" if not differ else f"{len(differ)} learner file(s) updated")
    return 0


def build_mod():
    from grader.authoring import build  # lazy: start-up (nbgrader)

    return build


def limits(args):
    return Limits(memory_mb=args.memory_mb, cpu_seconds=args.cpu_seconds, submission_seconds=args.submission_timeout)


def sandbox_options(p) -> None:
    p.add_argument("--timeout", type=int, default=120, help="seconds per cell")
    p.add_argument("--memory-mb", type=int, default=Limits.memory_mb, help="memory one submission may use")
    p.add_argument("--cpu-seconds", type=int, default=Limits.cpu_seconds, help="CPU time one submission may use")
    p.add_argument("--submission-timeout", type=int, default=Limits.submission_seconds,
                   help="seconds of wall clock one whole submission may take (its cells judged by then keep their "
                        "scores)")
    p.add_argument("--rerun-all", action="store_true",
                   help="also re-run the course's demo and experiment cells no score depends on (same scores, slower)")


def class_options(p) -> None:
    """What autograde and regrade share: where the class lives, how many at once, its term."""
    p.add_argument("--course-dir", default="nbgrader-course")
    p.add_argument("--db", default=None, help=DB_HELP)
    p.add_argument("--jobs", type=int, default=2, help="notebooks graded at once (up to one per core)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--term", default=None, help="due dates, late policy, extensions (default: COURSE_DIR/term.toml)")


def exchange_option(p) -> None:
    p.add_argument("--exchange", default=os.environ.get("COURSE_EXCHANGE_ROOT", "/srv/nbgrader/exchange"),
                   help="nbgrader's exchange root (default: $COURSE_EXCHANGE_ROOT)")


CHECK_OWNER_HELP = ("accept a submission whose folder is not owned by the learner it names: only for a try-out "
                    "hub, where every server is one unix user (default: refused, each learner a unix user)")
DB_HELP = "SQLAlchemy URL (default: the gradebook the course dir was last graded into, else SQLite in it)"

"""`grader build`: the nbgrader source folders grader/source*/, or one edition's in a course directory."""
from __future__ import annotations

from pathlib import Path

from grader import sources
from grader.chapters import Chapter
from grader.cli.common import build_mod, chapters_named, ready_sources, release_course

HELP = "generate the nbgrader source folders grader/source*/ (not committed)"


def add_arguments(p) -> None:
    p.add_argument("chapters", nargs="*")
    p.add_argument("--check", action="store_true",
                   help="build, then check that the committed learner folders course/ are what nbgrader releases "
                   "(exit 1 if not; what CI runs)")
    p.add_argument("--force", action="store_true", help="rebuild every folder, not only the stale ones")
    p.add_argument("--quiet", "-q", action="store_true", help="print the count only")
    p.add_argument("--course-dir", default=None,
                   help="write the source folders into this nbgrader course directory's source/ (and its "
                   "nbgrader_config.py) instead")
    p.add_argument("--lang", choices=["en", "zh"], default=None, help="the edition, with --course-dir (default: en)")


def run(args) -> int:
    chapters = chapters_named(args.chapters)
    if args.lang and not args.course_dir:
        raise ValueError("--lang chooses a course directory's edition: give --course-dir too (grader/ holds both)")
    if args.course_dir:
        return _build_into(args.course_dir, chapters, args.lang or "en")
    if args.check:  # what CI proves: the committed learner folders are what chapters/ builds and releases now
        ready_sources(chapters)
        return release_course(args.chapters, write=False, course_dir=None, lang="all")
    todo = args.force or sources.stale(sources.editions(chapters))  # no nbgrader import when all are fresh
    written = build_mod().build(chapters, force=args.force) if todo else []
    for path in written:
        if "(not built:" in path:  # a translation still lacking units
            print("not built: " + path.replace(" (not built:", " ("))
        elif not args.quiet:
            print("wrote: " + path)
    print(f"{len(written)} file(s) written" + ("" if todo else ": the source folders are up to date"))
    return 0


def _build_into(course_dir: str, chapters: list[Chapter], lang: str) -> int:
    """The source folders, as nbgrader's source/<assignment>/, in a course directory (one edition)."""
    from grader.coursedir import CourseDir  # lazy: start-up (nbgrader)

    ready_sources(chapters)
    course = CourseDir(Path(course_dir), [c.edition(lang) for c in chapters])
    for chapter in chapters:
        print(f"wrote: {course.root / 'source' / chapter.assignment}")
    print(f"{len(chapters)} source folder(s) in {course.root / 'source'} ({lang}): "
          "`nbgrader generate_assignment NN_<name>` there releases one")
    return 0

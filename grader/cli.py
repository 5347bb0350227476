"""`grader`: build, release, grade, autograde and demo (see guides/teaching.md).

Each command imports its room of the grader when it runs (the imports marked `# lazy:`): `grader
--help` and `grader build` never load torch or nbgrader's applications, and `grader grade` starts the
fork server, which imports torch, before this process imports nbgrader.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from grader import sources
from grader.boundary import forkserver
from grader.boundary.confine import Limits  # no torch: a few ctypes and os calls
from grader.chapters import CHAPTERS, Chapter, find_chapter
from grader.classroom import servicelock  # os, fcntl and ctypes only


def _chapters(keys: list[str]):
    return [find_chapter(k) for k in keys] if keys else list(CHAPTERS)


def cmd_build(args) -> int:
    chapters = _chapters(args.chapters)
    if args.lang and not args.course_dir:
        raise ValueError("--lang chooses a course directory's edition: give --course-dir too (grader/ holds both)")
    if args.course_dir:
        return _build_into(args.course_dir, chapters, args.lang or "en")
    if args.check:  # what CI proves: the committed learner folders are what chapters/ builds and releases now
        ready_sources(chapters)
        return cmd_release(argparse.Namespace(chapters=args.chapters, write=False, course_dir=None, lang="all"))
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


def ready_sources(chapters: list[Chapter] = CHAPTERS) -> None:
    """Build the nbgrader source folders a command reads where they are missing or stale (one line says
    so); nothing is imported when they are fresh."""
    if sources.stale(sources.editions(chapters)):
        build_mod().ensure(chapters)


def cmd_release(args) -> int:
    lang = args.lang or ("en" if args.course_dir else "all")
    langs = ("en", "zh") if lang == "all" else (lang,)
    ready_sources(_chapters(args.chapters))
    differ = build_mod().release(_chapters(args.chapters), write=args.write, course_dir=args.course_dir, langs=langs)
    for path in differ:
        print(("updated: " if args.write else "differs from the nbgrader release: ") + path)
    if differ and not args.write:
        print("course/ is not what nbgrader releases from chapters/ now: run `grader release --write` and commit "
              "course/.",
              file=sys.stderr)
        return 1
    print("release matches course/" if not differ else f"{len(differ)} learner file(s) updated")
    return 0


def cmd_translate(args) -> int:
    from grader.authoring import i18n  # lazy: start-up

    bad = []
    # Each chapter's catalogue, the messages the chapters share (i18n/LANG/common.po), then the graded
    # feedback's: each chapter's hidden checks and the shared texts (i18n/LANG/feedback/).
    chapters = _chapters(args.chapters)
    for chapter in [*chapters, i18n.COMMON, *i18n.feedback_catalogues(chapters)]:
        nb = build_mod().build_source_notebook(chapter) if isinstance(chapter, Chapter) else None
        if args.check:
            bad += i18n.problems(chapter, args.lang, nb)
            continue
        catalogue, counts = i18n.update(chapter, args.lang, nb)
        i18n.save(catalogue, i18n.catalogue_path(chapter, args.lang))
        print(f"{i18n.catalogue_path(chapter, args.lang)}: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    for line in bad:
        print(line)
    if bad:
        print(f"{len(bad)} translation unit(s) to do: edit the catalogues "
              "(guides/maintaining.md: The Chinese edition).", file=sys.stderr)
        return 1
    return 0


def cmd_grade(args) -> int:
    ready_sources()
    forkserver.start()  # it imports torch while this process imports nbgrader
    from grader.classroom.grading import format_table, grade_paths  # lazy: start-up

    try:
        results = grade_paths(args.paths, timeout=args.timeout, jobs=args.jobs, limits=_limits(args),
                              rerun_all=args.rerun_all)
    finally:
        forkserver.stop()
    print(json.dumps(results, indent=2) if args.json else format_table(results))
    return 0


def cmd_autograde(args) -> int:
    from grader.classroom.term import load_term  # lazy: start-up

    term = load_term(args.course_dir, args.term, args.submitted_at)  # a bad term file stops before grading
    ready_sources()
    forkserver.start()
    from grader.classroom.grading import autograde_class  # lazy: start-up

    try:
        summary = autograde_class(args.submissions, args.course_dir, db_url=args.db, jobs=args.jobs,
                                  timeout=args.timeout, limits=_limits(args), progress=not args.quiet,
                                  rerun_all=args.rerun_all, term=term, pattern=args.pattern,
                                  scheduler=args.scheduler)
    finally:
        forkserver.stop()
    print(summary)
    return 0


def cmd_collect(args) -> int:
    from grader.classroom.intake import collect  # lazy: start-up

    for note in collect(args.exchange, args.course_dir, check_owner=args.check_owner):
        print(note)
    return 0


def cmd_requests(args) -> int:
    from dataclasses import asdict  # lazy: start-up

    from grader.classroom.ledger import DATABASE, STATE_DIR, Ledger  # lazy: start-up
    from grader.classroom.requests import Requests, contexts
    from grader.classroom.total import course_totals, late_policy

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


def cmd_serve(args) -> int:
    from grader.classroom.term import load_term  # lazy: start-up

    Path(args.course_dir).mkdir(parents=True, exist_ok=True)
    try:
        lock = servicelock.hold(args.course_dir)  # one service per class, for this process's life
    except servicelock.ServiceRunning as err:
        print(f"grader serve: {err}", file=sys.stderr)
        return 1
    hub_alive = servicelock.end_with_parent(args.hub_pid) if args.hub_pid else None  # before the slow start
    if hub_alive and not hub_alive():
        print(f"grader serve: the hub that started it (pid {args.hub_pid}) has ended", file=sys.stderr)
        return 1
    load_term(args.course_dir)  # a bad term.toml stops the service before it grades anything
    ready_sources()  # built once: after a `git pull`, run `grader build` and restart the service
    forkserver.start()
    from grader.classroom.grading import _pool  # lazy: start-up
    from grader.classroom.onsubmit import Service  # lazy: start-up
    from grader.classroom.onsubmit_web import serve  # lazy: start-up (jupyterhub, tornado)

    with _pool(args.scheduler, args.jobs, args.timeout, _limits(args)) as pool:
        pool.start()
        service = Service(args.course_dir, args.exchange, pool, timeout=args.timeout, check_owner=args.check_owner)
        serve(service, set(args.instructor), poll=args.poll, port=args.port, hub_alive=hub_alive,
              graders=set(args.grader))
        cut_short = service.abandon()
    forkserver.stop()  # and with it the sandboxes of the gradings cut short
    os.close(lock)
    if cut_short:
        print(f"grading service: stopped while grading {', '.join(cut_short)}; "
              "graded again when the service next starts", flush=True)
        sys.stderr.flush()
        os._exit(0)  # a normal exit would wait for their threads (concurrent.futures joins its workers at exit)
    return 0


def cmd_regrade(args) -> int:
    from grader.classroom.regrade import format_changes, regrade, undo  # lazy: start-up

    chapter = find_chapter(args.chapter)
    ready_sources([chapter])
    if args.undo:
        print(format_changes(undo(args.course_dir, chapter, db_url=args.db), chapter))
        return 0
    from grader.classroom.term import load_term  # lazy: start-up

    term = load_term(args.course_dir, args.term)
    forkserver.start()
    try:
        rows = regrade(args.course_dir, chapter, term=term, never_lower=args.never_lower, jobs=args.jobs,
                       timeout=args.timeout, progress=not args.quiet, reason=args.reason, db_url=args.db,
                       limits=_limits(args), rerun_all=args.rerun_all, students=args.student or None)
    finally:
        forkserver.stop()
    print(format_changes(rows, chapter))
    return 0


def cmd_report(args) -> int:
    from grader.classroom.report import write_report  # lazy: start-up

    print(f"wrote {write_report(args.course_dir, find_chapter(args.chapter), args.output, db_url=args.db)}")
    return 0


def cmd_export(args) -> int:
    from grader.classroom import export  # lazy: start-up
    from grader.classroom.total import late_policy  # lazy: start-up
    from grader.coursedir import database_of  # lazy: start-up (nbgrader)

    db_url = args.db or database_of(args.course_dir)
    result = export.build(db_url, [find_chapter(c) for c in args.chapters], Path(args.roster), args.lms, args.match,
                          args.exercises, export.column_names(args.column), late_policy(args.course_dir),
                          args.pending)
    out = Path(args.output or Path(args.course_dir) / f"{args.lms}-grades.csv")
    export.write(result, out)
    print(export.summary(result, out))
    return 0


def cmd_similarity(args) -> int:
    from grader.classroom.similarity import as_json, format_table, similarity  # lazy: start-up (numpy)

    result = similarity(args.course_dir, find_chapter(args.chapter))
    if args.html:
        from grader.classroom.similarity_html import write_html  # lazy: start-up

        print(f"wrote {write_html(result, args.html, args.top)}", file=sys.stderr if args.json else sys.stdout)
    print(json.dumps(as_json(result), indent=1) if args.json else format_table(result, args.top))
    return 0


def _limits(args):
    return Limits(memory_mb=args.memory_mb, cpu_seconds=args.cpu_seconds, submission_seconds=args.submission_timeout)


def _sandbox_options(p) -> None:
    p.add_argument("--timeout", type=int, default=120, help="seconds per cell")
    p.add_argument("--memory-mb", type=int, default=Limits.memory_mb, help="memory one submission may use")
    p.add_argument("--cpu-seconds", type=int, default=Limits.cpu_seconds, help="CPU time one submission may use")
    p.add_argument("--submission-timeout", type=int, default=Limits.submission_seconds,
                   help="seconds of wall clock one whole submission may take (its cells judged by then keep their "
                        "scores)")
    p.add_argument("--rerun-all", action="store_true",
                   help="also re-run the course's demo and experiment cells no score depends on (same scores, slower)")


def cmd_demo(args) -> int:
    from grader.authoring.demo import run_demo  # lazy: start-up

    ready_sources(_chapters(args.chapters))
    return run_demo(args.course_dir, chapters=_chapters(args.chapters))


def build_mod():
    from grader.authoring import build  # lazy: start-up (nbgrader)

    return build


def _class_options(p) -> None:
    """What autograde and regrade share: where the class lives, how many at once, its term."""
    p.add_argument("--course-dir", default="nbgrader-course")
    p.add_argument("--db", default=None, help=DB_HELP)
    p.add_argument("--jobs", type=int, default=2, help="notebooks graded at once (up to one per core)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--term", default=None, help="due dates, late policy, extensions (default: COURSE_DIR/term.toml)")


DB_HELP = "SQLAlchemy URL (default: the gradebook the course dir was last graded into, else SQLite in it)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grader", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("build", help="generate the nbgrader source folders grader/source*/ (not committed)")
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
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("release", help="nbgrader generate_assignment; compare with course/")
    p.add_argument("chapters", nargs="*")
    p.add_argument("--write", action="store_true", help="copy the release into course/")
    p.add_argument("--course-dir", default=None, help="release into this nbgrader course directory (a class's)")
    p.add_argument("--lang", choices=["en", "zh", "all"], default=None,
                   help="the edition: en or zh (default: both into course/ and course/zh/; en with --course-dir)")
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("translate", help="bring a language's catalogues (i18n/LANG/*.po) in step with the chapters")
    p.add_argument("chapters", nargs="*")
    p.add_argument("--lang", default="zh")
    p.add_argument("--check", action="store_true", help="only list units missing, untranslated or out of date")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("grade", help="grade submitted notebooks offline")
    p.add_argument("paths", nargs="+")
    p.add_argument("--json", action="store_true")
    p.add_argument("--jobs", type=int, default=1, help="notebooks graded at once")
    _sandbox_options(p)
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("autograde", help="grade a class (one folder per student, or an LMS download) into a gradebook")
    p.add_argument("submissions",
                   help="one folder per student, nbgrader's submitted/, or an LMS download (zip or folder)")
    p.add_argument("--pattern", default=None,
                   help="LMS file names: a regex with the named groups student and optional file, timestamp")
    _class_options(p)
    p.add_argument("--submitted-at", default=None,
                   help="submission time (ISO 8601, UTC unless a zone is given) for notebooks with no timestamp.txt")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="grade on this dask.distributed cluster (its workers import this grader; "
                        "guides/beyond-one-machine.md)")
    _sandbox_options(p)
    p.set_defaults(func=cmd_autograde)

    p = sub.add_parser("collect", help="nbgrader collect, safely: the exchange's newest submissions into "
                       "COURSE_DIR/submitted/ (no links followed, regular files only, the grader's own times)")
    p.add_argument("--course-dir", default="nbgrader-course")
    p.add_argument("--exchange", default=os.environ.get("COURSE_EXCHANGE_ROOT", "/srv/nbgrader/exchange"),
                   help="nbgrader's exchange root (default: $COURSE_EXCHANGE_ROOT)")
    p.add_argument("--no-check-owner", dest="check_owner", action="store_false",
                   help="accept a submission whose folder is not owned by the learner it names: only for a try-out "
                        "hub, where every server is one unix user (default: refused, each learner a unix user)")
    p.set_defaults(func=cmd_collect)

    p = sub.add_parser("serve",
                       help="grade on submit: the hub's grading service (guides/teaching.md: Grading on submit)")
    p.add_argument("--course-dir", default="nbgrader-course")
    p.add_argument("--exchange", default=os.environ.get("COURSE_EXCHANGE_ROOT", "/srv/nbgrader/exchange"),
                   help="nbgrader's exchange root (default: $COURSE_EXCHANGE_ROOT)")
    p.add_argument("--instructor", action="append", default=[], help="a user who sees the class page (repeatable)")
    p.add_argument("--grader", action="append", default=[],
                   help="a teaching assistant: the class page, any feedback, answering regrade requests (repeatable)")
    p.add_argument("--jobs", type=int, default=2, help="notebooks graded at once")
    p.add_argument("--poll", type=float, default=1.0, help="seconds between looks at the exchange")
    p.add_argument("--port", type=int, default=None, help="default: the port of $JUPYTERHUB_SERVICE_URL")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT", help="grade on this Dask cluster")
    p.add_argument("--no-check-owner", dest="check_owner", action="store_false",
                   help="accept a submission whose folder is not owned by the learner it names: only for a try-out "
                        "hub, where every server is one unix user (default: refused, each learner a unix user)")
    p.add_argument("--hub-pid", type=int, default=None,
                   help="the hub that starts it, its parent: it ends when that process ends (the hub's config "
                        "passes it: a killed hub leaves no service behind)")
    _sandbox_options(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("regrade", help="grade a chapter again for the class; show old -> new per learner")
    p.add_argument("chapter")
    _class_options(p)
    p.add_argument("--never-lower", action="store_true",
                   help="keep a learner's old scores where the new total is lower")
    p.add_argument("--undo", action="store_true", help="put back the scores from before the last regrade")
    p.add_argument("--reason", default="", help="why (kept in the history)")
    p.add_argument("--student", action="append", default=[],
                   help="only this learner (repeatable): e.g. after accepting their regrade request")
    _sandbox_options(p)
    p.set_defaults(func=cmd_regrade)

    p = sub.add_parser("requests", help="the regrade requests of the grading service, oldest first")
    p.add_argument("--course-dir", default="nbgrader-course")
    p.add_argument("--json", action="store_true", help="as JSON, with what each answer changed")
    p.set_defaults(func=cmd_requests)

    p = sub.add_parser("report", help="an HTML report of one chapter across the class")
    p.add_argument("chapter")
    p.add_argument("--course-dir", default="nbgrader-course")
    p.add_argument("--db", default=None, help=DB_HELP)
    p.add_argument("--output", "-o", default=None, help="default: COURSE_DIR/reports/<chapter>.html")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("export", help="grades for Canvas or Moodle, learners matched through a roster CSV")
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
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("similarity", help="pairs of learners ranked by how alike their answers are (instructor only)")
    p.add_argument("chapter")
    p.add_argument("--course-dir", default="nbgrader-course")
    p.add_argument("--json", action="store_true", help="every pair and group, and the notes: {pairs: [{a, b, score, "
                   "exercises: {grade_id: score}}], groups: [{members, share, exercises}], notes}")
    p.add_argument("--html", default=None, metavar="OUT", help="write the most alike pairs side by side to OUT")
    p.add_argument("--top", type=int, default=20, help="pairs in the table and the HTML page (default 20)")
    p.set_defaults(func=cmd_similarity)

    p = sub.add_parser("demo", help="the instructor path end to end on sample students")
    p.add_argument("chapters", nargs="*")
    p.add_argument("--course-dir", default=None, help="keep the course directory here")
    p.set_defaults(func=cmd_demo)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:
        print(f"grader: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

"""Grading with real nbgrader: one-off notebooks (`grader grade`) and a whole class (`grader autograde`).

The pipeline, per submission (trusted steps in this process, learner code only in the pool's sandbox):
1. stage: read and repair the notebook against the release (grader.classroom.submissions); an unreadable
   notebook, or one of another chapter, is staged as the released notebook with its reason;
2. judge (grader.boundary.pool): the learner's cells run in a sandboxed child, the hidden checks in this
   process against it (grader.boundary.proxy), all submissions side by side (`jobs`), or on a Dask
   cluster (grader.classroom.grading.cluster);
3. record (grader.classroom.grading.recording): nbgrader's own autograde, with the verdict in place of its Execute
   step (FillVerdict), so the gradebook, feedback and export hold it. A submission whose grading failed
   gets zero with the reason, never its old score.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import json
import re
import tempfile
from pathlib import Path

import nbformat

from grader.boundary import heap, seeds
from grader.boundary.confine import Limits
from grader.boundary.pool import Pool, load_checks
from grader.boundary.score import FAILED, LIKELY_MISTAKE, NO_CREDIT, points, shown
from grader.boundary.unit import Job, Verdict
from grader.chapters import CHAPTERS, LANGUAGES, Chapter, exercise_of, is_answer_cell, is_test_cell
from grader.classroom import locks
from grader.classroom.grades.report import save_notes
from grader.classroom.grades.total import chapter_total, totals
from grader.classroom.grading import nbgrader_costs, skipping
from grader.classroom.grading.cluster import DaskPool
from grader.classroom.grading.nbgrader_helper import NbgraderHelper
from grader.classroom.grading.recording import feedback_and_export, nbgrader_api, record, zero_grades
from grader.classroom.intake.collect import gather
from grader.classroom.phrasebook import edition_of, phrasebook
from grader.classroom.policy.accommodations import class_roster
from grader.classroom.submissions import (
    BadSubmission,
    Submission,
    grade_id_of,
    grade_ids,
    identify,
    identify_with_rule,
    read_learner_notebook,
    repair,
    set_aside_duplicates,
)
from grader.coursedir import CourseDir, database_of

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SAVED_OUTPUTS = 20  # outputs kept, per cell left out of a grading run, from the learner's own run
# Bytes (as JSON) of the learner's own saved outputs and markdown attachments kept, per notebook
# (feedback shows them for cells left out of the grading run): a full run of any chapter saves
# under 0.75 MB of figures and text in all (grader.classroom.submissions.MAX_NOTEBOOK_MB says how measured).
SAVED_BYTES = 4 * 2 ** 20
DROPPED = shown("[{size:.1f} MB of saved outputs dropped: over the grader's limit of {limit:g} MB per notebook]\n")


def _test_ids(chapter: Chapter) -> dict[str, float]:
    """grade_id -> points of the test cells (not the written answers, graded by hand), as the learner
    notebook (the release) records them."""
    path = chapter.course_notebook
    return dict(_test_ids_of(path, path.stat().st_mtime_ns))


@functools.lru_cache(maxsize=64)
def _test_ids_of(path: Path, mtime_ns: int) -> tuple[tuple[str, float], ...]:
    """Read once per version of the file, not once per submission's result."""
    nb = nbformat.read(path, as_version=4)
    return tuple((c.metadata.nbgrader["grade_id"], c.metadata.nbgrader["points"]) for c in nb.cells if is_test_cell(c))


@functools.cache
def _failing_marks() -> tuple[str, ...]:
    """How a report line that failed starts, in each edition ("FAIL", "no credit:"; "未通过", ...)."""
    marks = []
    for lang in ("en", *LANGUAGES):
        book = phrasebook(lang)
        marks += [book.say(FAILED, check="\0", why="\0"), book.say(NO_CREDIT, reason="\0"),
                  book.say(LIKELY_MISTAKE, mistake="\0")]
    return tuple(mark.split("\0")[0].strip() for mark in marks)


def _cell_error(outputs: list) -> str | None:
    """What a graded cell said went wrong: the failing lines of the report and any exception."""
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(_failing_marks())]
    for o in outputs:
        if o.get("output_type") == "error" and not any(o.get("evalue", "") in ln for ln in lines):
            lines.append(ANSI.sub("", f"{o.get('ename')}: {o.get('evalue')}"))
        elif o.get("output_type") == "stream" and o.get("name") == "stderr":
            lines.append("the cell wrote to stderr")
    return "; ".join(lines) or None


def _other_chapter(nb: nbformat.NotebookNode, chapter: Chapter) -> str | None:
    """The chapter whose graded cells a notebook holds, when they are none of `chapter`'s."""
    ids = {grade_id_of(c) for c in nb.cells} - {None}
    if not ids or ids & grade_ids(chapter):
        return None
    for other in CHAPTERS:
        if other != chapter and ids & grade_ids(other):
            return other.assignment
    return "an unknown notebook"


def job_cells(nb: nbformat.NotebookNode, released: nbformat.NotebookNode, rerun_all: bool = False) -> list[dict]:
    """What the sandbox runs for each cell: test cells are the hidden checks of their exercise
    (whatever the submission holds there), locked cells the release's text, code cells as written.
    Unless `rerun_all`, course-authored cells no score depends on are left out (grader.classroom.grading.skipping);
    they keep the outputs the learner saved (`saved`)."""
    tests, locked, course_sources = {}, {}, []  # grade_id -> the exercise a test cell tests, or the locked text
    answers = {grade_id_of(c) for c in released.cells if is_answer_cell(c)}  # prose, never run
    for cell in released.cells:
        meta = cell.metadata.get("nbgrader", {})
        if is_test_cell(cell):
            tests[meta["grade_id"]] = exercise_of(cell)
        elif meta.get("locked") and cell.cell_type == "code":
            locked[meta["grade_id"]] = cell.source
        if cell.cell_type == "code" and not meta.get("solution") and not meta.get("grade"):
            course_sources.append(cell.source)
    cells, candidates = [], []
    for cell in nb.cells:
        grade_id = grade_id_of(cell)
        solution = bool(grade_id and cell.metadata.nbgrader.get("solution"))
        if grade_id in tests:
            cells.append({"kind": "test", "exercise": tests[grade_id]})
        elif grade_id in locked:
            cells.append({"kind": "code", "source": locked[grade_id]})
        elif grade_id in answers:
            cells.append({"kind": "skip"})
        elif cell.cell_type == "code" or solution:
            cells.append({"kind": "code", "source": cell.source})
        else:
            cells.append({"kind": "skip"})
        candidates.append(cells[-1]["source"] if cells[-1]["kind"] == "code" and not solution else None)
    if not rerun_all:
        for index in skipping.left_out(cells, skipping.course_cells(candidates, course_sources)):
            saved = nb.cells[index].get("outputs")
            cells[index] = {"kind": "skip", "saved": list(saved)[:SAVED_OUTPUTS] if isinstance(saved, list) else []}
    return cells


@contextlib.contextmanager
def one_submission(submission: Submission, step: str):
    """The per-submission boundary of a batch: whatever goes wrong while `step` (staging, recording)
    handles this learner's file becomes this submission's error, which grade_all records as its zero
    with the reason; the batch goes on. A BadSubmission's text is the reason as it stands."""
    try:
        yield
    except Exception as err:  # noqa: BLE001 - one submission never stops the batch
        if isinstance(err, BadSubmission):
            reason = str(err)
        else:
            first = str(err).splitlines()[0][:200] if str(err) else ""
            reason = shown(f"the grader could not {step} this notebook ({type(err).__name__}: {first})")
        submission.error = submission.error or reason


def stage(course: CourseDir, submission: Submission, released: dict[str, nbformat.NotebookNode],
          rerun_all: bool = False) -> None:
    """Copy a repaired submission into submitted/<student>/<assignment>/. One that cannot be graded
    is staged as the released notebook with the reason, so the gradebook records zero, not an old score."""
    if submission.set_aside:  # a second notebook of one chapter: nothing to stage
        return
    with one_submission(submission, shown("identify")):
        submission.chapter, rule = identify_with_rule(submission.path)
        if rule:
            submission.notes.append(rule)
    if submission.chapter is None:
        return
    release = released[submission.chapter.assignment]
    if not submission.error:
        with one_submission(submission, shown("read")):
            nb, release = _learner_notebook(submission, release)
            submission.notes += bound_saved_outputs(nb)
            submission.cells = job_cells(nb, release, rerun_all)
    if submission.error:
        nb = copy.deepcopy(release)
        submission.cells = job_cells(nb, release, rerun_all)
    _write_staged(course, submission, nb)


def _learner_notebook(submission: Submission, release: nbformat.NotebookNode):
    """The submission read (its shape checked: grader.classroom.submissions) and repaired against the
    release of its edition; returns both."""
    path, chapter = submission.path, submission.chapter
    if not path.is_file():
        raise BadSubmission(shown(f"{path}: no such file"))
    nb, notes = read_learner_notebook(path)
    other = _other_chapter(nb, chapter)
    if other:
        raise BadSubmission(shown(f"{path.name} holds the cells of {other}, not of {chapter.assignment}"))
    release = edition_release(nb, chapter, release)
    submission.lang = edition_of(nb)
    nb, repairs = repair(nb, release)
    submission.notes += notes + repairs
    return nb, release


def edition_release(nb: nbformat.NotebookNode, chapter: Chapter,
                    release: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The release of the edition a learner's notebook says it is (a translation's course/<lang>/,
    which CI keeps equal to nbgrader's release of it), else `release`. Same grade_ids, points and
    hidden tests in every edition: a learner who claims another edition gets its text, not a grade."""
    lang = edition_of(nb)
    if lang == "en":
        return release
    path = chapter.edition(lang).course_notebook
    return nbformat.read(path, as_version=4) if path.is_file() else release


def bound_saved_outputs(nb: nbformat.NotebookNode) -> list[str]:
    """Keep at most SAVED_BYTES of the outputs and markdown attachments the learner saved (feedback
    shows them for cells left out of the grading run), in notebook order; each cell's beyond that is
    replaced by a line saying so, so memory, the staged copy and the feedback file stay bounded."""
    budget, dropped, book = SAVED_BYTES, 0, phrasebook(edition_of(nb))
    for cell in nb.cells:
        for key in ("outputs", "attachments"):
            if not cell.get(key):
                continue
            size = len(json.dumps(cell[key]))
            if size <= budget:
                budget -= size
                continue
            dropped += size
            if key == "attachments":
                del cell[key]
            else:
                cell[key] = [nbformat.v4.new_output("stream", name="stdout", text=book.say(
                    DROPPED, size=size / 2 ** 20, limit=SAVED_BYTES / 2 ** 20))]
    if not dropped:
        return []
    return [DROPPED.format(size=dropped / 2 ** 20, limit=SAVED_BYTES / 2 ** 20).strip()]


def _write_staged(course: CourseDir, submission: Submission, nb: nbformat.NotebookNode) -> None:
    target = course.root / "submitted" / submission.student / submission.chapter.assignment
    target.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target / submission.chapter.notebook_name)


def result_of(course: CourseDir, submission: Submission, late=None, gradebook=None) -> dict:
    """The JSON contract: notebook, score, max_score (grader.classroom.grades.total's: automatic and hand-graded
    points, less the late penalty by `late`, the course's LatePolicy), raw_score, penalty, complete,
    tests{grade_id: score, max_score, error}, written{grade_id: score (None: pending), max_score, state}.
    `gradebook`: an open nbgrader Gradebook of the course (`results_of`), else one is opened here."""

    chapter = submission.chapter
    expected = _test_ids(chapter) if chapter else {}
    tests = {gid: {"score": 0.0, "max_score": float(points), "error": submission.error}
             for gid, points in expected.items()}
    written, total = {}, None
    if chapter and submission.cells:
        graded = course.root / "autograded" / submission.student / chapter.assignment / chapter.notebook_name
        outputs = {}
        if graded.exists():
            nb = nbformat.read(graded, as_version=4)
            outputs = {c.metadata.nbgrader["grade_id"]: c.get("outputs", []) for c in nb.cells if is_test_cell(c)}
        with _opened(course, gradebook) as gb:
            total = chapter_total(gb, submission.student, chapter.assignment, late)
            for part in total.parts if total else ():
                if part.name not in tests:  # a written answer: a person grades it
                    written[part.name] = {"score": part.score, "max_score": part.max_score, "state": part.state}
                    continue
                error = ((_cell_error(outputs.get(part.name, [])) or submission.error)
                         if part.score < part.max_score else None)
                tests[part.name] = {"score": part.score, "max_score": part.max_score, "error": error}
            if total is None:
                for entry in tests.values():
                    entry["error"] = submission.error or "no grade was recorded for this notebook"
    raw = round(sum(t["score"] for t in tests.values()), 3)
    result = {"notebook": str(submission.path),
              "score": total.score if total else raw,
              "max_score": total.max_score if total else round(sum(t["max_score"] for t in tests.values()), 3),
              "raw_score": total.raw if total else raw, "penalty": total.penalty if total else 0.0,
              "complete": total.complete if total else True,
              "tests": tests, "lang": submission.lang}
    if written:
        result["written"] = written
    if submission.error:
        result["error"] = submission.error
    if submission.notes:
        result["repairs"] = submission.notes
    return result


def results_of(course: CourseDir, submissions: list[Submission], late=None) -> list[dict]:
    """`result_of` each submission, from one open gradebook (opening one costs as much as reading a result)."""
    if not any(sub.chapter and sub.cells for sub in submissions):
        # none reached a gradebook, and none may exist: nbgrader would create one, shelling out to `alembic`
        return [result_of(course, sub, late) for sub in submissions]
    with _opened(course) as gb:
        return [result_of(course, sub, late, gb) for sub in submissions]


def _opened(course: CourseDir, gradebook=None):
    from nbgrader.api import Gradebook

    return contextlib.nullcontext(gradebook) if gradebook is not None else Gradebook(course.db_url)


def release_all(course: CourseDir, chapters: list[Chapter], cached: bool = False) -> dict[str, nbformat.NotebookNode]:
    if cached:
        try:
            course.release_cached(chapters)
        except OSError:  # no writable cache folder: release here instead
            cached = False
    if not cached:
        for chapter in chapters:
            course.release_if_changed(chapter)
    return {c.assignment: nbformat.read(course.root / "release" / c.assignment / c.notebook_name, as_version=4)
            for c in chapters}


def _chapters_of(submissions: list[Submission]) -> list[Chapter]:
    chapters = []
    for sub in submissions:
        try:
            chapter = identify(sub.path)
        except BadSubmission:  # staging says why, for this submission alone
            continue
        if chapter not in chapters:
            chapters.append(chapter)
    return chapters


def grade_all(course: CourseDir, submissions: list[Submission], released: dict, pool: Pool,
              progress: bool = True, rerun_all: bool = False, term=None,
              book: locks.Locks = locks.Locks(), reuse_secrets: bool = False,
              secret: int | None = None, hold=None, helper=None) -> None:
    """Stage, judge (in parallel, in the sandbox) and record every submission; never stops early.
    `term` (grader.classroom.policy.term.Term): due dates, extensions and the late policy; `book`: the locks recording
    holds on a gradebook other graders share (grader.classroom.locks); `reuse_secrets`: draw the hidden
    inputs from the secrets kept at the last grading (grader.boundary.seeds), as a regrade does; `secret`:
    one for every submission instead (reproducible scores, for tests; else $COURSE_GRADING_SEED if set);
    `hold`: the locks for one short step (staging, recording one submission), when the caller holds none
    while judging (autograde_with's `judge_unlocked`); `helper`: a started NbgraderHelper, which runs nbgrader's
    autograde of each (grader.classroom.grading.nbgrader_helper)."""
    hold = hold or (lambda: contextlib.nullcontext(book))
    with hold():
        for sub in submissions:
            stage(course, sub, released, rerun_all)
        staged = [s for s in submissions if s.chapter and s.cells]
        by_key = {s.key: s for s in staged}
        if term is not None:
            term.prepare(course, staged)
        api = nbgrader_api(course, term)

    def recorded(sub: Submission, verdict: Verdict | None) -> None:
        sub.verdict = verdict
        with hold() as held, (held or book).recording(sub.student):
            with one_submission(sub, shown("record the grade of")):
                return record(course, api, sub, helper)
            # nbgrader could not record the learner's notebook: the release is recorded instead, a zero
            # with the reason (a row, where zeroing an old one could find none)
            with one_submission(sub, shown("record even a zero for")):
                sub.verdict, sub.cells = None, job_cells(released[sub.chapter.assignment],
                                                         released[sub.chapter.assignment])
                _write_staged(course, sub, released[sub.chapter.assignment])
                return record(course, api, sub, helper)
            with one_submission(sub, shown("zero the grade of")):
                zero_grades(course, sub)

    for sub in staged:
        if sub.error:  # nothing to run: record the zero and its reason now
            recorded(sub, None)
    judged = [s for s in staged if not s.error]
    secret = seeds.fixed() if secret is None else secret
    drawn = seeds.for_submissions(course.root, judged, reuse_secrets) if secret is None else {}
    jobs = [Job(s.key, s.chapter, s.cells, course.root / "release" / s.chapter.assignment, drawn.get(s.key, secret))
            for s in judged]
    heap.settle()  # a grading command's imports are done (nbgrader, the checks): its heap is frozen
    pool.judge_all(jobs, progress=progress, done=lambda job, verdict: recorded(by_key[job.key], verdict))
    with hold():
        save_notes(course, submissions)


def grade_paths(paths: list[str], timeout: int = 120, jobs: int = 1, progress: bool = False,
                limits: Limits = Limits(), rerun_all: bool = False, secret: int | None = None) -> list[dict]:
    """Grade notebooks offline in a throwaway course directory; one result per path, in order; hidden
    inputs from a fresh secret per notebook, or from `secret` (grader.classroom.grading.batch.grade_all)."""
    submissions = [Submission(Path(p), f"submission{i + 1:03d}") for i, p in enumerate(paths)]
    with Pool(jobs=jobs, timeout=timeout, limits=limits) as pool, tempfile.TemporaryDirectory(prefix="grader-") as tmp:
        pool.start()
        chapters = _chapters_of(submissions)
        load_checks(chapters)
        course = CourseDir(Path(tmp), chapters, timeout=timeout)
        released = release_all(course, chapters, cached=True)
        grade_all(course, submissions, released, pool, progress=progress, rerun_all=rerun_all, secret=secret)
        return results_of(course, submissions)


SO_FAR = shown(" so far (written answers pending)")
NOTE = shown("  note: {note}")
WRITTEN = {"pending": shown("written answer: pending: not yet graded by hand"),
           "unanswered": shown("written answer: no answer written"), "graded": shown("written answer: graded by hand")}


def format_table(results: list[dict]) -> str:
    """`grader grade`'s table, each notebook's rows in its edition's language (the result's "lang")."""
    lines = []
    for r in results:
        book = phrasebook(r.get("lang", "en"))
        lines.append(f"{r['notebook']}: {points(r['score'])} / {points(r['max_score'])}"
                     + ("" if r.get("complete", True) else book.say(SO_FAR)))
        if r.get("error"):
            lines.append(f"  error: {book.text(r['error'])}")
        lines += [book.say(NOTE, note=note) for note in r.get("repairs", [])]
        for gid, t in r["tests"].items():
            line = f"  {gid:<40} {points(t['score']):>6} / {points(t['max_score'])}"
            if t["error"] and not r.get("error"):
                line += f"   {t['error'][:150]}"
            lines.append(line)
        for gid, w in r.get("written", {}).items():
            score = "-" if w["score"] is None else points(w["score"])
            lines.append(f"  {gid:<40} {score:>6} / {points(w['max_score'])}   {book.say(WRITTEN[w['state']])}")
    return "\n".join(lines)


def autograde_class(submissions_dir: str | Path, course_dir: str | Path, db_url: str | None = None,
                    jobs: int = 2, timeout: int = 120, chapters: list[Chapter] | None = None,
                    progress: bool = True, limits: Limits = Limits(), rerun_all: bool = False, term=None,
                    pattern: str | None = None, scheduler: str | None = None) -> str:
    """Grade every `<student>/**/<chapter>.ipynb` (or an LMS download: grader.classroom.intake.collect) into
    the gradebook, then feedback and grades.csv; judged by the local pool, or on the Dask cluster at `scheduler`
    (grader.classroom.grading.cluster); `term` (grader.classroom.policy.term.Term): due dates, extensions, the
    late policy."""
    with _pool(scheduler, jobs, timeout, limits) as pool:
        summary_text, _ = autograde_with(pool, submissions_dir, course_dir, db_url=db_url, timeout=timeout,
                                         chapters=chapters, progress=progress, rerun_all=rerun_all, term=term,
                                         pattern=pattern)
        return summary_text


def autograde_with(pool, submissions_dir: str | Path, course_dir: str | Path, db_url: str | None = None,
                   timeout: int = 120, chapters: list[Chapter] | None = None, progress: bool = True,
                   rerun_all: bool = False, term=None, pattern: str | None = None,
                   feedback_for: list[str] | None = None, score_only: bool = False,
                   judge_unlocked: bool = False) -> tuple[str, list[dict]]:
    """autograde_class on a pool already running (the grading service keeps one warm); returns the
    summary and one result per submission (grade_paths' JSON contract, with "student" and
    "assignment"). `feedback_for`: generate feedback for these students only (default: the class);
    `score_only`: that feedback shows scores, not the checks' messages (grader.classroom.grading.recording.ScoreOnly).
    The course directory's lock and the gradebook's (grader.classroom.locks) are held for the whole run, or,
    with `judge_unlocked`, only for the short steps (setup, recording each submission, feedback), never while
    learner code runs: the grading service, whose workers each grade one learner (DESIGN.md invariant 11)."""
    root = Path(course_dir).resolve()

    def short(url: str | None = None):  # the locks for one short step, when not held for the whole run
        return _short_step(root, url) if judge_unlocked else contextlib.nullcontext()

    with contextlib.nullcontext() if judge_unlocked else locks.locked(root):
        pool.start()
        with short():
            submissions, notes = gather(submissions_dir, course_dir, pattern)
            set_aside_duplicates(submissions)
            if term is not None:
                term.fill_times(submissions)
                term.check_extensions(class_roster(course_dir) | {s.student for s in submissions})
            chapters = chapters or _chapters_of(submissions)
            load_checks(chapters)
            course = CourseDir(Path(course_dir), chapters, db_url=db_url, timeout=timeout)
        with contextlib.nullcontext(locks.Locks()) if judge_unlocked else locks.shared(course.db_url) as book, \
                _nbgrader_helper(course, submissions, term) as helper, nbgrader_costs.kept_open():
            with short(course.db_url) as held, (held or book).releasing():
                own_file = root / "gradebook.db"  # a new course directory may start from the cache's (a copy over it)
                fresh = db_url is None and database_of(course_dir) == f"sqlite:///{own_file}" and not own_file.exists()
                released = release_all(course, chapters, cached=fresh)
            grade_all(course, submissions, released, pool, progress=progress, rerun_all=rerun_all, term=term,
                      book=book, hold=(lambda: short(course.db_url)) if judge_unlocked else None, helper=helper)
            with short(course.db_url):
                feedback_and_export(course, chapters, students=feedback_for, score_only=score_only, helper=helper)
                late = term.policy if term is not None else None
                results = [{**result, "student": sub.student,
                            "assignment": sub.chapter.assignment if sub.chapter else None}
                           for sub, result in zip(submissions, results_of(course, submissions, late))]
                return "\n".join([summary(course, chapters, results, late), *notes]), results


HELPED = 12  # notebooks from which a batch starts an nbgrader helper (its start: ~1.5 CPU-s; a notebook's nbgrader
# work: ~0.3)


def _nbgrader_helper(course: CourseDir, submissions: list[Submission], term=None):
    """A second process for the batch's nbgrader work (grader.classroom.grading.nbgrader_helper), started now so
    that its imports overlap the first judging; none for a handful of notebooks."""
    return NbgraderHelper(course.root, course.db_url, term) if len(submissions) >= HELPED else contextlib.nullcontext()


@contextlib.contextmanager
def _short_step(root: Path, db_url: str | None):
    """The course directory's lock, then the gradebook's (its `Locks`, or None without a gradebook yet)."""
    with locks.locked(root, quiet=True):
        if db_url is None:
            yield None
            return
        with locks.shared(db_url, quiet=True) as book:
            yield book


def _pool(scheduler: str | None, jobs: int, timeout: int, limits: Limits):
    if scheduler is None:
        return Pool(jobs=jobs, timeout=timeout, limits=limits)
    return DaskPool(scheduler, timeout=timeout, limits=limits)


def summary(course: CourseDir, chapters: list[Chapter], results: list[dict], late=None) -> str:
    """The gradebook's totals (grader.classroom.grades.total), one row per student and chapter, and every problem."""
    lines = [f"Gradebook {course.db_url}", f"{'student':<12} {'chapter':<26} {'score':>13}"]
    found = totals(course.db_url, late)
    for student in sorted({s for s, _ in found}):
        for chapter in chapters:
            total = found.get((student, chapter.assignment))
            if total is not None:
                lines.append(f"{student:<12} {chapter.assignment:<26} {total.text()}")
    problems = [r for r in results if r.get("error") or r.get("repairs")]
    for r in problems:
        reason = r.get("error") or "; ".join(r["repairs"])
        lines.append(f"note: {r['notebook']}: {reason.splitlines()[0][:300] if reason else ''}")
    feedback = sorted(course.root.glob("feedback/*/*/*.html"))
    lines.append(f"feedback: {len(feedback)} HTML file(s) under {course.root / 'feedback'}")
    lines.append(f"grades:   {course.root / 'grades.csv'}")
    return "\n".join(lines)

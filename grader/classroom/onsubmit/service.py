"""Grading on submit: a learner presses Submit and reads their feedback seconds later.

The hub runs this as a service (`grader serve`, deploy/jupyterhub/jupyterhub_config.py), as the
grading user. nbgrader's exchange is the queue: every folder in `<exchange>/<course>/inbound/`
(`student+assignment+timestamp+random`, nbgrader's name for one submission) is one entry of the
ledger `<course dir>/on-submit/ledger.sqlite` (grader.classroom.ledger), which says what became of it.

A restarted service reads the ledger and the exchange again: what was being graded when it stopped
is queued again (an entry left at "grading" that no worker holds is stale), what it never saw is new, and
nothing is lost or counted twice. Grading goes the same way as `grader autograde`
(grader.classroom.grading.batch.autograde_with: the sandboxed pool, the gradebook, the late policy of
term.toml, the notes) on a pool kept warm, then nbgrader's generate_feedback and release_feedback for
that learner alone, so their Fetch Feedback finds it. The policy is term.toml's [on_submit]
(grader.classroom.policy.submitpolicy).

No learner delays another (DESIGN.md invariant 11): the service's workers (`--jobs` of them) each grade
one learner's attempt as they free up (Service.dispatch, Service.grade_one), the oldest queued first,
at most one attempt per learner in flight (a newer one waits for it; one still queued is superseded by
a newer one). Judging holds no lock; only recording and feedback take the course's locks, briefly.

What a learner writes is data here: a folder is copied once, when first seen, through
grader.classroom.intake.safecopy (regular files only, no link followed, sizes and counts bounded) into
`on-submit/received/<key>/`, and graded from that copy; its time is the kernel's (the copy's
`changed_at`, never later than when the service saw it), not the folder name or timestamp.txt.
Each entry is handled on its own: whatever fails ends that entry failed with its reason.
"""
from __future__ import annotations

import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from html import escape
from pathlib import Path

from grader.boundary.score import shown
from grader.chapters import CHAPTERS, find_chapter
from grader.classroom.grades.total import course_totals
from grader.classroom.grading.batch import autograde_with
from grader.classroom.grading.publish import Publisher
from grader.classroom.grading.recording import nbgrader_api
from grader.classroom.intake.identity import NotALearner, admit_student
from grader.classroom.intake.safecopy import UnsafeSubmission, copy_tree
from grader.classroom.ledger import (
    FAILED,
    GRADED,
    GRADING,
    HELD,
    QUEUED,
    REFUSED,
    STATE_DIR,
    SUPERSEDED,
    Entry,
    Ledger,
    checked_time,
    inbound_groups,
    now,
)
from grader.classroom.phrasebook import edition_of, phrasebook
from grader.classroom.policy import timelimit
from grader.classroom.policy.admission import admit, refused
from grader.classroom.policy.term import WAITING, PolicyFile
from grader.classroom.policy.visibility import hides_messages, policy_for
from grader.classroom.submissions import TIMESTAMP_FILE, write_timestamp
from grader.coursedir import COURSE_ID, CourseDir

SERVICE_RESTARTED = shown("queued again: the grading service restarted")
NOT_FINISHED = shown("queued again: its grading did not finish")

MAX_TRIES = 3  # gradings started on one entry before it ends failed (the grader stopped on it each time)
# A refused or held submission's own feedback file (Service._notice): nbgrader's Assignments panel cannot mark
# the row, but its Fetch Feedback shows this.
NOTICE_REFUSED = shown("{chapter}: this submission was not graded")
NOTICE_HELD = shown("{chapter}: this submission is held for your instructor, who grades it")
NOTICE_PAGE = shown("Every submission and its status: the Grading page, in JupyterLab's Help menu.")



def _edition(graded: Path) -> str:
    """The edition of a graded notebook (its page and feedback speak its language); "en" if unreadable."""
    import nbformat

    try:
        return edition_of(nbformat.read(graded, as_version=4))
    except Exception:  # noqa: BLE001 - a notebook nbgrader could not write stays English
        return "en"

class Service:
    """The queue and the grading of one class: `serve()` grades until stopped; `step()` grades what is queued
    now and returns when it is done (tests call it directly)."""

    def __init__(self, course_dir: str | Path, exchange: str | Path, pool, timeout: int = 120,
                 term_file: str | Path | None = None, check_owner: bool = False):
        self.course_dir, self.exchange = Path(course_dir).resolve(), Path(exchange)
        self.inbound = self.exchange / COURSE_ID / "inbound"
        self.received = self.course_dir / STATE_DIR / "received"
        self.pool, self.timeout, self.term_file = pool, timeout, term_file
        # Where each learner is a unix user, the exchange's inbound folder is writable by all of them:
        # only the folder's owner tells who submitted it (nbgrader's collect merely warns).
        self.check_owner = check_owner
        self.ledger = Ledger(self.course_dir)
        self.workers = max(1, getattr(pool, "jobs", 1))  # learners graded side by side
        self.in_flight: dict[str, str] = {}  # learner -> the entry a worker grades for them
        self.flight = threading.Lock()  # guards in_flight
        self.measuring = threading.Lock()  # one reference timing at a time (timelimit.measure)
        self.requeue_stale(SERVICE_RESTARTED)
        self.stopping = threading.Event()
        self.wake = threading.Event()  # a worker freed up, or stop(): dispatch now, not at the next poll
        # the learners who submitted, not the names the identity gate refused (a learner's folder named after a typo)
        self.policy = PolicyFile(self.course_dir, term_file,
                                 lambda: {e.student for e in self.ledger.of() if e.status != REFUSED})
        self.publisher = Publisher(self)

    def term(self):
        return self.policy.current()  # None while term.toml has an error (grader.classroom.policy.term.PolicyFile)

    def totals(self) -> dict:
        """The gradebook's totals (grader.classroom.grades.total) the pages show, by the term's late policy."""
        term = self.term()
        return course_totals(self.course_dir, term.policy) if term else {}

    def requeue_stale(self, reason: str) -> None:
        """Entries left at "grading" of learners no worker grades now go back in the queue; one the
        grader stopped on MAX_TRIES times ends failed instead (it is not an attempt used)."""
        with self.flight:
            busy = set(self.in_flight)  # a worker may be grading any of their entries (Service._keep_best)
        stale = [e for e in self.ledger.of() if e.status == GRADING and e.student not in busy]
        for entry in stale:
            if entry.tries >= MAX_TRIES:
                entry.status = FAILED
                entry.reason = shown(f"not graded: the grader stopped {entry.tries} times while grading it")
            else:
                entry.status, entry.reason = QUEUED, reason
        self.ledger.put(*stale)

    # ------------------------------------------------------------ the queue
    def scan(self) -> list[Entry]:
        """New inbound folders into the ledger: per learner and chapter the newest is admitted, held or
        refused by the policy, the others superseded at once (never copied). Linear in the folders."""
        if not self.inbound.is_dir():
            return []
        term = self.term()
        self._admit_waiting(term)
        seen, groups = now(), inbound_groups(self.inbound, self.ledger.entries)
        if not groups:
            return []
        added = []
        for (student, assignment), items in groups.items():  # the newest by the kernel's clock first
            entries = [Entry(name, student, assignment, _iso(min(ctime, seen.timestamp())), seen_at=seen.isoformat(),
                             claimed_at=claimed.isoformat() if claimed else "")
                       for ctime, name, claimed in items]
            for older in entries[1:]:
                older.status, older.reason = SUPERSEDED, shown("replaced in the queue by a newer submission")
            with self.ledger.lock:
                self._one(entries[0], term)
                self.ledger.put(*entries)
            added += entries
        return added

    def _admit_waiting(self, term) -> None:
        """Submissions that waited while term.toml had an error, admitted once it reads, oldest first."""
        if term is None:
            return
        for entry in reversed([e for e in self.ledger.of() if e.reason == WAITING]):
            with self.ledger.lock:
                entry.reason = ""
                try:
                    for old in admit(self.ledger, entry, term):
                        shutil.rmtree(self.received / old.key, ignore_errors=True)
                    self._notice(entry)
                except Exception as err:  # noqa: BLE001 - this entry alone
                    entry.status, entry.reason = FAILED, _reason(err)
                self.ledger.put(entry)

    def _one(self, entry: Entry, term) -> None:
        """The newest folder of a learner and chapter: checked, copied safely, then the policy."""
        try:
            path = self.inbound / entry.id
            admit_student(entry.student, path if self.check_owner else None)  # grader.classroom.intake.identity
            copied = copy_tree(path, self.received / entry.key)
            seen = datetime.fromisoformat(entry.seen_at).timestamp()
            entry.submitted_at = _iso(min(max(copied.changed_at, 0), seen))
            if term is None:
                entry.reason = WAITING  # queued, admitted once the term file is fixed
            else:
                for old in admit(self.ledger, entry, term):
                    shutil.rmtree(self.received / old.key, ignore_errors=True)
                self._notice(entry)
        except (UnsafeSubmission, NotALearner) as err:
            entry.status, entry.reason = REFUSED, shown(f"not graded: {err}")
        except Exception as err:  # noqa: BLE001 - one folder never stops the round
            entry.status, entry.reason = FAILED, _reason(err)
        if entry.status != QUEUED:
            shutil.rmtree(self.received / entry.key, ignore_errors=True)


    # ------------------------------------------------------------ grading
    def step(self) -> list[Entry]:
        """Scan, then grade what is queued, the workers side by side; the entries started (graded,
        failed or refused by then). Nothing is being graded between steps."""
        with ThreadPoolExecutor(self.workers) as workers:
            return self.dispatch(lambda entry: workers.submit(self.grade_one, entry), free=None)

    def dispatch(self, start, free: int | None) -> list[Entry]:
        """Scan, then hand queued entries to `start` (a free worker), oldest first: at most `free` of them
        (None: all), and never a learner's second while one of theirs is in flight (the newer waits)."""
        self.requeue_stale(NOT_FINISHED)
        self.publisher.round()  # hand grades, requests, regrades since the last look: feedback republished
        self.scan()
        if self.term() is None:
            return []
        chosen = []
        with self.flight:
            for entry in sorted((e for e in self.ledger.of() if e.status == QUEUED), key=lambda e: e.submitted_at):
                if free is not None and len(chosen) >= free:
                    break
                if entry.student not in self.in_flight:
                    self.in_flight[entry.student] = entry.id
                    chosen.append(entry)
        with self.ledger.lock:  # at once: a newer submission, scanned meanwhile, never supersedes it
            for entry in chosen:
                entry.status, entry.reason = GRADING, ""
            self.ledger.put(*chosen)
        for entry in chosen:
            start(entry)
        return chosen

    def grade_one(self, entry: Entry) -> None:
        """A worker's job: one learner's attempt, checked against the policy again (it may have changed since
        it was queued), graded, its feedback released. Whatever fails ends this entry alone."""
        try:
            term = self.term()
            if term is None:  # term.toml broke since: it waits, queued
                entry.status = QUEUED
                self.ledger.put(entry)
                return
            policy = term.submit_policy(entry.assignment, entry.student)
            refusal = refused(self.ledger, entry, policy, checked_time(entry.submitted_at)) if policy.enabled else \
                shown("this chapter is graded by your instructor, not on submit")
            score_only = hides_messages(policy_for(term, entry), checked_time(entry.submitted_at))
            if refusal:  # the policy changed, or an earlier attempt was graded since it was queued
                entry.status, entry.reason = REFUSED if policy.enabled else HELD, refusal
                self._notice(entry)
                self.ledger.put(entry)
                shutil.rmtree(self.received / entry.key, ignore_errors=True)
                return
            self._grade(entry.assignment, [entry], term, score_only)
        except Exception as err:  # noqa: BLE001 - this entry alone; the worker goes on
            self._fail(entry, err)
        finally:
            with self.flight:
                self.in_flight.pop(entry.student, None)
            self.wake.set()

    def _notice(self, entry: Entry) -> None:
        """A refused or held entry (the policy's decision, on the service's own copy): a short feedback file
        saying so and why, released where nbgrader's Fetch Feedback looks for this submission's feedback
        (`<exchange>/<course>/feedback/<hash of its secret and notebook>.html`), in its notebook's language.
        Best effort: a notice that cannot be written leaves the entry as it is (its page row says the same)."""
        if entry.status not in (REFUSED, HELD) or entry.assignment not in {c.assignment for c in CHAPTERS}:
            return  # not a chapter of this course: no notebook of ours to name the notice after
        try:
            chapter = find_chapter(entry.assignment)
            kept = self.received / entry.key
            secret = kept / "submission_secret.txt"
            if not secret.is_file() or secret.is_symlink():
                return
            from nbgrader.utils import notebook_hash

            book = phrasebook(_edition(kept / chapter.notebook_name))
            heading = book.say(NOTICE_REFUSED if entry.status == REFUSED else NOTICE_HELD, chapter=chapter.name)
            html = (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(heading)}</title></head>"
                    f"<body><h1>{escape(heading)}</h1><p>{escape(book.text(entry.reason))}</p>"
                    f"<p>{escape(book.say(NOTICE_PAGE))}</p></body></html>")
            name = notebook_hash(secret=secret.read_text()[:1000], notebook_id=chapter.name)
            target = self.exchange / COURSE_ID / "feedback" / f"{name}.html"
            # Never over feedback already released for it (a service that first sees an old submission, after
            # the instructor graded it); the instructor's release_feedback replaces this notice in turn.
            with open(target, "x", encoding="utf-8") as out:
                out.write(html)
            os.chmod(target, 0o644)  # as nbgrader's release_feedback leaves it: the learner reads it
        except FileExistsError:
            return
        except Exception as err:  # noqa: BLE001 - a notice never changes what became of the entry
            print(f"grading service: no notice for {entry.id}: {type(err).__name__}: {err}", flush=True)

    def _fail(self, entry: Entry, err: BaseException | str) -> None:
        entry.status, entry.reason = FAILED, err if isinstance(err, str) else _reason(err)
        self.ledger.put(entry)
        shutil.rmtree(self.received / entry.key, ignore_errors=True)

    def _prune(self, entries: list[Entry]) -> None:
        """The service's copies of these learners' submissions it will not grade again (all but the one
        the gradebook holds, which counts = "best" may grade again): disk bounded per learner and chapter."""
        for entry in entries:
            for e in self.ledger.of(entry.student, entry.assignment):
                if e.status not in (QUEUED, GRADING) and not e.counted:
                    shutil.rmtree(self.received / e.key, ignore_errors=True)

    def _grade(self, assignment: str, entries: list[Entry], term, score_only: bool, release: bool = True):
        """Grade these entries of one chapter; each that cannot be graded ends failed with its reason.
        A batch the grader fails on is graded again one entry at a time, so one entry fails alone."""
        chapter = find_chapter(assignment)
        work = self.course_dir / STATE_DIR / "work" / entries[0].key  # this worker's own
        ready = []
        for entry in entries:
            entry.status, entry.reason = GRADING, ""
            entry.tries += 1
            self.ledger.put(entry)
            try:
                self._collect(entry, chapter, work)
                ready.append(entry)
            except Exception as err:  # noqa: BLE001 - this entry alone
                self._fail(entry, err)
        if not ready:
            return entries
        try:
            results = self._autograde(chapter, ready, term, score_only, work)
        except Exception as err:  # noqa: BLE001 - recorded for these learners; the service goes on
            if len(ready) > 1:
                for entry in ready:
                    self._grade(assignment, [entry], term, score_only, release)
                return entries
            self._fail(ready[0], shown(f"the grader failed: {type(err).__name__}: {err}")[:500])
            return entries
        by_student = {r["student"]: r for r in results}
        api = nbgrader_api(CourseDir(self.course_dir, [chapter], timeout=self.timeout), exchange=self.exchange)
        for entry in ready:
            try:
                self._record(entry, by_student.get(entry.student), chapter, api if release else None, score_only)
            except Exception as err:  # noqa: BLE001 - this entry alone
                self._fail(entry, err)
        if release:
            self._keep_best(chapter, ready, term)
            self._prune(ready)
            if not term.submit_policy(assignment).time_limit_seconds and self.measuring.acquire(blocking=False):
                try:
                    timelimit.measure(self.pool, self.course_dir, chapter)  # once per chapter, feedback already out
                finally:
                    self.measuring.release()
        return entries

    def _collect(self, entry: Entry, chapter, work: Path) -> None:
        """What `nbgrader collect --student` does (the secret with it, which release_feedback needs) and
        a copy to grade from, both from the service's own copy, with the service's time in timestamp.txt."""
        kept = self.received / entry.key
        if not kept.is_dir():
            raise ValueError(shown("not graded: the service's copy of this submission is gone"))
        collected = self.course_dir / "submitted" / entry.student / chapter.assignment
        for target in (collected, work / entry.student / chapter.assignment):
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(kept, target)
            write_timestamp(target / TIMESTAMP_FILE, checked_time(entry.submitted_at))

    def _autograde(self, chapter, entries: list[Entry], term, score_only: bool, work: Path) -> list[dict]:
        try:
            learners = {e.student for e in entries}  # one, or none with an accommodation (Service.step)
            policy = term.submit_policy(chapter.assignment, learners.pop() if len(learners) == 1 else None)
            reference = timelimit.known_seconds(self.course_dir, chapter)
            limit = timelimit.fitted(policy, reference, self.pool.limits.submission_seconds)
            for entry in entries:  # the learner's row says it (grader.classroom.onsubmit.pages)
                entry.time_limit = limit
            self.ledger.put(*entries)
            pool = timelimit.limited(self.pool, limit)  # this learner's limit, whatever the others'
            _, results = autograde_with(pool, work, self.course_dir, timeout=self.timeout,
                                        chapters=[chapter], progress=False, term=term,
                                        feedback_for=[e.student for e in entries], score_only=score_only,
                                        judge_unlocked=True)
            return results
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _record(self, entry: Entry, result: dict | None, chapter, api, score_only: bool) -> None:
        """The course's one total (grader.classroom.grades.total, as grading.result_of reads it): written answers
        not yet graded by hand are pending, the late penalty the course's rule."""
        result = result or {"error": shown("no result for this submission"), "score": 0.0, "max_score": None,
                            "tests": {}}
        error = result.get("error") or ""
        lang = _edition(self.course_dir / "autograded" / entry.student / chapter.assignment / chapter.notebook_name)
        with self.ledger.lock:
            entry.raw_score, entry.penalty = result.get("raw_score", result["score"]), result.get("penalty", 0.0)
            entry.score, entry.max_score = result["score"], result["max_score"]
            entry.pending = [g for g, w in result.get("written", {}).items() if w["state"] == "pending"]
            entry.checks = [{"name": name, **test} for name, test in result.get("tests", {}).items()]
            entry.score_only, entry.graded_at = score_only, now().isoformat()
            entry.lang = lang
            entry.status, entry.reason = (FAILED, error.splitlines()[0][:500]) if error else (GRADED, "")
            if api is not None:
                self._release(entry, chapter, api)
            self.ledger.put(entry)

    def _release(self, entry: Entry, chapter, api) -> None:
        """nbgrader's release_feedback for this learner, and a copy the service's page links to."""
        html = self.course_dir / "feedback" / entry.student / chapter.assignment / f"{chapter.name}.html"
        if not html.is_file():
            return
        kept = self.course_dir / STATE_DIR / "feedback" / entry.key / html.name
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(html, kept)
        entry.feedback = html.name
        outcome = api.release_feedback(chapter.assignment, entry.student)
        if not outcome.get("success"):
            entry.reason = shown(f"feedback not released: {(outcome.get('error') or '')[-300:]}")

    def _keep_best(self, chapter, entries: list[Entry], term) -> None:
        """With counts = "best", the gradebook holds each learner's best attempt: when the one just
        graded is worse, the best is graded again (no feedback: the learner has it already)."""
        policy = term.submit_policy(chapter.assignment)
        again = []
        for entry in entries:
            attempts = [e for e in self.ledger.of(entry.student, chapter.assignment) if e.status == GRADED]
            if not attempts:
                continue
            best = max(attempts, key=lambda e: (e.score or 0.0, e.submitted_at)) if policy.counts == "best" else entry
            with self.ledger.lock:
                for e in attempts:
                    e.counted = e is best
                self.ledger.put(*attempts)
            if best is not entry and best.status == GRADED and (best.score or 0) > (entry.score or 0):
                again.append(best)
        if again:
            kept = {e.id: (e.status, e.feedback, e.graded_at, e.tries) for e in again}
            self._grade(chapter.assignment, again, term, score_only=False, release=False)
            with self.ledger.lock:
                for e in again:
                    e.status, e.feedback, e.graded_at, e.tries = kept[e.id]
                    e.counted = True
                self.ledger.put(*again)

    def serve(self, poll: float = 1.0) -> None:
        """Grade until stopped (stop()): every `poll` seconds, new submissions go to the workers that are free;
        a dispatch that fails is logged and the next one goes on."""
        workers = ThreadPoolExecutor(self.workers, thread_name_prefix="grading")
        try:
            while not self.stopping.is_set():
                try:
                    with self.flight:
                        free = self.workers - len(self.in_flight)
                    if free > 0:
                        self.dispatch(lambda entry: workers.submit(self.grade_one, entry), free)
                except Exception as err:  # noqa: BLE001 - the service outlives one bad round; the ledger keeps state
                    print(f"grading service: {type(err).__name__}: {err}", flush=True)
                self.wake.wait(poll)
                self.wake.clear()
        finally:
            workers.shutdown(wait=False, cancel_futures=True)  # a grading in flight may take minutes: not waited for

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()

    def abandon(self) -> list[str]:
        """For a service about to end with gradings in flight: the ledger's lock held from now on, so that none
        of them records anything (a sandbox killed under it must not read as a failed attempt); their entries stay
        at "grading" and the next service grades them again (SERVICE_RESTARTED). The learners cut short."""
        self.ledger.lock.acquire()  # never released: the process ends next
        with self.flight:
            return sorted(self.in_flight)


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat()


def _reason(err: BaseException) -> str:
    """An exception as an entry's reason: its own text when it is a ValueError saying what was wrong."""
    text = str(err).splitlines()[0] if str(err) else ""
    if isinstance(err, ValueError) and text:
        return text[:500]
    return shown(f"the grader failed: {type(err).__name__}: {text}")[:500]

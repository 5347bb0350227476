"""Grading on submit: a learner presses Submit and reads their feedback seconds later.

The hub runs this as a service (`grader serve`, deploy/jupyterhub/jupyterhub_config.py), as the
grading user. nbgrader's exchange is the queue: every folder in `<exchange>/<course>/inbound/`
(`student+assignment+timestamp+random`, nbgrader's name for one submission) is one entry of the
ledger `<course dir>/on-submit/state.json` (grader.classroom.ledger), which says what became of it.

A restarted service reads the ledger and the exchange again: what was being graded when it stopped
is queued again, what it never saw is new, and nothing is lost or counted twice. Grading goes the
same way as `grader autograde` (grader.classroom.grading.autograde_with: the sandboxed pool, the
gradebook, the late policy of term.toml, the notes), a batch of the queue at a time on a pool kept
warm; then nbgrader's generate_feedback and release_feedback for those learners alone, so their
Fetch Feedback finds it. The policy is term.toml's [on_submit] (grader.classroom.submitpolicy).
"""
from __future__ import annotations

import pwd
import re
import shutil
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from grader.boundary.score import shown
from grader.chapters import CHAPTERS, find_chapter
from grader.classroom.grading import autograde_with
from grader.classroom.ledger import (
    ATTEMPTS,
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
    now,
    parse_inbound,
)
from grader.classroom.phrasebook import edition_of
from grader.classroom.recording import nbgrader_api
from grader.classroom.submissions import TIMESTAMP_FILE
from grader.classroom.term import WAITING, PolicyFile
from grader.classroom.total import course_totals
from grader.classroom.visibility import hides_messages, policy_for
from grader.coursedir import COURSE_ID, CourseDir

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}")  # a hub user name, safe as a folder name



def _edition(graded: Path) -> str:
    """The edition of a graded notebook (its page and feedback speak its language); "en" if unreadable."""
    import nbformat

    try:
        return edition_of(nbformat.read(graded, as_version=4))
    except Exception:  # noqa: BLE001 - a notebook nbgrader could not write stays English
        return "en"

class Service:
    """The queue and the grading of one class; `step()` does one round (tests call it directly)."""

    def __init__(self, course_dir: str | Path, exchange: str | Path, pool, timeout: int = 120,
                 term_file: str | Path | None = None, check_owner: bool = False):
        self.course_dir, self.exchange = Path(course_dir).resolve(), Path(exchange)
        self.inbound = self.exchange / COURSE_ID / "inbound"
        self.pool, self.timeout, self.term_file = pool, timeout, term_file
        # Where each learner is a unix user, the exchange's inbound folder is writable by all of them:
        # only the folder's owner tells who submitted it (nbgrader's collect merely warns).
        self.check_owner = check_owner
        self.ledger = Ledger(self.course_dir)
        with self.ledger.lock:  # what a stopped service was grading is graded again
            for entry in self.ledger.entries.values():
                if entry.status == GRADING:
                    entry.status, entry.reason = QUEUED, shown("queued again: the grading service restarted")
            self.ledger.save()
        self.stopping = threading.Event()
        self.policy = PolicyFile(self.course_dir, term_file)

    def term(self):
        return self.policy.current()  # None while term.toml has an error (grader.classroom.term.PolicyFile)

    def totals(self) -> dict:
        """The gradebook's totals (grader.classroom.total) the pages show, by the term's late policy."""
        term = self.term()
        return course_totals(self.course_dir, term.policy) if term else {}

    # ------------------------------------------------------------ the queue
    def scan(self) -> list[Entry]:
        """New inbound folders into the ledger, each admitted, held or refused by the policy."""
        if not self.inbound.is_dir():
            return []
        term, added = self.term(), []
        for entry in reversed([e for e in self.ledger.of() if e.reason == WAITING] if term else []):
            with self.ledger.lock:  # admitted as if new, oldest first
                entry.reason = ""
                del self.ledger.entries[entry.id]
                self._admit(entry, term)
                self.ledger.entries[entry.id] = entry
                self.ledger.save()
        new = [p for p in self.inbound.iterdir() if p.is_dir() and p.name not in self.ledger.entries]
        parsed = [(p, parse_inbound(p.name)) for p in new]
        for path, info in sorted((x for x in parsed if x[1]), key=lambda x: x[1][2]):
            student, assignment, when = info
            if not (path / TIMESTAMP_FILE).is_file() and time.time() - path.stat().st_mtime < 5:
                continue  # nbgrader is still copying it in: next round
            entry = Entry(path.name, student, assignment, when.isoformat(), seen_at=now().isoformat())
            with self.ledger.lock:
                owner = owner_of(path) if self.check_owner else student
                links = [p.name for p in path.rglob("*") if p.is_symlink()]
                if not SAFE_NAME.fullmatch(student) or student in (".", ".."):  # it becomes a folder name
                    entry.status, entry.reason = REFUSED, shown("not graded: not a learner name the grader accepts")
                elif links:  # the grading user could read what a link names (the class's source notebooks)
                    entry.status, entry.reason = REFUSED, shown(f"not graded: the submission holds links ({links[0]})")
                elif owner != student:
                    entry.status = REFUSED
                    entry.reason = shown(f"not graded: the folder names {student} but the unix user {owner} wrote it")
                elif term is None:
                    entry.reason = WAITING  # queued, admitted once the term file is fixed
                else:
                    self._admit(entry, term)
                self.ledger.entries[entry.id] = entry
                self.ledger.save()
            added.append(entry)
        return added

    def _admit(self, entry: Entry, term) -> None:
        if entry.assignment not in {c.assignment for c in CHAPTERS}:
            entry.status, entry.reason = HELD, shown("not a chapter of this course")
            return
        policy = term.submit_policy(entry.assignment)
        due = term.due_for(entry.student, entry.assignment)
        submitted = datetime.fromisoformat(entry.submitted_at)
        if not policy.enabled:
            entry.status, entry.reason = HELD, shown("this chapter is graded by your instructor, not on submit")
            return
        if due is not None and submitted > due and policy.after_due == "hold":
            entry.status, entry.reason = HELD, shown("submitted after the due date: your instructor grades it")
            return
        earlier = [e for e in self.ledger.of(entry.student, entry.assignment) if e.status in ATTEMPTS]
        waiting = [e for e in earlier if e.status == QUEUED]
        done = [e for e in earlier if e.status != QUEUED]
        used = len(done)
        if policy.attempts is not None and used >= policy.attempts:
            entry.status = REFUSED
            entry.reason = (shown(f"not graded: 1 attempt allowed for this chapter, and you have used {used}")
                            if policy.attempts == 1 else
                            shown(f"not graded: {policy.attempts} attempts allowed for this chapter, and you have used "
                                  f"{used}"))
            return
        if done and policy.min_seconds_between:
            last = max(datetime.fromisoformat(e.submitted_at) for e in done)
            ready = last.timestamp() + policy.min_seconds_between
            if submitted.timestamp() < ready:
                at = datetime.fromtimestamp(ready, timezone.utc).strftime("%H:%M:%S UTC")
                entry.status = REFUSED
                entry.reason = shown(f"not graded: wait {policy.min_seconds_between / 60:g} min between attempts "
                                     f"(next from {at})")
                return
        for old in waiting:  # one place in the queue per learner and chapter: the newest submission
            old.status, old.reason = SUPERSEDED, shown("replaced in the queue by a newer submission")
        entry.status = QUEUED

    # ------------------------------------------------------------ grading
    def step(self) -> list[Entry]:
        """Scan, then grade what is queued (a batch per chapter and feedback kind); the entries graded."""
        self.scan()
        queued = [e for e in self.ledger.of() if e.status == QUEUED]
        if not queued:
            return []
        term = self.term()
        if term is None:
            return []
        batches: dict[tuple[str, bool], list[Entry]] = {}
        for entry in sorted(queued, key=lambda e: e.submitted_at):
            score_only = hides_messages(policy_for(term, entry), datetime.fromisoformat(entry.submitted_at))
            batches.setdefault((entry.assignment, score_only), []).append(entry)
        graded = []
        for (assignment, score_only), entries in batches.items():
            graded += self._grade(assignment, entries, term, score_only)
        return graded

    def _grade(self, assignment: str, entries: list[Entry], term, score_only: bool, release: bool = True):
        chapter = find_chapter(assignment)
        work = self.course_dir / STATE_DIR / "work"
        shutil.rmtree(work, ignore_errors=True)
        with self.ledger.lock:
            for entry in entries:
                entry.status, entry.reason = GRADING, ""
                self.ledger.save()
                # What `nbgrader collect --student` does (timestamp and submission secret with it, which
                # release_feedback needs), and a copy to grade from (grading stages the repaired notebook).
                collected = self.course_dir / "submitted" / entry.student / assignment
                shutil.rmtree(collected, ignore_errors=True)
                shutil.copytree(self.inbound / entry.id, collected, symlinks=True)
                shutil.copytree(self.inbound / entry.id, work / entry.student / assignment, symlinks=True)
        try:
            _, results = autograde_with(self.pool, work, self.course_dir, timeout=self.timeout, chapters=[chapter],
                                        progress=False, term=term, feedback_for=[e.student for e in entries],
                                        score_only=score_only)
        except Exception as err:  # noqa: BLE001 - recorded for these learners; the service goes on
            with self.ledger.lock:
                for entry in entries:
                    entry.status, entry.reason = FAILED, shown(f"the grader failed: {type(err).__name__}: {err}")[:500]
                self.ledger.save()
            return entries
        by_student = {r["student"]: r for r in results}
        api = nbgrader_api(CourseDir(self.course_dir, [chapter], timeout=self.timeout), exchange=self.exchange)
        for entry in entries:
            self._record(entry, by_student.get(entry.student), chapter, api if release else None, score_only)
        if release:
            self._keep_best(chapter, entries, term)
        return entries

    def _record(self, entry: Entry, result: dict | None, chapter, api, score_only: bool) -> None:
        """The course's one total (grader.classroom.total, as grading.result_of reads it): written answers
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
            self.ledger.save()

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
            if best is not entry and best.status == GRADED and (best.score or 0) > (entry.score or 0):
                again.append(best)
        if again:
            kept = {e.id: (e.status, e.feedback, e.graded_at) for e in again}
            self._grade(chapter.assignment, again, term, score_only=False, release=False)
            with self.ledger.lock:
                for e in again:
                    e.status, e.feedback, e.graded_at = kept[e.id]
                    e.counted = True
                self.ledger.save()

    def serve(self, poll: float = 1.0) -> None:
        """Grade until stopped (stop()); a round that fails is logged and the next one goes on."""
        while not self.stopping.is_set():
            try:
                graded = self.step()
            except Exception as err:  # noqa: BLE001 - the service outlives one bad round; the ledger keeps state
                print(f"grading service: {type(err).__name__}: {err}", flush=True)
                graded = []
            if not graded:
                self.stopping.wait(poll)

    def stop(self) -> None:
        self.stopping.set()


def owner_of(path: Path) -> str:
    """The unix user who owns a file (its uid when the user is unknown)."""
    uid = path.stat().st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"

"""Whether a submission the grading service found may join the queue (grader.classroom.onsubmit.service): the
chapter, term.toml's [on_submit] policy (grader.classroom.policy.submitpolicy) for this learner, and the
per-learner bounds on the shared queue: attempts, time between attempts, submissions per hour, one
place in the queue per learner and chapter. Every time compared is the service's own (the ledger's),
range-checked as it is read (grader.classroom.ledger.checked_time).
"""
from __future__ import annotations

from datetime import datetime, timezone

from grader.boundary.score import shown
from grader.chapters import CHAPTERS
from grader.classroom.ledger import ATTEMPTS, HELD, QUEUED, REFUSED, SUPERSEDED, Entry, Ledger, checked_time


def admit(ledger: Ledger, entry: Entry, term) -> list[Entry]:
    """Set the entry queued, held or refused; returns the entries it replaced in the queue (superseded)."""
    if entry.assignment not in {c.assignment for c in CHAPTERS}:
        entry.status, entry.reason = HELD, shown("not a chapter of this course")
        return []
    policy = term.submit_policy(entry.assignment, entry.student)  # with the learner's accommodation
    due = term.due_for(entry.student, entry.assignment)
    submitted = checked_time(entry.submitted_at)
    if not policy.enabled:
        entry.status, entry.reason = HELD, shown("this chapter is graded by your instructor, not on submit")
        return []
    if due is not None and submitted > due and policy.after_due == "hold":
        entry.status, entry.reason = HELD, shown("submitted after the due date: your instructor grades it")
        return []
    refusal = refused(ledger, entry, policy, submitted)
    if refusal:
        entry.status, entry.reason = REFUSED, refusal
        return []
    waiting = [e for e in ledger.of(entry.student, entry.assignment) if e.status == QUEUED and e is not entry]
    for old in waiting:  # one place in the queue per learner and chapter: the newest submission
        old.status, old.reason = SUPERSEDED, shown("replaced in the queue by a newer submission")
    ledger.put(*waiting)
    entry.status = QUEUED
    return waiting


def refused(ledger: Ledger, entry: Entry, policy, submitted: datetime) -> str | None:
    """Why the policy refuses this entry now (attempts used, time between, rate); None: it may be graded.
    An attempt is used once it was graded (a grading the grader itself failed is not one)."""
    done = [e for e in ledger.of(entry.student, entry.assignment) if e.used_attempt and e is not entry]
    used = len(done)
    if policy.attempts is not None and used >= policy.attempts:
        return (shown(f"not graded: 1 attempt allowed for this chapter, and you have used {used}")
                if policy.attempts == 1 else
                shown(f"not graded: {policy.attempts} attempts allowed for this chapter, and you have used "
                      f"{used}"))
    if done and policy.min_seconds_between:
        last = max(checked_time(e.submitted_at) for e in done)
        ready = last.timestamp() + policy.min_seconds_between
        if submitted.timestamp() < ready:
            at = datetime.fromtimestamp(ready, timezone.utc).strftime("%H:%M:%S UTC")
            return shown(f"not graded: wait {policy.min_seconds_between / 60:g} min between attempts "
                         f"(next from {at})")
    hour_ago = checked_time(entry.seen_at).timestamp() - 3600
    recent = [e for e in ledger.of(entry.student) if e is not entry and e.status in ATTEMPTS
              and e.seen_at and checked_time(e.seen_at).timestamp() > hour_ago]
    if len(recent) >= policy.per_hour:
        return shown(f"not graded: at most {policy.per_hour} submissions an hour are graded on submit")
    return None

"""What a learner may see of a graded ledger entry: one function, `learner_view`, that every learner page,
JSON route (`api/mine`) and feedback link of the grading service goes through (grader.classroom.onsubmit.pages,
grader.classroom.onsubmit.web). Nothing else decides it.

The checks' messages are hidden before the due date when the chapter's policy says `feedback_before_due =
"score"`, or when the entry was graded under that policy (its feedback file shows scores only); no due date
means "before". A feedback file that shows the messages is linked only while the messages may be seen.

The grade shown is the gradebook's one total (grader.classroom.grades.total) for the attempt the gradebook holds
(it follows hand grades and regrades), with its written answers still pending; any other attempt shows
what it was graded at.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from grader.classroom.ledger import FAILED, GRADED, Entry


@dataclass(frozen=True)
class Policy:
    feedback_before_due: str = "checks"  # "checks" or "score" (grader.classroom.policy.submitpolicy)
    due: datetime | None = None  # the learner's due date for the chapter (their extension, else the chapter's)


def policy_for(term, entry: Entry) -> Policy:
    """The policy that holds for `entry` now; without a term (none, or one that does not read) the policy
    the entry was graded under."""
    if term is None:
        return Policy("score" if entry.score_only else "checks")
    return Policy(term.submit_policy(entry.assignment).feedback_before_due,
                  term.due_for(entry.student, entry.assignment))


@dataclass(frozen=True)
class Check:
    name: str
    score: float
    max_score: float
    message: str | None  # None: hidden by the policy


@dataclass(frozen=True)
class LearnerView:
    entry: Entry
    scored: bool  # graded or failed: a score to show
    messages: bool  # the checks' messages may be seen
    checks: tuple[Check, ...]
    feedback: bool  # the feedback file may be linked
    score: float | None = None  # after the late penalty; None: nothing graded to show
    raw_score: float | None = None
    max_score: float | None = None
    penalty: float = 0.0
    pending: tuple[str, ...] = ()  # written answers not yet graded by hand

    def as_json(self) -> dict:
        """The entry as `api/mine` returns it: the ledger's fields a learner may see."""
        e = self.entry
        return {"id": e.id, "key": e.key, "student": e.student, "assignment": e.assignment,
                "submitted_at": e.submitted_at, "status": e.status, "reason": e.reason, "lang": e.lang,
                "graded_at": e.graded_at, "counted": e.counted, "score_only": not self.messages,
                "score": self.score, "raw_score": self.raw_score, "max_score": self.max_score,
                "penalty": self.penalty, "pending": list(self.pending),
                "feedback": e.feedback if self.feedback else None,
                "checks": [{"name": c.name, "score": c.score, "max_score": c.max_score,
                            **({"error": c.message} if self.messages else {})} for c in self.checks]}


def hides_messages(policy: Policy, at: datetime) -> bool:
    """Whether `policy` hides the checks' messages at `at` (also: whether a submission of then gets
    feedback with scores only, grader.classroom.onsubmit.service)."""
    return (policy.due is None or at <= policy.due) and policy.feedback_before_due == "score"


def learner_view(entry: Entry, policy: Policy, now: datetime, total=None) -> LearnerView:
    """What the learner who submitted `entry` may see of it at `now` under `policy`; `total`: the gradebook's
    total of the learner's chapter (grader.classroom.grades.total.Total), which the counted attempt shows."""
    scored = entry.status in (GRADED, FAILED) and entry.score is not None
    before_due = policy.due is None or now <= policy.due
    hidden = hides_messages(policy, now) or (before_due and entry.score_only)
    checks = tuple(Check(str(c.get("name", "")), float(c.get("score") or 0), float(c.get("max_score") or 0),
                         None if hidden else (c.get("error") or ""))
                   for c in (entry.checks if scored else []))
    feedback = entry.feedback is not None and (entry.score_only or not hidden)
    if not scored:
        return LearnerView(entry, scored, not hidden, checks, feedback)
    if total is not None and entry.counted:
        grade = (total.score, total.raw, total.max_score, total.penalty, tuple(total.pending))
    else:
        grade = (entry.score, entry.raw_score, entry.max_score, entry.penalty, tuple(entry.pending))
    return LearnerView(entry, scored, not hidden, checks, feedback, *grade)

"""The grading service's pages, as HTML strings from the ledger (grader.classroom.onsubmit.service): what a
learner sees of their own submissions, and the instructor's view of the class. No web framework
here, so `make test` checks them without a hub; grader.classroom.onsubmit.web serves them."""
from __future__ import annotations

import hashlib
from datetime import datetime
from html import escape
from pathlib import Path

from grader.boundary.score import points, shown
from grader.chapters import CHAPTERS
from grader.classroom.grades.requests import NOTE_LIMIT, OPEN, items_of
from grader.classroom.ledger import FAILED, GRADED, GRADING, HELD, QUEUED, REFUSED, Entry, Ledger, now
from grader.classroom.phrasebook import Phrasebook, phrasebook
from grader.classroom.policy.submitpolicy import PER_CHAPTER
from grader.classroom.policy.visibility import Check, LearnerView, Policy, learner_view, policy_for

# What a learner's page says of each status, in their language (the class's page keeps the status names).
STATUS = {"queued": shown("queued"), "grading": shown("grading"), "graded": shown("graded"), "failed": shown("failed"),
          "refused": shown("refused"), "held": shown("held"), "superseded": shown("superseded")}
ENGLISH = phrasebook("en")
REQUEST_STATUS = {"open": shown("open: not answered yet"), "accepted": shown("accepted"),
                  "declined": shown("declined")}
TIME_LIMIT = shown("time limit: {minutes:g} min")
NOTHING_YET = shown("No submissions yet. Submit a chapter from the Assignments panel; it appears here within seconds.")

STYLE = """<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; } td, th { border: 1px solid #ccc; padding: .35em .6em; }
th { background: #f3f3f3; text-align: left; } .graded { color: #176b2c; } .failed, .refused { color: #a4161a; }
.queued, .grading { color: #8a5a00; } .held, .superseded { color: #666; } .check { font-size: .9em; color: #a4161a; }
td.refused, td.held { font-weight: bold; } tr.refused, tr.held { background: #fbf3f3; }
.check { white-space: pre-wrap; overflow-wrap: anywhere; } .problem { border: 2px solid #a4161a; padding: .5em; }
.note { white-space: pre-wrap; overflow-wrap: anywhere; max-width: 40em; }
form label { display: block; margin: .3em 0; } textarea { width: 30em; height: 5em; }
</style>"""
FOLD_AT = 300  # characters: a longer check's message folds (<details>), shown whole when opened


def _when(iso: str | None) -> str:
    return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S UTC") if iso else ""


def _score(view: LearnerView, book: Phrasebook = ENGLISH, learner: bool = True) -> str:
    """A graded attempt's score as `view` shows it (the counted one's: the gradebook's total)."""
    if view.score is None:
        return ""
    text = f"{points(view.score)} / {points(view.max_score or 0)}"
    if view.penalty:
        text += book.say(shown(" (raw {raw:g}, late penalty −{penalty:g})"), raw=round(view.raw_score or 0, 2),
                         penalty=round(view.penalty, 2))
    if view.pending:
        text += book.say(shown(" · {count} written answer(s) pending: not yet graded by hand"),
                         count=len(view.pending))
    if view.entry.counted:
        text += book.say(shown(" · your grade")) if learner else " · counted"
    return text


def _check(check: Check) -> str:
    """One failing check, whole: a long message folds, its first line showing."""
    head = f"{check.name.removeprefix('test_')}: {points(check.score)} / {points(check.max_score)} — "
    error = check.message or ""
    if len(error) <= FOLD_AT:
        return f'<div class="check">{escape(head + error)}</div>'
    return (f'<details class="check"><summary>{escape(head + error[:FOLD_AT // 2].rsplit(" ", 1)[0])} …</summary>'
            f"{escape(error)}</details>")


def _checks(view: LearnerView, book: Phrasebook) -> str:
    """What the checks found, as much as the learner may see (grader.classroom.policy.visibility)."""
    if view.entry.status != GRADED or not view.messages:
        return escape(book.say(shown("scores only until the due date"))) if view.entry.status == GRADED else ""
    found = "".join(_check(c) for c in view.checks if c.score < c.max_score)
    return found or escape(book.say(shown("all checks pass")))


def _language(entries: list[Entry]) -> Phrasebook:
    """A learner's page speaks the language of the newest notebook of theirs that was graded."""
    graded = [e for e in entries if e.graded_at]
    return phrasebook(max(graded, key=lambda e: e.graded_at).lang if graded else "en")


def page(title: str, body: str) -> str:
    return f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>{STYLE}</head>" \
           f"<body>{body}</body></html>"


def _ask_form(entry: Entry, items: list[str], base: str, xsrf: str, say) -> str:
    """A graded row's regrade request: one item of it and a note (grader.classroom.grades.requests)."""
    if not items:
        return ""
    options = "".join(f'<option value="{escape(i)}">{escape(i)}</option>' for i in items)
    return (f'<details><summary>{say(shown("ask for a regrade"))}</summary>'
            f'<form method="post" action="{base}requests">{xsrf}'
            f'<input type="hidden" name="key" value="{entry.key}">'
            f'<label>{say(shown("about"))} <select name="item">{options}</select></label>'
            f'<label>{say(shown("why (plain text)"))}<br><textarea name="note" maxlength="{NOTE_LIMIT}" required>'
            f'</textarea></label><button type="submit">{say(shown("send the request"))}</button></form></details>')


def _my_requests(requests: list, book: Phrasebook) -> str:
    """The learner's requests and their answers."""
    if not requests:
        return ""
    heads = (shown("chapter"), shown("about"), shown("your note"), shown("status"), shown("the answer"))
    rows = "".join(f"<tr><td>{escape(r.assignment)}</td><td>{escape(r.item)}</td>"
                   f'<td class="note">{escape(r.note)}</td>'
                   f"<td>{escape(book.say(REQUEST_STATUS.get(r.status, r.status)))}</td>"
                   f'<td class="note">{escape(r.reason)}'
                   + (escape(book.say(shown(" (new score: {points:g})"), points=r.points)) if r.points is not None
                      else "") + "</td></tr>" for r in requests)
    return (f"<h2>{escape(book.say(shown('Your regrade requests')))}</h2><table><tr>"
            + "".join(f"<th>{escape(book.say(h))}</th>" for h in heads) + f"</tr>{rows}</table>")


def message_page(text: str, back: str) -> str:
    """Why a form was refused, and the way back."""
    return page("Not done", f'<p class="problem">{escape(text)}</p><p><a href="{escape(back)}">back</a></p>')


def learner_page(ledger: Ledger, student: str, base: str, instructor: bool = False, totals: dict | None = None,
                 term=None, requests: list | None = None, xsrf: str = "") -> str:
    """The learner's own submissions of each chapter, newest first; nobody else's; in the language of
    their newest graded notebook (grader.classroom.phrasebook); as much as `term`'s policy lets them see
    (grader.classroom.policy.visibility). `totals`: (student, assignment) -> the gradebook's total
    (grader.classroom.grades.total), which the counted attempt shows; `requests`: theirs
    (grader.classroom.grades.requests),
    each graded row offering a form for another (`xsrf`: the form's token field); `instructor`: staff."""
    entries = ledger.of(student=student)
    book = _language(entries)

    def say(text: str, **values) -> str:
        return escape(book.say(text, **values))

    rows, totals, requests = [], totals or {}, requests or []
    allowed = term.requests_per_chapter if term is not None else PER_CHAPTER
    asked = {a: sum(r.assignment == a for r in requests) for a in {e.assignment for e in entries}}
    for entry in entries:
        view = learner_view(entry, policy_for(term, entry), now(), totals.get((entry.student, entry.assignment)))
        link = (f'<a href="{base}feedback/{entry.key}">{say(shown("feedback"))}</a>' if view.feedback else "")
        status = say(STATUS.get(entry.status, entry.status))
        if entry.time_limit and entry.status in (GRADING, GRADED, FAILED):  # what this notebook was allowed
            status += f"<br><small>{say(TIME_LIMIT, minutes=round(entry.time_limit / 60, 1))}</small>"
        score = _score(view, book) + _as_graded(view, book)
        may_ask = asked[entry.assignment] < allowed  # a form only while the chapter's requests last
        ask = _ask_form(entry, items_of(entry, totals.get((entry.student, entry.assignment))), base, xsrf, say) \
            if may_ask else ""
        rows.append(f'<tr class="{entry.status}"><td>{escape(entry.assignment)}</td>'
                    f"<td>{_when(entry.submitted_at)}</td>"
                    f'<td class="{entry.status}">{status}</td><td>{escape(score)}</td>'
                    f"<td>{escape(book.text(entry.reason))}{_checks(view, book)}</td><td>{link}{ask}</td></tr>")
    heads = (shown("chapter"), shown("submitted"), shown("status"), shown("score (after late penalty)"),
             shown("what the checks found"))
    table = ("<table><tr>" + "".join(f"<th>{say(h)}</th>" for h in heads) + "<th></th></tr>" + "".join(rows)
             + "</table>") if rows else \
        f"<p>{say(NOTHING_YET)}</p>"
    more = f'<p><a href="{base}class">The class</a></p>' if instructor else ""
    return page(book.say(shown("Your submissions")),
                f"<h1>{say(shown('Your submissions, {student}'), student=student)}</h1>{table}"
                f"<p>{say(shown('Your feedback also arrives through Fetch Feedback in the Assignments panel.'))}</p>"
                + _where_you_stand(entries, term, book) + _my_requests(requests, book) + more)


def _as_graded(view: LearnerView, book: Phrasebook) -> str:
    """The counted attempt's score as it was graded, beside the total that counts now, when they differ
    (hand grades, written answers pending, a regrade): a learner's page never changes a number silently."""
    e = view.entry
    if not e.counted or e.score is None or view.score is None or (e.score, e.max_score) == (view.score, view.max_score):
        return ""
    return book.say(shown(" (this attempt as graded: {score} / {max_score})"), score=points(e.score),
                    max_score=points(e.max_score or 0))


def _where_you_stand(entries: list[Entry], term, book: Phrasebook) -> str:
    """Per chapter the learner submitted: their due date (with their own extension) and the attempts left
    before a submission is refused (grader.classroom.policy.admission)."""
    if term is None or not entries:
        return ""
    items = []
    for assignment in sorted({e.assignment for e in entries}):
        student = entries[0].student
        parts = []
        due = term.due_for(student, assignment)
        if due is not None:
            extended = (student, assignment) in term.extensions
            parts.append(book.say(shown("due {when} (your extension)") if extended else shown("due {when}"),
                                  when=due.strftime("%Y-%m-%d %H:%M UTC")))
        allowed = term.submit_policy(assignment, student).attempts
        if allowed is not None:
            used = sum(e.used_attempt for e in entries if e.assignment == assignment)
            parts.append(book.say(shown("{left} of {allowed} attempts left"), left=max(0, allowed - used),
                                  allowed=allowed))
        if parts:
            items.append(f"<li>{escape(assignment)}: {escape(' · '.join(parts))}</li>")
    return f"<h2>{escape(book.say(shown('Due dates and attempts')))}</h2><ul>{''.join(items)}</ul>" if items else ""


def batch_key(student: str, assignment: str) -> str:
    """The feedback route's key of a learner's feedback in nbgrader's feedback folder (graded in batch:
    no ledger entry); not an entry's key (those hash the inbound folder's name, which has no "/")."""
    return hashlib.sha256(f"feedback/{student}/{assignment}".encode()).hexdigest()[:16]


def batch_feedback(course_dir: Path) -> dict[tuple[str, str], Path]:
    """(student, assignment) -> the feedback file nbgrader's generate_feedback wrote for it (`grader autograde`,
    Formgrader): `<course dir>/feedback/<student>/<assignment>/<notebook>.html`, regular files only (a link
    is not followed)."""
    found = {}
    for chapter in CHAPTERS:
        for folder in (Path(course_dir) / "feedback").glob(f"*/{chapter.assignment}"):
            html = folder / f"{chapter.name}.html"
            if not any(p.is_symlink() for p in (folder.parent, folder, html)) and html.is_file():
                found[(folder.parent.name, chapter.assignment)] = html
    return found


def _answer_form(request, base: str, xsrf: str) -> str:
    return (f'<form method="post" action="{base}requests/{escape(request.id)}/answer">{xsrf}'
            '<label><select name="decision"><option value="accept">accept</option>'
            '<option value="decline">decline</option></select> '
            '<input name="points" type="number" min="0" step="any" placeholder="new hand score (optional)"></label>'
            f'<label><input name="reason" maxlength="{NOTE_LIMIT}" placeholder="reason (needed to decline)" size="40">'
            '</label><button type="submit">answer</button></form>')


def _context_cells(context, base: str) -> str:
    """The item's score now, the check's message or the learner's answer (text), the Formgrader link."""
    if context is None:
        return "<td></td><td></td>"
    root = base[:base.index("services/")] if "services/" in base else "/"  # the hub's root
    link = f' <a href="{escape(root + context.formgrader)}">Formgrader</a>' if context.formgrader else ""
    return f"<td>{escape(context.score)}{link}</td><td class=\"note\"><pre>{escape(context.said)}</pre></td>"


def _requests_section(requests: list, base: str, xsrf: str, contexts: dict | None = None) -> str:
    """Every regrade request, open ones first, each with its context (grader.classroom.grades.requests.contexts) and
    each open one with its answer form."""
    ordered, contexts = sorted(requests, key=lambda r: (r.status != OPEN, r.asked_at)), contexts or {}
    rows = "".join(f"<tr><td>{escape(r.student)}</td><td>{escape(r.assignment)}</td><td>{escape(r.item)}</td>"
                   f"{_context_cells(contexts.get(r.id), base)}"
                   f'<td class="note">{escape(r.note)}</td><td>{_when(r.asked_at)}</td>'
                   f"<td>{escape(r.status)}</td><td>"
                   + (_answer_form(r, base, xsrf) if r.status == OPEN else
                      escape(f"{r.answered_by}: {r.reason}" + (f" (points {r.points:g})" if r.points is not None
                                                               else "")))
                   + "</td></tr>" for r in ordered)
    table = ("<table><tr><th>learner</th><th>chapter</th><th>item</th><th>score now</th>"
             "<th>the check's message or the answer</th><th>note</th><th>asked</th><th>status</th>"
             f"<th>answer</th></tr>{rows}</table>") if rows else "<p>none</p>"
    return f"<h2>Regrade requests</h2><p>{sum(r.status == OPEN for r in requests)} open.</p>{table}"


def _accommodations_section(accommodations: dict, terms: bool) -> str:
    """Each learner's accommodation; its terms only for the instructor, or graders the term lets see them."""
    items = "".join(f"<li>{escape(a.student)} · {escape(a.assignment)}: "
                    f"{escape(a.text()) if terms else HIDDEN_TERMS}</li>" for _, a in sorted(accommodations.items()))
    return f"<h2>Accommodations</h2><ul>{items or '<li>none</li>'}</ul>"


HIDDEN_TERMS = "an accommodation (its terms are the instructor's: term.toml's [graders] see_accommodations)"


def class_page(ledger: Ledger, totals: dict | None = None, base: str = "", problem: str | None = None,
               batch: dict | None = None, requests: list | None = None, accommodations: dict | None = None,
               xsrf: str = "", contexts: dict | None = None, accommodation_terms: bool = True,
               extensions: dict | None = None, mistakes: dict | None = None, lms: str = "") -> str:
    """The instructor's view: the queue; per learner and chapter the gradebook's total (grader.classroom.grades.total:
    hand grades, regrades, learners graded in batch), else the counted attempt's score, linked to its
    feedback (`batch`: (student, assignment) -> the feedback file of a learner graded in batch, served by
    batch_key); held, refused and failed submissions; `problem`: the term file's error, while it has one;
    the regrade requests (grader.classroom.grades.requests) with their `contexts` and a form to answer each open one
    (`xsrf`: its token field), and each learner's accommodations (grader.classroom.policy.accommodations;
    `accommodation_terms`: with their terms); `lms`: the scores waiting for the LMS (grader.classroom.lti.page)."""
    entries, totals, batch = ledger.of(), totals or {}, batch or {}
    waiting = [e for e in entries if e.status in (QUEUED, GRADING)]
    students = sorted({e.student for e in entries} | {s for s, _ in totals})
    chapters = [c.assignment for c in CHAPTERS
                if any(e.assignment == c.assignment for e in entries) or any(a == c.assignment for _, a in totals)]
    head = "".join(f"<th>{escape(a)}</th>" for a in chapters)
    rows = []
    for student in students:
        cells = []
        for assignment in chapters:
            mine = ledger.of(student, assignment)
            counted = next((e for e in mine if e.counted), None)
            latest = mine[0] if mine else None
            total = totals.get((student, assignment))
            text = total.text() if total else _score(learner_view(counted, Policy(), now()), learner=False) \
                if counted else \
                (latest.status if latest else "")
            shown_with = next((e for e in [counted, latest] if e is not None and e.feedback), None)
            key = shown_with.key if shown_with else batch_key(student, assignment) \
                if (student, assignment) in batch else None
            link = f' <a href="{base}feedback/{key}">feedback</a>' if key else ""
            count = f" <small>({len(mine)} submitted)</small>" if mine else ""
            cells.append(f"<td>{escape(text)}{count}{link}</td>")
        rows.append(f"<tr><td>{escape(student)}</td>{''.join(cells)}</tr>")
    failures = "".join(f"<li>{escape(e.student)} · {escape(e.assignment)} · {_when(e.submitted_at)}: "
                       f'<span class="{e.status}">{e.status}</span> {escape(e.reason)}</li>'
                       for e in entries if e.status in (FAILED, REFUSED, HELD))
    warning = (f'<p class="problem">The term file has an error; submissions wait until it is fixed: '
               f"{escape(problem)}</p>") if problem else ""
    return page("The class", f"<h1>The class</h1>{warning}<p>Queue: {len(waiting)} waiting "
                f"({sum(e.status == GRADING for e in waiting)} grading now).</p>"
                f"<table><tr><th>learner</th>{head}</tr>{''.join(rows)}</table>"
                f"<h2>Held, refused or failed</h2><ul>{failures or '<li>none</li>'}</ul>"
                + _requests_section(requests or [], base, xsrf, contexts)
                + _accommodations_section(accommodations or {}, accommodation_terms)
                + _extensions_section(extensions or {}, accommodations or {}, accommodation_terms)
                + _mistakes_section(mistakes or {}) + lms)


def _mistakes_section(mistakes: dict) -> str:
    """Per chapter, the named mistakes the class makes most (grader.classroom.grades.mistakes): what to teach next."""
    parts = []
    for assignment, found in mistakes.items():
        rows = "".join(f"<tr><td>{learners}</td><td>{escape(exercise)}</td><td class=\"note\">{escape(said)}</td></tr>"
                       for exercise, said, learners in found)
        parts.append(f"<h3>{escape(assignment)}</h3><table><tr><th>learners</th><th>exercise</th>"
                     f"<th>likely mistake (the notebook's own check)</th></tr>{rows}</table>")
    return "<h2>What the class gets wrong</h2>" + ("".join(parts) or "<p>no named mistake yet</p>")


def _extensions_section(extensions: dict, accommodations: dict, terms: bool) -> str:
    """The term's extensions, (student, assignment) -> due date, as the grading applies them. A due date that
    comes from an accommodation (accommodations.merge_due put it there) is one of its terms: without `terms`
    it shows as "an accommodation", never as the date."""
    def due_text(key, due):
        hidden = not terms and key in accommodations and accommodations[key].due is not None
        return "an accommodation" if hidden else f"due {due:%Y-%m-%d %H:%M UTC}"

    items = "".join(f"<li>{escape(student)} · {escape(assignment)}: {due_text((student, assignment), due)}</li>"
                    for (student, assignment), due in sorted(extensions.items()))
    return f"<h2>Extensions</h2><ul>{items or '<li>none</li>'}</ul>"

"""The class page's "LMS gradebook" section (grader.classroom.lti.page), attacked in a real headless Chromium.

Its values come from the course directory's on-submit/lti-outbox.json: the LMS's error text of a failed post
(an LMS under someone else's control answers what it likes) and what the file holds for each score waiting
(the learner's name in its key, the score, the progress, the tries). Each carries markup that would add
" PWNED-<name>" to document.title if it ran; the page, opened without the service's script-free CSP (the
escaping alone must hold), must show each as text and run none. The section lists what the LMS has not
accepted, so every attacked entry is still there to be read.
"""
from __future__ import annotations

import json

from grader.classroom.ledger import Ledger
from grader.classroom.lti.outbox import Outbox
from grader.classroom.onsubmit.pages import class_page
from tests.adversarial.test_pages import browser, open_page, pwn, scripts_that_ran  # noqa: F401
from tests.test_browser import OUTPUT
from tests.test_lti import total

CHAPTER = "03_positional_encoding"
ATTACKS = {  # each shown on the page as the text it is
    "error": f'<img src="x" onerror="{pwn("lms-error")}">the LMS is down<script>{pwn("lms-error-script")}</script>',
    "learner": f'<img src=x onerror="{pwn("lms-learner")}">',
    "progress": f"<script>{pwn('lms-progress')}</script>",
    "score": f'<svg onload="{pwn("lms-score")}"></svg>',
    "tries": f'<img src=x onerror="{pwn("lms-tries")}">',
}


def attacked_outbox(course) -> None:
    """A post the LMS refused with markup in its error (through Outbox.flush, as the grading service keeps it),
    and an entry whose every field the file holds carries markup."""
    outbox = Outbox(course)
    outbox.update({("ada", CHAPTER): total("ada", pending=True)}, {"ada": "sub-ada"}, now=0.0)
    outbox.flush(lambda assignment, want: (_ for _ in ()).throw(OSError(ATTACKS["error"])), now=0.0)
    outbox.entries[f"{ATTACKS['learner']}/{CHAPTER}"] = {
        "sent": None, "tries": ATTACKS["tries"], "due": 0, "error": ATTACKS["error"],
        "want": {"sub": "s", "score": ATTACKS["score"], "max_score": 10, "progress": ATTACKS["progress"],
                 "timestamp": "2026-11-28T22:00:00+00:00"}}
    outbox.save()


def test_markup_in_the_lms_section_is_text_and_runs_nothing(browser, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("COURSE_LTI", str(tmp_path / "lti"))  # the class is in an LMS: the section is drawn
    monkeypatch.setenv("COURSE_LEARNERS", "ada")
    from grader.classroom.lti.page import lms_section

    course = tmp_path / "course"
    attacked_outbox(course)
    assert json.loads((course / "on-submit" / "lti-outbox.json").read_text())  # the page reads this file
    view = tmp_path / "class.html"
    view.write_text(f"<html><head><title>class</title></head><body>"
                    f"{class_page(Ledger(course), lms=lms_section(course))}</body></html>")
    open_page(browser, view.as_uri())
    browser.screenshot(OUTPUT / "class-lms-section.png")
    ran = scripts_that_ran(browser)
    shown = browser.js("document.body.innerText")
    markup = browser.js("document.querySelectorAll('body img, body script, body svg').length")
    assert ran == "", ran
    assert markup == 0, browser.js("document.body.innerHTML")
    missing = [name for name, text in ATTACKS.items() if text not in shown]
    assert not missing, (missing, shown)

"""Regrade requests attacked in a real headless Chromium (grader.classroom.grades.requests, onsubmit_web): a learner
posts a note of markup and script through the learner page's own form (a sandboxed page: forms, no
script); the class page shows it as text and runs nothing; a POST without the XSRF token, or about another
learner's row, is refused. (Chromium: skipped without one unless COURSE_REQUIRE_BROWSER=1.)
"""
from __future__ import annotations

import html
import json
import time
import urllib.error
import urllib.parse
import urllib.request

from grader.classroom.grades.requests import Requests
from grader.classroom.ledger import GRADED, Entry
from tests.adversarial import test_pages
from tests.adversarial.test_pages import graded_entry, pwn
from tests.test_browser import wait_for

browser, service = test_pages.browser, test_pages.service  # the pages' fixtures: Chromium, the service's routes

NOTE = (f'<img src="x" onerror="{pwn("note-img")}"><script>{pwn("note-script")}</script>'
        f'</td></tr></table><svg onload="{pwn("note-svg")}"></svg><a href="javascript:void(0)">click</a>')

MESSAGE = f'FAIL </pre><img src="x" onerror="{pwn("message-img")}"><script>{pwn("message-script")}</script>'


def _node(browser, selector: str) -> int:
    root = browser.send("DOM.getDocument", depth=-1)["root"]["nodeId"]
    found = browser.send("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
    assert found, f"no {selector} on the page"
    return found


def _click(browser, selector: str) -> None:
    """A real mouse click (DevTools cannot evaluate script in a page the CSP sandboxes without scripts)."""
    node = _node(browser, selector)
    browser.send("DOM.scrollIntoViewIfNeeded", nodeId=node)
    quad = browser.send("DOM.getBoxModel", nodeId=node)["model"]["content"]
    x, y = (quad[0] + quad[4]) / 2, (quad[1] + quad[5]) / 2
    for kind in ("mousePressed", "mouseReleased"):
        browser.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


def _title(browser) -> str:
    return browser.send("Target.getTargetInfo")["targetInfo"]["title"]


def _load(browser, url: str) -> None:
    browser.send("Page.navigate", url=url)
    time.sleep(2)  # handlers and animations would have fired by now


def test_a_note_of_markup_posted_through_the_form_is_text_on_the_class_page(service, browser):
    svc, base = service
    entry = graded_entry(svc, tag="asked")
    entry.checks[0]["error"] = MESSAGE  # what a check said, shown beside the request: the learner's code wrote it
    svc.ledger.save()
    _load(browser, f"{base}/")
    assert _title(browser) == "Your submissions"
    browser.send("DOM.setAttributeValue", nodeId=_node(browser, "details"), name="open", value="")
    browser.send("DOM.setOuterHTML", nodeId=_node(browser, "textarea[name=note]"),
                 outerHTML=f'<textarea name="note">{html.escape(NOTE)}</textarea>')
    _click(browser, "form[action='/requests'] button")  # the browser posts it: its cookie and XSRF token
    wait_for(lambda: Requests(svc.course_dir).of("mal"), 20, "the request to arrive")
    [asked] = Requests(svc.course_dir).of("mal")
    assert (asked.key, asked.item, asked.note) == (entry.key, "test_softmax", NOTE)
    time.sleep(1)
    assert _title(browser) == "Your submissions"  # redirected back, nothing ran

    svc.instructors.add("mal")  # now the class page, as staff see it
    _load(browser, f"{base}/class")
    root = browser.send("DOM.getDocument", depth=-1)["root"]["nodeId"]
    page = browser.send("DOM.getOuterHTML", nodeId=root)["outerHTML"]
    assert _title(browser) == "The class", _title(browser)  # no script ran
    assert html.escape(NOTE, quote=False) in page  # the note is text
    assert html.escape(MESSAGE, quote=False) in page  # and the check's message beside it
    for tag in ("img", "script", "svg", "a[href^=javascript]"):
        assert browser.send("DOM.querySelectorAll", nodeId=root, selector=tag)["nodeIds"] == [], tag
    assert browser.send("DOM.querySelectorAll", nodeId=root, selector=f"form[action='/requests/{asked.id}/answer']"
                        )["nodeIds"]
    svc.instructors.discard("mal")


def _post(url: str, **fields) -> int:
    try:
        return urllib.request.urlopen(url, data=urllib.parse.urlencode(fields).encode(), timeout=10).status
    except urllib.error.HTTPError as error:
        return error.code


def test_a_post_without_the_token_or_about_another_learners_row_is_refused(service):
    svc, base = service
    mine = graded_entry(svc, tag="mine")
    theirs = Entry(id=mine.id.replace("mal+", "bea+"), student="bea", assignment=mine.assignment,
                   submitted_at=mine.submitted_at, status=GRADED, checks=mine.checks)
    svc.ledger.put(theirs)
    # no cookie, no token: refused before anything reads the form
    assert _post(f"{base}/requests", key=mine.key, item="test_softmax", note="x") == 403
    # a token copied from elsewhere, with no cookie that signs it
    assert _post(f"{base}/requests", key=mine.key, item="test_softmax", note="x", _xsrf="2|deadbeef|00|1") == 403
    assert _post(f"{base}/requests/0123456789abcdef/answer", decision="accept", reason="x") == 403
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    page = opener.open(f"{base}/", timeout=10).read().decode()
    token = page.split('name="_xsrf" value="', 1)[1].split('"', 1)[0]

    def post(**fields):
        try:
            return opener.open(f"{base}/requests", data=urllib.parse.urlencode(fields).encode(), timeout=10).status
        except urllib.error.HTTPError as error:
            return error.code

    assert post(key=theirs.key, item="test_softmax", note="x", _xsrf=token) == 404  # as if it did not exist
    assert Requests(svc.course_dir).all() == []
    assert post(key=mine.key, item="test_softmax", note="fine", _xsrf=token) == 200  # followed the 303 home
    assert json.loads(opener.open(f"{base}/api/requests", timeout=10).read())[0]["note"] == "fine"


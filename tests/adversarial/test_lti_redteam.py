"""Red team, LTI 1.3 (branch redlti48): attacks on the hub's launch endpoints, the class page's LMS gradebook
section and the grade passback. Each test asserts the SAFE outcome: a pass means the attack was held.

Hub-starting tests (integration) share one hub and one platform: tests/test_lti_hub.py's lti_class fixture."""
from __future__ import annotations

import base64
import json
import re
import time
import urllib.parse

import jwt
import pytest
import requests

from grader.classroom.lti import page as lti_page
from grader.classroom.lti.outbox import Outbox
from tests.test_browser import chromium, wait_for
from tests.test_lti_hub import CHAPTER, altered, answer, claims_of, intercepted_launch, lti_class  # noqa: F401

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
TA = "http://purl.imsglobal.org/vocab/lis/v2/membership#TeachingAssistant"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"


def b64(data) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def hub_alive(url: str) -> bool:
    try:
        return requests.get(f"{url}/hub/api", timeout=10).status_code == 200
    except requests.RequestException:
        return False


def login_initiation(hub_url: str, issuer: str, client_id: str) -> tuple[requests.Session, str]:
    """A login initiation done by hand (no platform): the hub's state and nonce cookies in a session, and the
    state to post back, so a malformed id_token reaches the hub's launch check."""
    session = requests.Session()
    reply = session.get(f"{hub_url}/hub/lti13/oauth_login", allow_redirects=False, timeout=30, params={
        "iss": issuer, "login_hint": "x", "client_id": client_id, "target_link_uri": f"{hub_url}/hub/"})
    assert reply.status_code in (302, 303), (reply.status_code, reply.text[:500])
    state = urllib.parse.parse_qs(urllib.parse.urlsplit(reply.headers["Location"]).query)["state"][0]
    return session, state


@pytest.mark.integration
def test_door1_malformed_launch_posts_are_refused_without_a_server_error_and_the_hub_stays_up(lti_class):  # noqa: F811
    """Attack: garbage, unsigned (alg none), non-JWT, odd-header and oversized id_tokens, a missing/forged
    state, posted straight to /hub/lti13/oauth_callback after a real login initiation. Safe: a 4xx each time
    (never a 500 traceback), nothing recorded, the hub still answering."""
    platform, hub = lti_class.platform, lti_class.hub
    iss = platform.issuer
    now = int(time.time())
    body = {"iss": iss, "aud": platform.client_id, "sub": "x", "nonce": "n", "iat": now, "exp": now + 300}
    tokens = {
        "empty": "",
        "garbage": "garbage",
        "three dots": "a.b.c",
        "header not json": f"{b64(b'not json')}.{b64(body)}.AAAA",
        "alg none": f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(body)}.",
        "alg none with kid": f"{b64({'alg': 'none', 'kid': platform.signing_key()[1]})}.{b64(body)}.",
        "HS256 with the public key set's kid": jwt.encode(body, "secret", algorithm="HS256",
                                                          headers={"kid": platform.signing_key()[1]}),
        "kid int": f"{b64({'alg': 'RS256', 'kid': 5})}.{b64(body)}.AAAA",
        "kid unknown": f"{b64({'alg': 'RS256', 'kid': 'nope' * 50})}.{b64(body)}.AAAA",
        "jku header": f"{b64({'alg': 'RS256', 'jku': 'http://127.0.0.1:9/evil', 'kid': 'e'})}.{b64(body)}.AAAA",
        "iss list": f"{b64({'alg': 'RS256'})}.{b64({**body, 'iss': [iss]})}.AAAA",
        "payload a list": f"{b64({'alg': 'RS256'})}.{b64([1, 2])}.AAAA",
        "big": "x" * 2_000_000,
        "markup in iss": f"{b64({'alg': 'RS256'})}.{b64({**body, 'iss': '<script>alert(1)</script>'})}.AAAA",
    }
    before = lti_class.recorded()
    statuses = {}
    for name, token in tokens.items():
        session, state = login_initiation(hub.url, iss, platform.client_id)
        reply = session.post(f"{hub.url}/hub/lti13/oauth_callback", data={"id_token": token, "state": state},
                             allow_redirects=False, timeout=60)
        statuses[name] = (reply.status_code, "<script>alert(1)</script>" in reply.text)
    for name, form in {"no state": {"id_token": "a.b.c"}, "foreign state": {"id_token": "a.b.c", "state": b64(
            {"state_id": "x", "next_url": "https://evil.example/"})}, "state not base64": {
            "id_token": "a.b.c", "state": "%%%"}}.items():
        session, _ = login_initiation(hub.url, iss, platform.client_id)
        reply = session.post(f"{hub.url}/hub/lti13/oauth_callback", data=form, allow_redirects=False, timeout=60)
        statuses[name] = (reply.status_code, False)
    bad = {name: s for name, s in statuses.items() if not (400 <= s[0] < 500) or s[1]}
    assert not bad, bad
    assert hub_alive(hub.url)
    assert lti_class.recorded() == before


@pytest.mark.integration
def test_door1_signed_claims_and_links_cannot_switch_user_escalate_or_redirect(lti_class, tmp_path):  # noqa: F811
    """Attacks through the real OIDC flow in Chromium (the platform's own launch, its post altered; claims
    re-signed with the platform's key stand for an LMS that sends odd claims):
    - cy's launch claiming the Instructor / TA role; tim's (the TA's) sub with only a Learner role;
    - a `chapter` custom parameter that is a path (../../user/ann, an absolute URL);
    - the login initiation's target_link_uri pointing to another site (open redirect after login) with the
      launch naming no chapter.
    Safe: no staff login for cy, no learner login for tim, a chapter landing on cy's own server only, no 500,
    never leaving the hub's origin."""
    platform, hub = lti_class.platform, lti_class.hub
    key = platform.signing_key()
    accounts = json.loads((lti_class.folder / "accounts.json").read_text())
    subs = {user: sub for sub, user in accounts.items()}
    cases = {
        "cy as instructor": lambda f: altered(f, key, **{CLAIM + "roles": [INSTRUCTOR]}),
        "cy as TA": lambda f: altered(f, key, **{CLAIM + "roles": [TA]}),
        "cy with tim's sub as learner": lambda f: altered(f, key, sub=subs["tim"], **{CLAIM + "roles": [LEARNER]}),
        "cy with ann's sub": lambda f: altered(f, key, sub=subs["ann"] + " "),
        "cy, roles a string": lambda f: altered(f, key, **{CLAIM + "roles": INSTRUCTOR}),
        "chapter a path": lambda f: altered(f, key, **{CLAIM + "custom": {"chapter": "../../../user/ann/lab"}}),
        "chapter a URL": lambda f: altered(f, key, **{CLAIM + "custom": {"chapter": "https://evil.example/x"},
                                                      CLAIM + "target_link_uri": "https://evil.example/?chapter=x"}),
        "custom a list": lambda f: altered(f, key, **{CLAIM + "custom": ["chapter", "03"]}),
    }
    outcomes = {}
    with chromium(tmp_path / "chrome", "the LTI red team") as page:
        for name, alter in cases.items():
            intercepted_launch(page, platform.launch_url("cy", CHAPTER), alter)
            seen = answer(page, hub.url)
            outcomes[name] = (seen[:300], page.js("location.href"))
            page.send("Network.clearBrowserCookies")
        for evil in ("https://evil.example/", "//evil.example/", "https://hub/\\\\evil.example/",
                     "/\\evil.example/", "https:evil.example", "/%5Cevil.example/", "/\t/evil.example/"):
            def login(url, evil=evil):
                parts = urllib.parse.urlsplit(url)
                query = dict(urllib.parse.parse_qsl(parts.query))
                query["target_link_uri"] = evil
                return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))

            def form(f):
                return altered(f, key, **{CLAIM + "custom": {}, CLAIM + "target_link_uri": hub.url + "/hub/"})
            try:
                intercepted_launch(page, platform.launch_url("cy", CHAPTER), form, login=login)
                time.sleep(4)
                outcomes[f"redirect {evil!r}"] = ("", page.js("location.href"))
            finally:
                page.send("Network.clearBrowserCookies")
    log = (hub.state / "../hub.log").resolve()
    broken = {}
    for name, (text, at) in outcomes.items():
        at = at or ""
        if name.startswith("cy as") or name.startswith("cy, roles") or "tim's sub" in name or "ann's sub" in name:
            if re.search(r"/(user|spawn-pending)/(?!cy\b)", at):
                broken[name] = (text, at)
            if "LTI launch refused" not in text and not re.search(r"/(user|spawn-pending)/cy\b", at):
                broken[name] = (text, at)
        elif name.startswith("redirect"):
            if not at.startswith(hub.url):
                broken[name] = at
        else:
            if "500" in text or "Internal Server Error" in text or not at.startswith(hub.url):
                broken[name] = (text, at)
            if re.search(r"/(user|spawn-pending)/(?!cy\b)", at):
                broken[name] = (text, at)
    print("red team outcomes:", json.dumps(outcomes, indent=1))
    assert not broken, (broken, outcomes)
    assert "instructor" not in lti_class.logged_in() and "tim" not in lti_class.logged_in(), lti_class.logged_in()
    assert hub_alive(hub.url), log


@pytest.mark.integration
def test_door1_a_launch_with_a_malformed_service_claim_is_refused_not_a_server_error(lti_class, tmp_path):  # noqa: F811
    """Attack: cy's launch with the AGS endpoint claim (and NRPS) a string instead of an object, re-signed with
    the platform's key (an LMS sending an odd claim). Safe: a refusal page (4xx) or an accepted launch, never a
    500, nothing recorded in context.json, the hub up."""
    platform, hub = lti_class.platform, lti_class.hub
    key = platform.signing_key()
    before = (lti_class.folder / "context.json").read_bytes() if (lti_class.folder / "context.json").exists() else None
    with chromium(tmp_path / "chrome", "the LTI red team (AGS)") as page:
        intercepted_launch(page, platform.launch_url("cy", CHAPTER),
                           lambda f: altered(f, key, **{AGS: "https://evil.example/lineitems"}))
        text = wait_for(lambda: (page.js("document.body && document.body.innerText") or "") or None, 60, "an answer")
        wait_for(lambda: "/lti13/" not in (page.js("location.href") or "") or "500" in (
            page.js("document.body.innerText") or "") or "refused" in (page.js("document.body.innerText") or ""),
            60, "the hub's answer")
        text = page.js("document.body.innerText") or text
    after = (lti_class.folder / "context.json").read_bytes() if (lti_class.folder / "context.json").exists() else None
    assert hub_alive(hub.url)
    assert after == before
    assert "500" not in text and "Internal Server Error" not in text, text


# --- door 2: the class page's LMS gradebook section (no hub: the section's HTML itself) -----------------------

PAYLOADS = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "\"><svg onload=alert(1)>",
            "</li></ul><iframe srcdoc='<script>alert(1)</script>'>", "javascript:alert(1)"]


def test_door2_lms_error_text_and_outbox_values_are_never_markup(tmp_path, monkeypatch):
    """Attack: what the LMS answers (the error text of a failing post, e.g. an HTML error page), and anything
    in the outbox a learner name or the LMS could put there (key, score, progress, tries, due), carrying markup.
    Safe: no tag from a payload appears unescaped in the section."""
    monkeypatch.setenv("COURSE_LTI", str(tmp_path / "lti"))
    course = tmp_path / "course"
    outbox = Outbox(course)
    for i, p in enumerate(PAYLOADS):
        outbox.entries[f"ann{p}/03_positional_encoding{p}"] = {
            "want": {"sub": p, "score": p, "max_score": p, "progress": p, "timestamp": p},
            "tries": p, "due": p, "error": p, "sent": None}
    outbox.save()
    html = lti_page.lms_section(course)
    assert not re.search(r"<(script|img|svg|iframe)", html, re.I), html

    # through the real failure path: the sender raising with the LMS's HTML error body
    outbox = Outbox(course)
    outbox.entries = {"ann/03_positional_encoding": {"want": {"sub": "s", "score": 1, "max_score": 2,
                                                              "progress": "FullyGraded", "timestamp": "t"},
                                                     "due": 0, "tries": 0, "sent": None}}
    monkeypatch.setenv("COURSE_LEARNERS", "ann")

    def failing(assignment, want):
        raise RuntimeError("<html><body><script>alert(document.cookie)</script>LMS down</body></html>")
    outbox.flush(failing, time.time())
    outbox.save()
    html = lti_page.lms_section(course)
    assert "alert(document.cookie)" in html and "<script>" not in html, html


# --- door 3: grade passback -------------------------------------------------------------------------------------

class _Total:
    def __init__(self, score):
        self.score, self.max_score, self.complete = score, 10, True


def test_door3_no_grade_for_a_non_learner_and_never_under_another_learners_sub(tmp_path, monkeypatch):
    """Attack: totals for the instructor, a TA, a former learner and a name with a path in it queued for the LMS;
    an outbox entry queued for a learner who then left; and ann's queued score kept while accounts.json
    re-maps her LMS id (the score must go with her current sub, never a stale/other one).
    Safe: only class learners are sent, each under their own sub."""
    monkeypatch.setenv("COURSE_LEARNERS", "ann,bo")
    subs = {"ann": "sub-ann", "bo": "sub-bo", "instructor": "sub-inst", "tim": "sub-tim", "eve": "sub-eve",
            "../ann": "sub-x", "ann/..": "sub-y"}
    totals = {(s, "03_positional_encoding"): _Total(5) for s in subs}
    outbox = Outbox(tmp_path)
    outbox.update(totals, subs, time.time())
    sent = []
    outbox.flush(lambda assignment, want: sent.append((assignment, want["sub"])), time.time())
    assert sorted(sent) == [("03_positional_encoding", "sub-ann"), ("03_positional_encoding", "sub-bo")], sent

    # a queued score whose learner leaves before it is sent
    outbox.update({("bo", "03_positional_encoding"): _Total(7)}, subs, time.time())
    monkeypatch.setenv("COURSE_LEARNERS", "ann")
    sent.clear()
    outbox.flush(lambda assignment, want: sent.append((assignment, want["sub"])), time.time() + 1)
    assert sent == [], sent

    # ann's LMS id re-mapped: the next score goes to her new sub only
    outbox.update({("ann", "03_positional_encoding"): _Total(9)}, {**subs, "ann": "sub-ann-2"}, time.time())
    sent.clear()
    outbox.flush(lambda assignment, want: sent.append((assignment, want["sub"])), time.time() + 2)
    assert sent == [("03_positional_encoding", "sub-ann-2")], sent

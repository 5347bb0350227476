"""LTI 1.3 (grader.classroom.lti): launches checked with tokens signed by a test key, the LMS user mapped
through the one gate for identity, and scores queued for the LMS and posted through pylti1p3 to a local
stand-in of a platform's grade service (against a real platform: tests/test_lti_tool_platform.py, and end to
end through a hub in Chromium: tests/test_lti_hub.py)."""
from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from grader.classroom.grades.total import AUTOMATIC, GRADED, PENDING, Part, Total
from grader.classroom.lti import launch as lti_launch
from grader.classroom.lti.launch import KeyCache, LaunchRefused, NonceBook, hub_user, landing, verify_launch
from grader.classroom.lti.outbox import AgsSender, Outbox, post_round
from grader.classroom.lti.platform import load_platform
from grader.classroom.lti.roster import members_to_roster, roster_roles

ISSUER, CLIENT, DEPLOYMENT = "https://lms.example.edu", "tool-client-1", "deploy-1"
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
LEARNER_ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"


def new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


PLATFORM_KEY, FORGER_KEY, TOOL_KEY = new_key(), new_key(), new_key()


class Platform(BaseHTTPRequestHandler):
    """A stand-in for an LMS's endpoints: its key set, its token endpoint (which checks the tool's signed
    assertion with the tool's public key) and AGS line items and scores; it records what it was sent."""

    def log_message(self, *args):
        pass

    def reply(self, code, body, kind="application/json"):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        state = self.server.state
        if self.path == "/jwks":
            state["jwks_fetches"] += 1
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(PLATFORM_KEY.public_key()))
            return self.reply(200, {"keys": [{**jwk, "kid": "platform-1", "alg": "RS256", "use": "sig"}]})
        if self.path.startswith("/lineitems"):
            return self.reply(200, list(state["lineitems"].values()))
        self.reply(404, {})

    def do_POST(self):
        state = self.server.state
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        if state["down"]:
            return self.reply(503, {"error": "the LMS is down"})
        if self.path == "/token":
            assertion = parse_qs(body)["client_assertion"][0]
            jwt.decode(assertion, TOOL_KEY.public_key(), algorithms=["RS256"], audience=self.server.url + "/token")
            return self.reply(200, {"access_token": "granted", "token_type": "Bearer", "expires_in": 3600})
        if self.headers.get("Authorization") != "Bearer granted":
            return self.reply(401, {})
        if self.path == "/lineitems":
            item = json.loads(body)
            item["id"] = f"{self.server.url}/lineitems/{item['tag']}"
            state["lineitems"][item["tag"]] = item
            return self.reply(201, item)
        if self.path.startswith("/lineitems/") and self.path.endswith("/scores"):
            state["scores"].append((self.path.split("/")[2], json.loads(body)))
            return self.reply(200, {})
        self.reply(404, {})


@pytest.fixture
def platform_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Platform)
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    server.state = {"jwks_fetches": 0, "lineitems": {}, "scores": [], "down": False}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


@pytest.fixture
def lti(tmp_path, platform_server, monkeypatch):
    """A class registered with the stand-in platform: $COURSE_LTI with platform.json and the tool's key."""
    folder = tmp_path / "lti"
    folder.mkdir()
    (folder / "tool.pem").write_text(pem(TOOL_KEY))
    url = platform_server.url
    (folder / "platform.json").write_text(json.dumps({
        "issuer": ISSUER, "client_id": CLIENT, "deployment_ids": [DEPLOYMENT], "auth_login_url": url + "/auth",
        "auth_token_url": url + "/token", "key_set_url": url + "/jwks", "tool_private_key": "tool.pem"}))
    monkeypatch.setenv("COURSE_LTI", str(folder))
    monkeypatch.setenv("COURSE_LEARNERS", "ada,grace")
    return load_platform()


def id_token(key=PLATFORM_KEY, **changes) -> tuple[str, str]:
    """A resource-link launch signed by `key` (the platform's, unless forged) and its nonce; `changes`
    replace claims (None removes one)."""
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": CLIENT, "sub": "lms-user-42", "iat": now, "exp": now + 300,
              "nonce": uuid.uuid4().hex, "name": "Ada Lovelace", "email": "ada@example.edu",
              CLAIM + "message_type": "LtiResourceLinkRequest", CLAIM + "version": "1.3.0",
              CLAIM + "deployment_id": DEPLOYMENT, CLAIM + "target_link_uri": "https://hub.example.edu/hub/",
              CLAIM + "resource_link": {"id": "chapter-3-link"}, CLAIM + "roles": [LEARNER_ROLE],
              CLAIM + "custom": {"chapter": "03"}}
    for name, value in changes.items():
        name = name.replace("__", "/")
        if value is None:
            claims.pop(name, None)
        else:
            claims[name] = value
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "platform-1"}), claims.get("nonce")


def test_a_signed_launch_is_accepted_and_the_platforms_keys_are_fetched_once(lti, platform_server, tmp_path):
    book, keys = NonceBook(tmp_path / "nonces.json"), KeyCache()
    for _ in range(3):
        token, nonce = id_token()
        claims = verify_launch(token, lti, nonce, book, keys)
        assert claims["sub"] == "lms-user-42"
    assert platform_server.state["jwks_fetches"] == 1  # cached, not fetched per launch
    assert len(json.loads((tmp_path / "nonces.json").read_text())) == 3


REFUSALS = {
    "forged": (lambda: id_token(key=FORGER_KEY), "forged launch"),
    "wrong audience": (lambda: id_token(aud="someone-elses-tool"), "wrong audience"),
    "expired": (lambda: id_token(exp=int(time.time()) - 3600, iat=int(time.time()) - 7200), "expired"),
    "unknown issuer": (lambda: id_token(iss="https://evil.example"), "unknown platform: the issuer"),
    "unknown deployment": (lambda: id_token(**{CLAIM + "deployment_id": "deploy-other"}),
                           "unknown platform: the deployment"),
    "not this browser's nonce": (lambda: (id_token()[0], "another-nonce"), "nonce is not the one"),
}


@pytest.mark.parametrize("kind", REFUSALS)
def test_a_bad_launch_is_refused_saying_why_and_nothing_is_recorded(kind, lti, tmp_path):
    make, why = REFUSALS[kind]
    token, nonce = make()
    book = NonceBook(tmp_path / "nonces.json")
    with pytest.raises(LaunchRefused, match=why):
        verify_launch(token, lti, nonce, book, KeyCache())
    assert not (tmp_path / "nonces.json").exists()


def test_a_replayed_launch_is_refused(lti, tmp_path):
    """The same id_token posted again (its cookie captured too) is refused, even by a restarted hub."""
    token, nonce = id_token()
    verify_launch(token, lti, nonce, NonceBook(tmp_path / "nonces.json"), KeyCache())
    with pytest.raises(LaunchRefused, match="already used"):
        verify_launch(token, lti, nonce, NonceBook(tmp_path / "nonces.json"), KeyCache())


def test_the_hub_user_is_the_lms_stable_id_through_the_gate(lti, monkeypatch):
    claims = jwt.decode(id_token()[0], options={"verify_signature": False})
    derived = lti_launch.derived_name(ISSUER, "lms-user-42")
    with pytest.raises(LaunchRefused, match="not a learner of this class"):  # not in COURSE_LEARNERS
        hub_user(claims, {}, set())
    monkeypatch.setenv("COURSE_LEARNERS", f"ada,{derived}")
    assert hub_user(claims, {}, set()) == derived
    assert hub_user(claims, {"lms-user-42": "ada"}, set()) == "ada"
    renamed = {**claims, "name": "grace", "email": "grace@example.edu"}  # a display name says nothing
    assert hub_user(renamed, {"lms-user-42": "ada"}, set()) == "ada"
    staff = {**claims, CLAIM + "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"]}
    with pytest.raises(LaunchRefused, match="neither the instructor nor a grader"):
        hub_user(staff, {"lms-user-42": "ada"}, {"instructor"})
    assert hub_user(staff, {"lms-user-42": "instructor"}, {"instructor"}) == "instructor"


def test_a_launch_from_a_chapters_link_lands_on_that_chapter():
    assert landing({CLAIM + "custom": {"chapter": "03"}}) == (
        "user-redirect/lab/tree/03_positional_encoding/positional_encoding.ipynb")
    assert landing({CLAIM + "target_link_uri": "https://hub.example.edu/hub/?chapter=9"}) == (
        "user-redirect/lab/tree/09_llama_modern/llama_modern.ipynb")
    assert landing({CLAIM + "custom": {"chapter": "../../etc"}}) is None
    assert landing({}) is None


def total(student, assignment="03_positional_encoding", pending=False, late_share=0.0) -> Total:
    parts = (Part("t1", AUTOMATIC, 6.0, 8.0), Part("w1", PENDING if pending else GRADED, None if pending else 1.0, 2.0))
    return Total(student, assignment, auto=6.0, hand=0.0 if pending else 1.0, late_share=late_share,
                 max_score=10.0, parts=parts)


def test_scores_queue_while_the_lms_is_down_and_are_sent_later(lti, platform_server, tmp_path):
    course = tmp_path / "course"
    subs = {"ada": "sub-ada", "grace": "sub-grace", "mallory": "sub-mallory"}
    totals = {("ada", "03_positional_encoding"): total("ada", pending=True, late_share=0.1),
              ("grace", "03_positional_encoding"): total("grace"),
              ("mallory", "03_positional_encoding"): total("mallory")}  # not in the class: never posted
    outbox = Outbox(course)
    assert outbox.update(totals, subs, now=1000.0) == 2
    send = AgsSender(lti, {"lineitems": platform_server.url + "/lineitems",
                           "scope": ["https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
                                     "https://purl.imsglobal.org/spec/lti-ags/scope/score"]})
    platform_server.state["down"] = True
    assert outbox.flush(send, now=1000.0) == 0
    outbox.save()
    waiting = Outbox(course).waiting()
    assert [key for key, _ in waiting] == ["ada/03_positional_encoding", "grace/03_positional_encoding"]
    assert all("503" in entry["error"] or "LtiServiceException" in entry["error"] for _, entry in waiting)
    assert Outbox(course).flush(send, now=1001.0) == 0  # not yet due: tried again later
    platform_server.state["down"] = False
    outbox = Outbox(course)
    assert outbox.flush(send, now=1000.0 + 3600) == 2
    assert outbox.waiting() == []
    scores = {score["userId"]: score for _, score in platform_server.state["scores"]}
    assert set(scores) == {"sub-ada", "sub-grace"}
    assert scores["sub-ada"]["gradingProgress"] == "PendingManual" and scores["sub-ada"]["scoreGiven"] == 5.4
    assert scores["sub-grace"]["gradingProgress"] == "FullyGraded" and scores["sub-grace"]["scoreGiven"] == 7.0
    assert list(platform_server.state["lineitems"]) == ["03_positional_encoding"]
    assert outbox.update(totals, subs, now=5000.0) == 0  # unchanged totals are not sent again


def test_a_total_being_graded_reaches_the_lms_once_recorded_not_before(lti, tmp_path, monkeypatch):
    """From the staging of an attempt to its recording, nbgrader's gradebook holds the submission with every test
    cell at 0 (tests/test_lti_hub.py's LMS got 0 / 15 first): while the ledger has the attempt queued or grading
    nothing is queued for it; once graded, a round queues the recorded total though the gradebook did not change
    since."""
    from grader.classroom.lti import outbox as lti_outbox

    key, sent = ("ada", "03_positional_encoding"), []
    (lti.folder / "accounts.json").write_text(json.dumps({"sub-ada": "ada"}))
    staged = Total("ada", key[1], auto=0.0, hand=0.0, late_share=0.0, max_score=10.0,
                   parts=(Part("t1", AUTOMATIC, 0.0, 8.0), Part("w1", PENDING, None, 2.0)))
    monkeypatch.setattr(lti_outbox, "course_totals", lambda course_dir, late: {key: staged})
    post_round(tmp_path, None, changed=True, now=0.0, send=lambda chapter, want: sent.append(want), busy={key})
    assert sent == [] and Outbox(tmp_path).waiting() == []
    monkeypatch.setattr(lti_outbox, "course_totals", lambda course_dir, late: {key: total("ada", pending=True)})
    post_round(tmp_path, None, changed=False, now=1.0, send=lambda chapter, want: sent.append(want))
    assert [(want["score"], want["progress"]) for want in sent] == [(6.0, "PendingManual")]


def test_post_round_sends_nothing_where_the_class_is_not_in_an_lms(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_LTI", raising=False)
    assert post_round(tmp_path, None, changed=True) is None
    assert not (tmp_path / "on-submit").exists()


def test_the_roster_gives_learners_graders_and_instructors(lti, tmp_path):
    members = [{"user_id": "s1", "roles": [LEARNER_ROLE], "name": "<b>Ada</b>"},
               {"user_id": "t1", "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant",
                                          LEARNER_ROLE]},
               {"user_id": "i1", "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"]},
               {"user_id": "gone", "roles": [LEARNER_ROLE], "status": "Inactive"}]
    roster = members_to_roster(members, ISSUER, {"i1": "instructor"})
    (lti.folder / "roster.json").write_text(json.dumps({"members": roster}))
    roles = roster_roles(lti.folder)
    assert roles["learner"] == {lti_launch.derived_name(ISSUER, "s1")}
    assert roles["grader"] == {lti_launch.derived_name(ISSUER, "t1")}
    assert roles["instructor"] == {"instructor"}
    with pytest.raises(ValueError, match="not a name the hub accepts"):
        members_to_roster(members, ISSUER, {"s1": "<script>"})


def test_a_broken_registration_says_what_is_wrong(tmp_path):
    (tmp_path / "platform.json").write_text(json.dumps({"issuer": ISSUER}))
    with pytest.raises(ValueError, match="missing client_id"):
        load_platform(tmp_path)
    (tmp_path / "platform.json").write_text(json.dumps({
        "issuer": ISSUER, "client_id": CLIENT, "deployment_ids": "deploy-1", "auth_login_url": "x",
        "auth_token_url": ISSUER, "key_set_url": ISSUER, "tool_private_key": "tool.pem"}))
    with pytest.raises(ValueError, match="auth_login_url must be a URL"):
        load_platform(tmp_path)


def test_the_class_page_shows_scores_waiting_for_the_lms_as_data(lti, tmp_path):
    from grader.classroom.lti.page import lms_section

    course = tmp_path / "course"
    outbox = Outbox(course)
    outbox.update({("ada", "03_positional_encoding"): total("ada", pending=True)}, {"ada": "sub-ada"}, now=0.0)
    outbox.flush(lambda assignment, want: (_ for _ in ()).throw(OSError("<script>alert(1)</script> down")), now=0.0)
    outbox.save()
    html = lms_section(course)
    assert "1 score(s) not yet accepted" in html and "ada/03_positional_encoding" in html
    assert "PendingManual" in html and "tried 1 time(s)" in html
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_a_chapters_own_lms_column_gets_its_score(lti, platform_server, tmp_path):
    """A launch from a chapter's link (a Canvas assignment) names its line item: the chapter's score goes there,
    not to a new column; a refused launch records nothing (save_context runs only after the checks)."""
    from grader.classroom.lti.context import load_context, save_context

    column = platform_server.url + "/lineitems/canvas-assignment-7"
    ags = {"lineitems": platform_server.url + "/lineitems", "lineitem": column,
           "scope": ["https://purl.imsglobal.org/spec/lti-ags/scope/score"]}
    claims = jwt.decode(id_token(**{"https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": ags})[0],
                        options={"verify_signature": False})
    save_context(lti.folder, claims)
    context = load_context(lti.folder)
    assert context["chapter_lineitems"] == {"03_positional_encoding": column}
    send = AgsSender(lti, context)
    send("03_positional_encoding", {"sub": "sub-ada", "score": 7.0, "max_score": 10.0, "progress": "FullyGraded",
                                    "timestamp": "2026-11-28T22:00:00+00:00"})
    assert [path for path, _ in platform_server.state["scores"]] == ["canvas-assignment-7"]
    assert platform_server.state["lineitems"] == {}  # no new column


@pytest.mark.parametrize("endpoint", ["https://evil.example/lineitems", ["a"], {"lineitems": {"url": 1}, "scope": "s"}])
def test_a_verified_launch_with_an_odd_service_claim_records_no_service(lti, endpoint):
    """An LMS-signed launch whose AGS or NRPS claim is not an object (or whose URLs are not strings) is a launch
    with no service announced: no server error (the red team's 500), nothing kept in context.json."""
    from grader.classroom.lti.context import load_context, save_context

    claims = jwt.decode(id_token(**{"https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": endpoint,
                                    "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": endpoint})[0],
                        options={"verify_signature": False})
    save_context(lti.folder, claims)
    assert load_context(lti.folder) == {}

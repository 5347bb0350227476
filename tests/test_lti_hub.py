"""The hub with LTI 1.3 (COURSE_LTI, grader.classroom.lti.hub): the configuration a class gets, and one class
launched from a real platform (Open edX's lti_consumer, tests/lti_platform.py) in Chromium: a learner lands on
the hub logged in as the hub user their LMS id maps to, in the chapter their link names; what they submit is
graded on submit, hand-graded by a TA in the shared Formgrader, and its one total reaches the platform's gradebook
(pending first, then final); a forged, replayed, misaddressed, expired or foreign launch, altered on its way from
the platform to the hub, is refused with its reason and records nothing. One hub (the simple spawner, the grading
service on) for the module."""
from __future__ import annotations

import base64
import csv
import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import jwt
import nbformat
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from grader.authoring import samples
from grader.classroom.lti.launch import derived_name
from tests.lti_platform import Platform, Tool, lti_platform
from tests.test_browser import chromium, free_port, http_ok, wait_for
from tests.test_hub import BIN, COURSE_ID, DEPLOY, FORMGRADER, ON_SUBMIT, PROXY, Hub, load_hub_config, mine

CHAPTER = "03_positional_encoding"


def lti_folder(path, platform: dict, roster: list[dict] = (), accounts: dict | None = None):
    path.mkdir(parents=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (path / "tool.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))
    (path / "platform.json").write_text(json.dumps({**platform, "tool_private_key": "tool.pem"}))
    (path / "roster.json").write_text(json.dumps({"members": list(roster)}))
    (path / "accounts.json").write_text(json.dumps(accounts or {}))
    return path


def registration(issuer="https://lms.example.edu", client_id="c1", deployment_id="d1", login="", token="",
                 jwks="") -> dict:
    return {"issuer": issuer, "client_id": client_id, "deployment_ids": [deployment_id],
            "auth_login_url": login or issuer + "/auth", "auth_token_url": token or issuer + "/token",
            "key_set_url": jwks or issuer + "/jwks"}


def test_course_lti_gives_the_hub_the_lti_login_the_roster_and_the_service_the_registration(tmp_path, monkeypatch):
    folder = lti_folder(tmp_path / "lti", registration(), roster=[
        {"sub": "s1", "role": "learner", "hub_user": "ann"}, {"sub": "t1", "role": "grader", "hub_user": "tim"}])
    c = load_hub_config(tmp_path, monkeypatch, COURSE_LTI=str(folder), COURSE_LEARNERS="bo")
    assert c.JupyterHub.authenticator_class == "grader.classroom.lti.hub.CourseLTIAuthenticator"
    lti = c.CourseLTIAuthenticator
    assert (lti.issuer, lti.client_id, lti.authorize_url, lti.jwks_endpoint) == (
        "https://lms.example.edu", {"c1"}, "https://lms.example.edu/auth", "https://lms.example.edu/jwks")
    assert lti.staff == {"instructor", "tim"} and lti.lti_folder == str(folder)
    assert c.Authenticator.allowed_users == {"instructor", "ann", "bo", "tim"}
    [grading] = [s for s in c.JupyterHub.services if s["name"] == "grading"]
    assert grading["environment"]["COURSE_LTI"] == str(folder)
    assert grading["environment"]["COURSE_LEARNERS"] == "ann,bo"
    assert os.environ["COURSE_LEARNERS"] == "ann,bo"  # the gate a launch passes in the hub's process
    (folder / "platform.json").write_text("{}")
    with pytest.raises(SystemExit, match="COURSE_LTI: .*missing issuer"):
        load_hub_config(tmp_path / "broken", monkeypatch, COURSE_LTI=str(folder))


@dataclass
class LtiClass:
    platform: Platform
    hub: Hub
    folder: Path  # COURSE_LTI
    env: dict

    def token(self, user: str) -> str:
        """An API token for `user`, as an administrator makes one (`jupyterhub token`): no password in an LTI hub."""
        made = subprocess.run([str(BIN / "jupyterhub"), "token", "-f", str(DEPLOY / "jupyterhub_config.py"), user],
                              cwd=self.hub.state, env=self.env, capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr[-2000:]
        return made.stdout.split()[-1]

    def users(self) -> list[str]:
        return subprocess.run(["sqlite3", str(self.hub.state / "jupyterhub.sqlite"), "select name from users"],
                              capture_output=True, text=True, check=True).stdout.split()

    def logged_in(self) -> list[str]:
        """Hub users who were ever logged in (a user on the roster exists in the hub before their first launch)."""
        return subprocess.run(["sqlite3", str(self.hub.state / "jupyterhub.sqlite"),
                               "select name from users where last_activity is not null order by name"],
                              capture_output=True, text=True, check=True).stdout.split()

    def recorded(self) -> dict:
        """What a launch may leave behind: hub users, logins, the LMS context (context.json), used nonces."""
        return {"users": sorted(self.users()), "logged in": self.logged_in(),
                **{name: (self.folder / name).read_bytes()
                                                 if (self.folder / name).exists() else None
                                                 for name in ("context.json", "nonces.json")}}


@pytest.fixture(scope="module")
def lti_class(tmp_path_factory):
    """The platform with the hub registered as its tool, one chapter placed in its course; the hub with COURSE_LTI,
    the grading service and a TA (from the roster) for the shared Formgrader."""
    if not PROXY.exists():
        pytest.fail("configurable-http-proxy is missing: `make hub-setup` installs it into .hub/")
    root = tmp_path_factory.mktemp("lti-class")
    port = free_port()
    hub_url = f"http://127.0.0.1:{port}"
    tool = Tool(login_url=f"{hub_url}/hub/lti13/oauth_login", launch_url=f"{hub_url}/hub/lti13/oauth_callback",
                jwks_url=f"{hub_url}/hub/lti13/jwks", target_link_uri=f"{hub_url}/hub/?chapter={{chapter}}")
    with lti_platform(tool, chapters=[CHAPTER]) as platform:
        ann = platform.add_user("ann", role="student", name="Ann Lee", email="ann@example.org")
        tim = platform.add_user("tim", role="Community TA", name="Tim Ta")
        cy = platform.add_user("cy", role="student", name="Cy Ng")  # a learner whose launches are all refused
        folder = lti_folder(root / "lti", registration(
            platform.issuer, platform.client_id, platform.deployment_id, platform.auth_login_url,
            platform.auth_token_url, platform.jwks_url),
            roster=[{"sub": ann, "role": "learner", "hub_user": "ann"},
                    {"sub": cy, "role": "learner", "hub_user": "cy"},
                    {"sub": tim, "role": "grader", "hub_user": "tim"}],
            accounts={ann: "ann", cy: "cy", tim: "tim"})
        state, exchange = root / "state", root / "exchange"
        exchange.mkdir(mode=0o777)
        course = state / "home" / "instructor" / "course"
        course.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if k not in ("COURSE_GRADING_SERVICE", "COURSE_LEARNERS")}
        env.update(COURSE_HUB_PORT=str(port), COURSE_HUB_API_PORT=str(free_port()), COURSE_HUB_STATE=str(state),
                   COURSE_EXCHANGE_ROOT=str(exchange), COURSE_DIRECTORY=str(course), COURSE_HUB_SPAWNER="simple",
                   COURSE_LTI=str(folder))
        log = root / "hub.log"
        hub = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(DEPLOY / "jupyterhub_config.py")], cwd=state,
                               env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: hub.poll() is None and http_ok(f"{hub_url}/hub/api"), 180, "JupyterHub to start")
            yield LtiClass(platform, Hub(hub_url, "", state, exchange, course), folder, env)
        finally:
            hub.terminate()  # stops the servers and the services too
            try:
                hub.wait(timeout=60)
            except subprocess.TimeoutExpired:
                hub.kill()
            print(log.read_text()[-5000:], platform.log()[-3000:])  # shown when a test failed


@pytest.mark.integration
def test_a_learner_launched_from_the_lms_lands_logged_in_on_the_chapter(lti_class, tmp_path):
    platform = lti_class.platform
    eve = platform.add_user("eve", role="student", name="ann")  # in the LMS, not in this class
    with chromium(tmp_path / "chrome", "the LTI launch into the hub") as page:
        page.send("Page.navigate", url=platform.launch_url("eve", CHAPTER))
        wait_for(lambda: "LTI launch refused" in (page.js("document.body && document.body.innerText") or ""),
                 60, "the refusal page")
        refused = page.js("document.body.innerText")
        page.send("Page.navigate", url=platform.launch_url("ann", CHAPTER))
        wait_for(lambda: "/lab/tree/" in (page.js("location.href") or ""), 120, "the chapter in JupyterLab")
        landed = urllib.parse.urlsplit(page.js("location.href")).path
    assert f"{derived_name(platform.issuer, eve)} is not a learner of this class" in refused
    assert landed == f"/user/ann/lab/tree/{CHAPTER}/positional_encoding.ipynb"
    users = lti_class.users()
    assert "ann" in users and derived_name(platform.issuer, eve) not in users and "eve" not in users


def intercepted_launch(page, url: str, alter, login=None) -> None:
    """Open `url` (a launch from the platform: the hub's login initiation, the platform's auth page, whose form
    posts the id_token to the hub) and post `alter(form)` to the hub in place of the platform's form; `alter` may
    also act on the browser (its cookies) while the post waits (DevTools' Fetch interception). `login(url) -> url`,
    if given, alters the login initiation's URL on its way to the hub: what a link sent to a victim could say."""
    paused = []

    def on_event(message):  # a login initiation is continued at once (Page.navigate waits on it), the post kept
        if message.get("method") != "Fetch.requestPaused":
            return
        params = message["params"]
        if "/hub/lti13/oauth_login" in params["request"]["url"]:
            page.ws.send(json.dumps({"id": 10 ** 6 + len(paused), "method": "Fetch.continueRequest", "params": {
                "requestId": params["requestId"], "url": login(params["request"]["url"])}}))
        else:
            paused.append(params)
    page.on_event = on_event
    patterns = [{"urlPattern": "*/hub/lti13/oauth_callback*", "requestStage": "Request"}]
    if login:
        patterns.append({"urlPattern": "*/hub/lti13/oauth_login*", "requestStage": "Request"})
    page.send("Fetch.enable", patterns=patterns)
    try:
        page.send("Page.navigate", url=url)
        deadline = time.monotonic() + 60
        while not paused:  # the protocol's events only: a page whose form post is paused answers nothing
            assert time.monotonic() < deadline, "timed out waiting for the platform to post the id_token to the hub"
            page.on_event(json.loads(page.ws.recv()))
        request = paused[0]["request"]
        posted = request.get("postData") or "".join(base64.b64decode(entry["bytes"]).decode()
                                                     for entry in request.get("postDataEntries", []))
        form = alter(dict(urllib.parse.parse_qsl(posted)))
        page.send("Fetch.continueRequest", requestId=paused[0]["requestId"],
                  postData=base64.b64encode(urllib.parse.urlencode(form).encode()).decode())
    finally:
        del page.on_event  # back to the class's: events ignored
        page.send("Fetch.disable")


def answer(page, hub_url: str) -> str:
    """The hub's answer to a launch: its refusal page's text, or "accepted: " and where the browser went."""
    def seen():
        text, at = page.js("document.body && document.body.innerText") or "", page.js("location.href") or ""
        if "LTI launch refused" in text:
            return text
        if at.startswith(hub_url) and "/lti13/" not in at:
            return f"accepted: {at}"
        return None
    return wait_for(seen, 120, "the hub's answer to the launch")


def claims_of(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


def altered(form: dict, key: tuple[str, str], **changes) -> dict:
    """`form` with its id_token's claims changed and signed again with `key` (PEM, key id)."""
    claims = {**claims_of(form["id_token"]), **changes}
    return {**form, "id_token": jwt.encode(claims, key[0], algorithm="RS256", headers={"kid": key[1]})}


def forged(form: dict, **changes) -> dict:
    """`form` with its id_token's claims changed and the platform's signature kept."""
    header, _, signature = form["id_token"].split(".")
    payload = base64.urlsafe_b64encode(json.dumps({**claims_of(form["id_token"]), **changes}).encode())
    return {**form, "id_token": f"{header}.{payload.decode().rstrip('=')}.{signature}"}


def answering(call) -> bool:
    try:
        call()
        return True
    except (urllib.error.HTTPError, OSError):
        return False


@pytest.mark.integration
def test_a_launched_learners_total_reaches_the_lms_gradebook_pending_then_hand_graded(lti_class, tmp_path):
    """Issue 48 end to end: the instructor releases a chapter graded on submit; the learner launches it from the
    LMS, submits it on the hub, is graded on submit; the LMS
    gradebook shows the automatic points as PendingManual while a written answer waits; a TA hand-grades in the
    shared Formgrader and the LMS gets the class's one total, FullyGraded, with no other step."""
    platform, hub, chapter = lti_class.platform, lti_class.hub, ON_SUBMIT
    assert chapter.assignment == CHAPTER  # the chapter placed in the platform's course
    tokens = {user: lti_class.token(user) for user in ("instructor", "tim")}
    (hub.course / "term.toml").write_text(f'[on_submit]\nchapters = ["{chapter.number}"]\n')
    hub.start("instructor", tokens["instructor"])
    hub.instructor(tokens["instructor"], f"grader release {chapter.number} --course-dir {hub.course}")
    reply = hub.api("POST", f"/user/instructor/formgrader/api/assignment/{chapter.assignment}/release",
                    tokens["instructor"], body=b"")
    assert reply.get("success"), reply

    with chromium(tmp_path / "chrome", "the LTI launch into the hub") as page:
        page.send("Page.navigate", url=platform.launch_url("ann", CHAPTER))
        wait_for(lambda: "/user/ann/lab/tree/" in (page.js("location.href") or ""), 120, "the chapter in JupyterLab")
    context = json.loads((lti_class.folder / "context.json").read_text())
    assert context["chapter_lineitems"] == {CHAPTER: platform.chapters[CHAPTER].lineitem_url}, context

    # The learner fetches and submits the chapter on the hub (the Assignments panel's endpoints).
    tokens["ann"] = lti_class.token("ann")
    query = urllib.parse.urlencode({"course_id": COURSE_ID, "assignment_id": chapter.assignment})
    assert hub.api("POST", f"/user/ann/assignments/fetch?{query}", tokens["ann"], body=b"")["success"]
    notebook = json.loads(nbformat.writes(samples.reference(chapter)))
    hub.api("PUT", f"/user/ann/api/contents/{chapter.assignment}/{chapter.notebook_name}", tokens["ann"],
            {"type": "notebook", "format": "json", "content": notebook})
    assert hub.api("POST", f"/user/ann/assignments/submit?{query}", tokens["ann"], body=b"")["success"]
    [graded] = wait_for(lambda: [r for r in mine(hub, tokens["ann"]) if r["status"] == "graded"], 300,
                        "the submission to be graded on submit")
    assert graded["pending"], graded  # written answers wait for a hand grade
    pending = wait_for(lambda: platform.scores("ann", CHAPTER)["scores"], 120, "the pending score in the LMS")
    assert [(s["score_given"], s["grading_progress"]) for s in pending] == [
        (pytest.approx(graded["score"]), "PendingManual")], (graded, pending)
    assert platform.scores("ann", CHAPTER)["gradebook"] is None  # not a final 0 in the LMS's gradebook

    # The TA hand-grades every written answer in the shared Formgrader; nobody presses anything else.
    wait_for(lambda: answering(lambda: hub.api("GET", f"{FORMGRADER}/manage_assignments", tokens["tim"], raw=True)),
             120, "the shared Formgrader")
    [submission] = hub.api("GET", f"{FORMGRADER}/api/submitted_notebooks/{chapter.assignment}/{chapter.name}",
                           tokens["tim"])
    for grade in hub.api("GET", f"{FORMGRADER}/api/grades?submission_id={submission['id']}", tokens["tim"]):
        if grade["name"] in graded["pending"]:
            hub.api("PUT", f"{FORMGRADER}/api/grade/{grade['id']}", tokens["tim"],
                    {"manual_score": max(grade["max_score"] - 1, 0), "extra_credit": None})

    def final() -> dict | None:
        scores = platform.scores("ann", CHAPTER)
        return scores if scores["gradebook"] and scores["scores"][-1]["grading_progress"] == "FullyGraded" else None
    lms = wait_for(final, 180, "the hand-graded total in the LMS's gradebook")
    [row] = [r for r in csv.DictReader((hub.course / "grades.csv").open())
             if r["student_id"] == "ann" and r["assignment"] == chapter.assignment]
    [counted] = [r for r in mine(hub, tokens["ann"]) if r["status"] == "graded"]
    total, posted = float(row["score"]), lms["scores"][-1]
    assert not counted["pending"] and counted["score"] == pytest.approx(total), (counted, row)
    assert posted["score_given"] == pytest.approx(total), (row, lms)  # the class's one total, in the LMS
    assert lms["gradebook"]["score"] == pytest.approx(total / posted["score_maximum"]), (row, lms)
    assert total > graded["score"], (graded, row)  # the hand grades are in it


@pytest.mark.integration
def test_a_forged_replayed_misaddressed_expired_or_foreign_launch_is_refused_with_nothing_recorded(lti_class,
                                                                                                  tmp_path):
    """Each launch runs the real OIDC flow in Chromium (the hub's login initiation, the platform's auth page) and
    has the form the platform posts altered on its way to the hub; claims changed are signed again with the
    platform's own key, so each is refused for its claim, not its signature. Each refusal says why on the page
    and records nothing: no hub user, no login (cy, a learner on the roster, is never logged in), no LMS
    context, no nonce used. A replay is ann's accepted launch posted again: with her browser's login cookies (the nonce
    already used), and into another login (the nonce not this browser's)."""
    platform = lti_class.platform
    key = platform.signing_key()
    [ann] = [sub for sub, user in json.loads((lti_class.folder / "accounts.json").read_text()).items() if user == "ann"]
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    now = int(time.time())
    cases = {  # name: (what the hub is posted instead of the platform's form, what the refusal says)
        "forged": (lambda form: forged(form, sub=ann),  # cy's launch made ann's
                   "forged launch: its signature is not the LMS's"),
        "wrong audience": (lambda form: altered(form, key, aud="another-tool"),
                           f"wrong audience: the launch is not for this tool ({platform.client_id})"),
        "expired": (lambda form: altered(form, key, iat=now - 7200, exp=now - 3600),
                    "the launch has expired: start it again from the LMS"),
        "unknown platform": (lambda form: altered(form, (stranger, "elsewhere-1"), iss="https://lms.elsewhere.example"),
                             "unknown platform: the issuer 'https://lms.elsewhere.example' is not registered"),
    }
    kept = {}

    def keep(form: dict) -> dict:  # ann's accepted launch: its form and the hub's login cookies it goes with
        kept["form"], kept["cookies"] = form, [c for c in page.send("Network.getCookies", urls=[lti_class.hub.url])[
            "cookies"] if c["name"].startswith("lti13authenticator")]
        return form

    def replayed(form: dict) -> dict:  # the same post again, this browser's login cookies put back as they were
        for c in kept["cookies"]:
            page.send("Network.setCookie", url=lti_class.hub.url + c["path"],
                      **{k: c[k] for k in ("name", "value", "path", "httpOnly", "sameSite") if k in c},
                      **({"expires": c["expires"]} if c.get("expires", -1) > 0 else {}))
        return kept["form"]

    outcomes = {}
    with chromium(tmp_path / "chrome", "the LTI launch refusals") as page:
        for name, (alter, _) in cases.items():
            before = lti_class.recorded()
            intercepted_launch(page, platform.launch_url("cy", CHAPTER), alter)
            outcomes[name] = (answer(page, lti_class.hub.url), lti_class.recorded() == before)
        intercepted_launch(page, platform.launch_url("ann", CHAPTER), keep)
        wait_for(lambda: "/user/ann/" in (page.js("location.href") or ""), 120, "ann's accepted launch")
        cases["replayed"] = (replayed, "this launch was already used (a replayed launch)")
        cases["replayed into another login"] = (
            lambda form: {**form, "id_token": kept["form"]["id_token"]},
            "the launch's nonce is not the one this browser's login issued")
        for name in ("replayed", "replayed into another login"):
            before = lti_class.recorded()
            intercepted_launch(page, platform.launch_url("ann", CHAPTER), cases[name][0])
            outcomes[name] = (answer(page, lti_class.hub.url), lti_class.recorded() == before)
    wrong = {name: outcome for name, outcome in outcomes.items()
             if not (cases[name][1] in outcome[0] and outcome[1])}  # every case's outcome, in one failure
    assert not wrong, wrong
    assert "cy" not in lti_class.logged_in()

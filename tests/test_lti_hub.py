"""The hub with LTI 1.3 (COURSE_LTI, grader.classroom.lti.hub): the configuration a class gets, and a learner
launched from a real platform (Open edX's lti_consumer, tests/lti_platform.py) in Chromium, who lands on the
hub logged in as the hub user their LMS id maps to, in the chapter their link names."""
from __future__ import annotations

import json
import os
import subprocess
import urllib.parse

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from grader.classroom.lti.launch import derived_name
from tests.lti_platform import Tool, lti_platform
from tests.test_browser import chromium, free_port, http_ok, wait_for
from tests.test_hub import BIN, DEPLOY, PROXY, load_hub_config

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


@pytest.mark.integration
def test_a_learner_launched_from_the_lms_lands_logged_in_on_the_chapter(tmp_path):
    if not PROXY.exists():
        pytest.fail("configurable-http-proxy is missing: `make hub-setup` installs it into .hub/")
    port = free_port()
    hub_url = f"http://127.0.0.1:{port}"
    tool = Tool(login_url=f"{hub_url}/hub/lti13/oauth_login", launch_url=f"{hub_url}/hub/lti13/oauth_callback",
                jwks_url=f"{hub_url}/hub/lti13/jwks", target_link_uri=f"{hub_url}/hub/?chapter={{chapter}}")
    with lti_platform(tool, chapters=[CHAPTER]) as platform:
        ann = platform.add_user("ann", role="student", name="Ann Lee", email="ann@example.org")
        eve = platform.add_user("eve", role="student", name="ann")  # in the LMS, not in this class
        folder = lti_folder(tmp_path / "lti", registration(
            platform.issuer, platform.client_id, platform.deployment_id, platform.auth_login_url,
            platform.auth_token_url, platform.jwks_url), roster=[{"sub": ann, "role": "learner", "hub_user": "ann"}],
            accounts={ann: "ann"})
        state = tmp_path / "state"
        env = dict(os.environ, COURSE_HUB_PORT=str(port), COURSE_HUB_API_PORT=str(free_port()),
                   COURSE_HUB_STATE=str(state), COURSE_EXCHANGE_ROOT=str(tmp_path / "exchange"),
                   COURSE_DIRECTORY=str(tmp_path / "course"), COURSE_HUB_SPAWNER="simple",
                   COURSE_GRADING_SERVICE="off", COURSE_LTI=str(folder))
        log = tmp_path / "hub.log"
        hub = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(DEPLOY / "jupyterhub_config.py")], cwd=tmp_path,
                               env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: hub.poll() is None and http_ok(f"{hub_url}/hub/api"), 90, "JupyterHub to start")
            with chromium(tmp_path / "chrome", "the LTI launch into the hub") as page:
                page.send("Page.navigate", url=platform.launch_url("eve", CHAPTER))
                wait_for(lambda: "LTI launch refused" in (page.js("document.body && document.body.innerText") or ""),
                         60, "the refusal page")
                refused = page.js("document.body.innerText")
                page.send("Page.navigate", url=platform.launch_url("ann", CHAPTER))
                wait_for(lambda: "/lab/tree/" in (page.js("location.href") or ""), 120, "the chapter in JupyterLab")
                landed = urllib.parse.urlsplit(page.js("location.href")).path
        finally:
            hub.terminate()
            hub.wait(timeout=60)
        hub_log = log.read_text()
    assert f"{derived_name(platform.issuer, eve)} is not a learner of this class" in refused, hub_log[-3000:]
    assert landed == f"/user/ann/lab/tree/{CHAPTER}/positional_encoding.ipynb", hub_log[-3000:]
    users = subprocess.run(["sqlite3", str(state / "jupyterhub.sqlite"), "select name from users"],
                           capture_output=True, text=True).stdout.split()
    assert "ann" in users and derived_name(platform.issuer, eve) not in users and "eve" not in users

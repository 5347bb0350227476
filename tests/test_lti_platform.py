"""The LTI 1.3 test platform (tests/lti_platform.py, Open edX's lti_consumer) works with a tool written to the
standard: a minimal pylti1p3 tool, here, accepts a launch from it in Chromium, posts an AGS score to its line item
and reads its NRPS roster; the platform records the score in its gradebook. The course's own tool (grader's LTI
package) is tested against the same platform elsewhere; this proves the platform."""
import datetime
import json
import urllib.parse
import urllib.request

import pytest
import tornado.ioloop
import tornado.web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pylti1p3.cookie import CookieService
from pylti1p3.exception import LtiException
from pylti1p3.grade import Grade
from pylti1p3.message_launch import MessageLaunch
from pylti1p3.oidc_login import OIDCLogin
from pylti1p3.redirect import Redirect
from pylti1p3.registration import Registration
from pylti1p3.request import Request
from pylti1p3.session import SessionService
from pylti1p3.tool_config import ToolConfDict

from tests.lti_platform import Tool, lti_platform
from tests.test_browser import chromium, serving, wait_for

pytestmark = pytest.mark.integration


def fetch_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.load(reply)


def test_platform_registers_the_tool_serves_its_keys_and_stops():
    tool = Tool(login_url="http://127.0.0.1:9/login", launch_url="http://127.0.0.1:9/launch",
                jwks_url="http://127.0.0.1:9/jwks")
    with lti_platform(tool, chapters=["01_attention", "02_transformer"]) as platform:
        keys = fetch_json(platform.jwks_url)["keys"]
        assert [key["kty"] for key in keys] == ["RSA"] and keys[0]["kid"]
        assert set(platform.chapters) == {"01_attention", "02_transformer"}
        assert platform.chapters["01_attention"].resource_link_id.endswith("block@01_attention")
        sub = platform.add_user("ann", role="student", name="Ann Lee", email="ann@example.org")
        start = urllib.parse.urlsplit(platform.launch_url("ann", "01_attention"))
        query = dict(urllib.parse.parse_qsl(start.query))
        assert f"{start.scheme}://{start.netloc}{start.path}" == tool.login_url
        assert query["iss"] == platform.issuer and query["client_id"] == platform.client_id
        assert query["login_hint"] == sub and query["target_link_uri"] == tool.launch_url
        roster = platform.memberships("01_attention")["members"]
        assert roster == [{"status": "Active", "user_id": sub, "name": "Ann Lee", "email": "ann@example.org",
                           "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"]}]
        with pytest.raises(ValueError, match="role must be one of"):
            platform.add_user("bob", role="owner")
        process, url = platform.process, platform.url
    assert process.poll() is not None, "the platform still runs after the block"
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)


# A minimal LTI 1.3 tool on pylti1p3's generic classes, served by tornado: just enough to accept a launch, post one
# AGS score for the launched user and read the NRPS roster (what a tool library does; the course's tool is elsewhere).
SESSION: dict = {}  # one browser: the tool keeps one session


class ToolRequest(Request):
    def __init__(self, handler):
        self.handler = handler

    @property
    def session(self):
        return SESSION

    def is_secure(self) -> bool:
        return False

    def get_param(self, key: str):
        return self.handler.get_argument(key, None)


class ToolCookies(CookieService):
    def __init__(self, handler):
        self.handler = handler

    def get_cookie(self, name):
        return self.handler.get_cookie(f"{self._cookie_prefix}-{name}")

    def set_cookie(self, name, value, exp=3600):
        self.handler.set_cookie(f"{self._cookie_prefix}-{name}", str(value), path="/", httponly=True)


class ToolRedirect(Redirect):
    def __init__(self, handler, location):
        self.handler, self.location = handler, location

    def do_redirect(self):
        self.handler.redirect(self.location)

    def do_js_redirect(self):
        self.do_redirect()

    def set_redirect_url(self, location):
        self.location = location

    def get_redirect_url(self):
        return self.location


class ToolLogin(OIDCLogin):
    def __init__(self, handler, config):
        request = ToolRequest(handler)
        super().__init__(request, config, SessionService(request), ToolCookies(handler))
        self.handler = handler

    def get_redirect(self, url):
        return ToolRedirect(self.handler, url)

    def get_response(self, html):
        self.handler.write(html)


class ToolLaunch(MessageLaunch):
    def __init__(self, handler, config):
        request = ToolRequest(handler)
        super().__init__(request, config, SessionService(request), ToolCookies(handler))

    def _get_request_param(self, key):
        return self._request.get_param(key)


def score(sub: str, activity: str, grading: str, given: float | None = None) -> Grade:
    grade = (Grade().set_user_id(sub).set_activity_progress(activity).set_grading_progress(grading)
             .set_timestamp(datetime.datetime.now(datetime.timezone.utc).isoformat()))
    return grade if given is None else grade.set_score_given(given).set_score_maximum(10).set_comment("hand-graded")


def minimal_tool(config: dict, launches: list):
    """The tool's tornado application; `config` is filled once the platform has given its values."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo).decode()

    def tool_config():
        platform = config["platform"]
        conf = ToolConfDict({platform.issuer: [{
            "default": True, "client_id": platform.client_id, "auth_login_url": platform.auth_login_url,
            "auth_token_url": platform.auth_token_url, "key_set_url": platform.jwks_url,
            "deployment_ids": [platform.deployment_id]}]})
        conf.set_private_key(platform.issuer, private_pem, client_id=platform.client_id)
        conf.set_public_key(platform.issuer, public_pem, client_id=platform.client_id)
        return conf

    class Login(tornado.web.RequestHandler):
        def get(self):
            ToolLogin(self, tool_config()).redirect(f"{config['url']}/launch")

        post = get

    class Launch(tornado.web.RequestHandler):
        async def post(self):
            # Blocking calls back to the platform (token, AGS, NRPS; the platform fetches our JWKS meanwhile)
            # run off the event loop.
            try:
                done = await tornado.ioloop.IOLoop.current().run_in_executor(None, self.launch)
            except (LtiException, OSError, KeyError, ValueError) as error:  # shown on the page, not after a timeout
                done = f"refused: {type(error).__name__}: {error}"
            self.write({"done": done})

        def launch(self):
            launch = ToolLaunch(self, tool_config())
            data = launch.get_launch_data()
            launch.get_ags().put_grade(score(data["sub"], "Submitted", "PendingManual"))
            launches.append({"launch": launch, "data": data, "members": launch.get_nrps().get_members()})
            return f"launched {data['sub']}"

    class Keys(tornado.web.RequestHandler):
        def get(self):
            self.write({"keys": [Registration.get_jwk(public_pem)]})

    return tornado.web.Application([("/login", Login), ("/launch", Launch), ("/jwks", Keys)])


def test_a_standard_tool_is_launched_posts_a_score_and_reads_the_roster(tmp_path):
    config, launches = {}, []
    with serving(minimal_tool(config, launches)) as tool_url:
        config["url"] = tool_url
        tool = Tool(login_url=f"{tool_url}/login", launch_url=f"{tool_url}/launch", jwks_url=f"{tool_url}/jwks",
                    target_link_uri=f"{tool_url}/chapters/{{chapter}}")
        with lti_platform(tool, chapters=["01_attention", "02_transformer"]) as platform:
            config["platform"] = platform
            ann = platform.add_user("ann", role="student", name="Ann Lee", email="ann@example.org")
            ta = platform.add_user("tim", role="Community TA", name="Tim Ta", email="tim@example.org")
            with chromium(tmp_path / "chrome", "the LTI platform's launch") as page:
                page.send("Page.navigate", url=platform.launch_url("ann", "02_transformer"))
                done = wait_for(lambda: page.js("document.body && document.body.innerText.includes('done') "
                                                "&& JSON.parse(document.body.innerText).done"), 60,
                                "the tool's page after the launch")
                assert done == f"launched {ann}", platform.log()
            pending = platform.scores("ann", "02_transformer")
            # Later (a TA's hand grade), the tool posts the final score through the same launch's AGS service.
            launches[0]["launch"].get_ags().put_grade(score(ann, "Completed", "FullyGraded", given=7))
            final = platform.scores("ann", "02_transformer")
            assert platform.scores("ann", "01_attention") == {"scores": [], "gradebook": None}
    (launch,) = launches
    claims = launch["data"]
    assert claims["sub"] == ann and claims["iss"] == platform.issuer and claims["aud"] == platform.client_id
    link = platform.chapters["02_transformer"]
    assert claims["https://purl.imsglobal.org/spec/lti/claim/resource_link"]["id"] == link.resource_link_id
    assert claims["https://purl.imsglobal.org/spec/lti/claim/context"]["id"] == platform.context_id
    assert claims["https://purl.imsglobal.org/spec/lti/claim/target_link_uri"] == f"{tool_url}/chapters/02_transformer"
    assert "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner" in claims[
        "https://purl.imsglobal.org/spec/lti/claim/roles"]
    assert claims["https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"]["lineitem"] == link.lineitem_url
    # Pending is recorded as pending (no score, nothing in the gradebook), not as 0.
    assert [(s["score_given"], s["grading_progress"]) for s in pending["scores"]] == [(None, "PendingManual")]
    assert pending["gradebook"] is None
    # lti_consumer keeps one score per learner and line item: the latest.
    assert [(s["score_given"], s["score_maximum"], s["grading_progress"]) for s in final["scores"]] == [
        (7, 10, "FullyGraded")]
    assert final["gradebook"] == {"score": 0.7, "max_score": 1.0, "comment": "hand-graded"}
    roles = {m["user_id"]: set(m["roles"]) for m in launch["members"]}
    assert roles == {ann: {"http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"},
                     ta: {"http://purl.imsglobal.org/vocab/lis/v2/membership#Learner",
                          "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"}}

"""The LTI 1.3 test platform (tests/lti_platform.py, Open edX's lti_consumer) works with a tool written to the
standard: a minimal pylti1p3 tool, here, accepts a launch from it in Chromium, posts an AGS score to its line item
and reads its NRPS roster; the platform records the score in its gradebook. The course's own tool (grader's LTI
package) is tested against the same platform elsewhere; this proves the platform."""
import json
import urllib.parse
import urllib.request

import pytest

from tests.lti_platform import Tool, lti_platform

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

"""A real LTI 1.3 platform for the tests: Open edX's `lti_consumer` (PyPI lti-consumer-xblock, the code the Open
edX LMS runs to launch tools and serve Assignment and Grade Services and Names and Role Provisioning) on a free
port of 127.0.0.1, in a fresh temporary database, from its own virtualenv (`make lti-platform-setup`).

    with lti_platform(Tool(login_url=..., launch_url=..., jwks_url=...), chapters=["01_attention"]) as platform:
        platform.issuer, platform.client_id, platform.deployment_id       # what the tool registers
        platform.auth_login_url, platform.auth_token_url, platform.jwks_url
        platform.chapters["01_attention"].resource_link_id               # .lineitem_url, .memberships_url
        sub = platform.add_user("ann", role="student", name="Ann", email="ann@example.org")  # LTI `sub`
        page.navigate(platform.launch_url("ann", "01_attention"))       # the whole OIDC launch, in Chromium
        platform.scores("ann", "01_attention")     # what the tool posted (AGS), and the platform's gradebook
        platform.memberships("01_attention")       # the roster NRPS serves
        pem, kid = platform.signing_key()          # the platform's launch signing key (to re-sign altered tokens)

The tool's side stays outside: nothing here imports the course's own LTI code. tests/lti_platform_site/ is the
Django site that hosts lti_consumer in place of the LMS: lti_consumer's launch, token, keyset, AGS and NRPS views
and models run unchanged; the site answers the few calls they make into edx-platform (course members, external
user ids, the block a score is published to: host/apps.py). xblock-sdk's workbench is not used: it renders the
block, but lti_consumer's LTI 1.3 views make those same edx-platform calls, which the workbench lacks."""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.test_browser import free_port

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "tests" / "lti_platform_site"
PYTHON = Path(os.environ.get("COURSE_LTI_PLATFORM_VENV", ROOT / ".lti-platform" / "venv")) / "bin" / "python"
COURSE = "course-v1:TransformersCourse+T1+2026"


@dataclass(frozen=True)
class Tool:
    """What an LMS administrator pastes when registering the tool: its URLs and its key (a JWKS URL or a PEM).

    `launch_url` is the redirect URI the id_token is posted to; `target_link_uri` is where a launch from a chapter
    means to land ("{chapter}" in it is replaced by the chapter's name; default: `launch_url`), as JupyterHub's
    ltiauthenticator has them (its oauth_callback, and the page to go to next)."""
    login_url: str
    launch_url: str
    jwks_url: str = ""
    public_key: str = ""
    target_link_uri: str = ""

    def __post_init__(self):
        if not (self.jwks_url or self.public_key):
            raise ValueError("a tool needs its JWKS URL or its public key (PEM) for the platform to check its tokens")


@dataclass(frozen=True)
class ResourceLink:
    """One chapter placed in the course: an lti_consumer block with its AGS line item and NRPS on."""
    resource_link_id: str
    config_id: str
    lineitem_url: str
    lineitems_url: str
    memberships_url: str


class Platform:
    def __init__(self, url: str, key: str, described: dict, process: subprocess.Popen, state: Path):
        self.url, self._key, self.process, self.state = url, key, process, state
        self.issuer = described["issuer"]
        self.client_id = described["client_id"]
        self.deployment_id = described["deployment_id"]
        self.auth_login_url = described["auth_login_url"]
        self.auth_token_url = described["auth_token_url"]
        self.jwks_url = described["jwks_url"]
        self.context_id = described["context_id"]
        self.chapters = {name: ResourceLink(**link) for name, link in described["chapters"].items()}

    def _call(self, action: str, **body) -> dict:
        request = urllib.request.Request(f"{self.url}/harness/{action}", data=json.dumps(body).encode(),
                                         headers={"X-Harness-Key": self._key}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return json.load(reply)
        except urllib.error.HTTPError as error:
            raise ValueError(f"the LTI platform refused {action} {body}: {error.read().decode()}") from None

    def add_user(self, username: str, role: str = "student", name: str = "", email: str = "") -> str:
        """A course member with an Open edX course role (student, staff, instructor, Community TA: the launch and
        NRPS map them to LIS roles, a Community TA to Learner and TeachingAssistant); returns the stable id the
        platform sends as `sub` (and NRPS as user_id)."""
        return self._call("users", username=username, role=role, name=name, email=email)["user_id"]

    def launch_url(self, username: str, chapter: str) -> str:
        """Where the browser goes when `username` clicks `chapter` in the course: the tool's login initiation URL
        (iss, login_hint, lti_message_hint, target_link_uri) as the lti_consumer block renders it. Opening it runs
        the OIDC flow: tool -> platform's auth endpoint -> auto-posted id_token to the tool's launch URL."""
        return self._call("launch", username=username, chapter=chapter)["url"]

    def scores(self, username: str, chapter: str) -> dict:
        """{"scores": [the AGS score the tool posted: lti_consumer keeps the latest per learner and line item],
        "gradebook": the grade the platform published from a FullyGraded score ({score as a fraction, max_score,
        comment}), or None}."""
        return self._call("scores", username=username, chapter=chapter)

    def memberships(self, chapter: str) -> dict:
        """The NRPS context membership the platform serves for `chapter` (names and emails shared)."""
        return self._call("memberships", chapter=chapter)

    def signing_key(self) -> tuple[str, str]:
        """(the private key the platform signs its id_tokens with, as PEM; its key id): for tokens the tests alter
        and sign again as the platform would."""
        key = self._call("signing_key")
        return key["pem"], key["kid"]

    def log(self) -> str:
        return "".join((self.state / name).read_text(errors="replace")[-4000:]
                       for name in ("server.log", "platform.log") if (self.state / name).exists())


def require_platform() -> Path:
    if not PYTHON.exists():
        if os.environ.get("CI") or os.environ.get("COURSE_REQUIRE_LTI_PLATFORM") == "1":
            pytest.fail(f"no LTI platform at {PYTHON}: `make lti-platform-setup` installs it")
        pytest.skip("no LTI platform installed (`make lti-platform-setup`)")
    return PYTHON


@contextlib.contextmanager
def lti_platform(tool: Tool, chapters=("01_attention",), score_maximum: float = 100):
    """The running platform with `tool` registered and one resource link per chapter; stopped (its process group
    ended, its temporary folder removed) on exit."""
    python = require_platform()
    with tempfile.TemporaryDirectory(prefix="lti-platform-") as state_dir:
        state = Path(state_dir)
        (state / "tool.json").write_text(json.dumps({
            "course": COURSE, "login_url": tool.login_url, "launch_url": tool.launch_url,
            "jwks_url": tool.jwks_url, "public_key": tool.public_key, "chapters": list(chapters),
            "target_link_uri": tool.target_link_uri or tool.launch_url,
            "score_maximum": score_maximum}))
        url, key = f"http://127.0.0.1:{free_port()}", secrets.token_urlsafe(24)
        env = {**os.environ, "LTI_PLATFORM_STATE": str(state), "LTI_PLATFORM_URL": url, "LTI_PLATFORM_KEY": key}
        with open(state / "server.log", "wb") as log:
            process = subprocess.Popen([str(python), str(SITE / "serve.py")], cwd=state, env=env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        try:
            described = _wait_ready(process, state, url, key)
            yield Platform(url, key, described, process, state)
        finally:
            _stop(process)


def _wait_ready(process, state: Path, url: str, key: str) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the LTI platform exited ({process.returncode}):\n"
                               f"{(state / 'server.log').read_text(errors='replace')[-4000:]}")
        if (state / "platform.json").exists():
            request = urllib.request.Request(f"{url}/harness/health", headers={"X-Harness-Key": key})
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(request, timeout=2):
                    return json.loads((state / "platform.json").read_text())
        time.sleep(0.2)
    raise RuntimeError("the LTI platform did not answer within 120 s")


def _stop(process: subprocess.Popen):
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

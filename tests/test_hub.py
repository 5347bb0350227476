"""A class on a real JupyterHub, started from deploy/jupyterhub/ as shipped. The instructor releases
chapter 02 (`grader release` in a terminal, then their Formgrader's release to nbgrader's exchange);
learner 1 fetches and submits it in headless Chromium from the Assignments panel, learner 2 through the
same server endpoints the panel calls; the instructor collects (Formgrader), runs `grader autograde` on
the course directory's own submitted/, releases feedback (Formgrader); each learner fetches their own.
Screenshots go to test-output/hub/.

What this shows and what it does not: one hub, the simple local spawner (every single-user server
runs as this unix user, a home per learner) and the throwaway dummy authenticator. Learners are kept
apart by nbgrader's exchange (what it lists and fetches for each), not by the file system: a real class
adds PAM or OAuth/LTI logins and a unix user or a container per learner (deploy/jupyterhub/ says how).

The instructor's commands are typed into a terminal of their own server, as they would type them:
a login shell, whose /etc/profile resets PATH (deploy/jupyterhub/jupyter_server_config.py puts the
course's tools back). A learner's Validate must report a failing public check.

Needs configurable-http-proxy (`make test-integration` installs it into .hub/) and Chromium. The
tests of the deployment's pieces that need neither (a busy port, the terminal's PATH, Validate with
the deployment's nbgrader config) are not integration tests and run in `make test`.
"""
from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import secrets
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import websocket
from nbgrader.api import Gradebook

from grader.authoring import samples
from grader.boundary.score import points as shown_points
from grader.boundary.specs import exercises
from grader.chapters import REPO, find_chapter
from grader.classroom.grades.written import BANNER, written
from grader.classroom.ledger import Entry
from tests.test_browser import OUTPUT, Page, chromium, free_port, http_ok, wait_for
from tests.test_onsubmit import submit
from tests.test_service_lock import family, sandboxes

DEPLOY = REPO / "deploy" / "jupyterhub"
BIN = Path(sys.executable).parent
PROXY = REPO / ".hub" / "node_modules" / ".bin" / "configurable-http-proxy"
SHOTS = OUTPUT.parent / "hub"
COURSE_ID = "transformers-from-scratch"
CHAPTER = find_chapter("02")
LEARNERS = ("learner1", "learner2")


@dataclass
class Hub:
    url: str
    password: str
    state: Path
    exchange: Path
    course: Path
    subdomains: bool = False  # COURSE_HUB_SUBDOMAIN_HOST: each server and service on its own origin

    def home(self, user: str) -> Path:
        return self.state / "home" / user

    def at(self, path: str) -> str:
        """The address of the hub's `path`: /user/<name>/… and /services/<name>/… on their own origins
        (<name>.<hub's host>, <name>--service.<hub's host>, as JupyterHub names them) when the hub has them."""
        found = re.match(r"/(user|services)/([^/]+)", path) if self.subdomains else None
        if not found:
            return self.url + path
        scheme, host = self.url.split("://")
        return f"{scheme}://{found[2]}{'--service' if found[1] == 'services' else ''}.{host}{path}"

    def api(self, method: str, path: str, token: str | None = None, body=None, raw: bool = False):
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Content-Type": "application/json", **({"Authorization": f"token {token}"} if token else {})}
        url, host = on_loopback(self.at(path))
        request = urllib.request.Request(url, method=method, data=data, headers={**headers, **host})
        with urllib.request.urlopen(request, timeout=180) as reply:
            text = reply.read()
        return text if raw else (json.loads(text) if text else None)

    def token(self, user: str) -> str:
        """A token for `user`, asked for with their password, as any hub API client would."""
        auth = {"auth": {"username": user, "password": self.password}}
        return self.api("POST", f"/hub/api/users/{user}/tokens", body=auth)["token"]

    def start(self, user: str, token: str) -> None:
        """Start the user's server (a no-op when an earlier test of this hub started it)."""
        if self.api("GET", f"/hub/api/users/{user}", token)["servers"].get("", {}).get("ready"):
            return
        self.api("POST", f"/hub/api/users/{user}/server", token)
        wait_for(lambda: self.api("GET", f"/hub/api/users/{user}", token)["servers"].get("", {}).get("ready"),
                 180, f"{user}'s server to start")

    def formgrader(self, token: str, action: str) -> None:
        """What the instructor's Formgrader buttons post (nbgrader release_assignment, collect, release_feedback)."""
        reply = self.api("POST", f"/user/instructor/formgrader/api/assignment/{CHAPTER.assignment}/{action}", token,
                         body=b"")
        assert reply.get("success"), (action, reply)

    def instructor(self, token: str, command: str) -> str:
        """A command as the instructor types it in a terminal of their server (a login shell)."""
        return run_in_terminal(self.at("/user/instructor"), token, command)


def on_loopback(url: str) -> tuple[str, dict]:
    """`url` to open from Python, and the Host header it needs: Chromium takes every *.localhost name for
    127.0.0.1 (a real class's per-user origins in the tests), this machine's resolver does not."""
    parts = urllib.parse.urlsplit(url)
    if not (parts.hostname or "").endswith(".localhost"):
        return url, {}
    return parts._replace(netloc=f"127.0.0.1:{parts.port}").geturl(), {"Host": parts.netloc}


def run_in_terminal(server: str, token: str, command: str, timeout: float = 900) -> str:
    """`command` typed into a new terminal of the Jupyter server at `server`; what the terminal showed.
    Fails unless the command exits 0."""
    auth = {"Authorization": f"token {token}"}
    server, host = on_loopback(server)
    request = urllib.request.Request(f"{server}/api/terminals", method="POST", headers={**auth, **host}, data=b"")
    with urllib.request.urlopen(request, timeout=60) as reply:
        name = json.loads(reply.read())["name"]
    named = {"host": host["Host"], "origin": f"http://{host['Host']}"} if host else {}
    ws = websocket.create_connection(f"ws{server.removeprefix('http')}/terminals/websocket/{name}",
                                     header=[f"{k}: {v}" for k, v in auth.items()], timeout=timeout, **named)
    marker, shown = secrets.token_hex(4), ""
    ws.send(json.dumps(["stdin", f"{command}; echo {marker}-$?-end\r"]))  # the echoed line shows `$?`, not digits
    deadline = time.monotonic() + timeout
    while not (done := re.search(rf"{marker}-(\d+)-end", shown)) and time.monotonic() < deadline:
        kind, *content = json.loads(ws.recv())
        shown += content[0] if kind == "stdout" else ""
    ws.close()
    urllib.request.urlopen(urllib.request.Request(f"{server}/api/terminals/{name}", method="DELETE",
                                                  headers={**auth, **host}), timeout=60)
    assert done and done[1] == "0", f"{command} failed in the terminal:\n{shown}"
    return shown


def test_make_hub_runs_its_programs_from_the_hub_state_folder():
    """`make hub` changes into the hub's state folder first: a program named relative to the
    repository (`.venv/bin/python` choosing a free port) is not found there."""
    shown = subprocess.run(["make", "-n", "hub"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    [start] = [line for line in shown.splitlines() if line.startswith("cd ")]
    assert not re.search(r"(?<![/\w.])\.venv/", start), start


def test_a_busy_port_stops_the_hub_with_its_reason(tmp_path, monkeypatch):
    from traitlets.config import Config

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        monkeypatch.setenv("COURSE_HUB_PORT", str(busy.getsockname()[1]))
        monkeypatch.setenv("COURSE_HUB_STATE", str(tmp_path))
        config = DEPLOY / "jupyterhub_config.py"
        with pytest.raises(SystemExit,
                           match=rf"cannot serve the hub on 127.0.0.1:{busy.getsockname()[1]}: .*COURSE_HUB_PORT"):
            exec(compile(config.read_text(), str(config), "exec"), {"get_config": Config, "__file__": str(config)})


def test_the_learners_help_menu_leads_to_the_grading_page(tmp_path, monkeypatch):
    """The override JupyterLab reads (deploy/jupyterhub/lab_settings.py) is valid for the main menu's schema,
    setup-class.sh writes it into the learners' environment, and the try-out hub gives it to the learners'
    servers alone. That JupyterLab shows it: tests/test_browser.py (the Help menu)."""
    import runpy
    from types import SimpleNamespace

    import jsonschema
    from traitlets.config import Config

    settings = runpy.run_path(str(DEPLOY / "lab_settings.py"))
    existing = tmp_path / "env" / "overrides.json"
    existing.parent.mkdir()
    existing.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}))
    written_to = settings["write"](existing.parent)
    found = json.loads(written_to.read_text(encoding="utf-8"))
    assert found["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}  # kept
    schema = json.loads((Path(sys.prefix) / "share/jupyter/lab/schemas/@jupyterlab/mainmenu-extension/plugin.json")
                        .read_text())
    jsonschema.validate(found[settings["PLUGIN"]], schema)
    [menu] = found[settings["PLUGIN"]]["menus"]
    assert menu["id"] == "jp-mainmenu-help" and menu["items"][0]["command"] == "help:open"
    assert menu["items"][0]["args"] == {"url": "/services/grading/", "text": "Grading page · 批改页面",
                                        "newBrowserTab": True}  # a new tab: the page refuses to be framed
    with pytest.raises(ValueError, match="grading page URL"):
        settings["overrides"]("javascript:alert(1)")
    setup = (DEPLOY / "setup-class.sh").read_text()
    assert ('"$LEARNER_ENV/bin/python" "$REPO/deploy/jupyterhub/lab_settings.py" "$LAB_SETTINGS"' in setup
            and 'LAB_SETTINGS="$LEARNER_ENV/share/jupyter/lab/settings"' in setup)

    for name, value in {"COURSE_HUB_PORT": str(free_port()), "COURSE_HUB_STATE": str(tmp_path / "state"),
                        "COURSE_HUB_SPAWNER": "simple", "COURSE_HUB_AUTHENTICATOR": "dummy",
                        "COURSE_HUB_PASSWORD": "try-out", "COURSE_EXCHANGE_ROOT": str(tmp_path / "exchange")}.items():
        monkeypatch.setenv(name, value)
    config = DEPLOY / "jupyterhub_config.py"
    hub = {"get_config": Config, "__file__": str(config)}
    exec(compile(config.read_text(), str(config), "exec"), hub)
    servers = {user: SimpleNamespace(user=SimpleNamespace(name=user), cmd=[]) for user in ("learner1", "instructor")}
    for spawner in servers.values():
        hub["c"].Spawner.pre_spawn_hook(spawner)
    given = tmp_path / "state" / "learner-lab-settings"
    assert servers["learner1"].cmd[1:] == [f"--LabApp.app_settings_dir={given}"] and servers["instructor"].cmd[1:] == []
    assert json.loads((given / "overrides.json").read_text(encoding="utf-8")) == settings["overrides"]()


def load_hub_config(tmp_path, monkeypatch, **settings):
    """deploy/jupyterhub/jupyterhub_config.py as the hub loads it, with a try-out's variables and `settings`."""
    from traitlets.config import Config

    for name, value in {"COURSE_HUB_PORT": str(free_port()), "COURSE_HUB_STATE": str(tmp_path / "state"),
                        "COURSE_HUB_SPAWNER": "simple", "COURSE_HUB_AUTHENTICATOR": "dummy",
                        "COURSE_HUB_PASSWORD": "try-out", "COURSE_EXCHANGE_ROOT": str(tmp_path / "exchange"),
                        "COURSE_DIRECTORY": str(tmp_path / "course"), **settings}.items():
        monkeypatch.setenv(name, value)
    config = DEPLOY / "jupyterhub_config.py"
    hub = {"get_config": Config, "__file__": str(config)}
    exec(compile(config.read_text(), str(config), "exec"), hub)
    return hub["c"]


def test_a_subdomain_host_gives_each_server_and_the_grading_page_an_origin(tmp_path, monkeypatch):
    """COURSE_HUB_SUBDOMAIN_HOST turns on JupyterHub's subdomain_host, and the learners' Help menu then leads to
    the grading service's own origin; without it (the try-out) the hub keeps one origin. Chromium tries both:
    test_a_page_a_learner_serves_cannot_act_as_the_instructor_who_opens_it."""
    import runpy

    settings = runpy.run_path(str(DEPLOY / "lab_settings.py"))
    assert settings["grading_url"]("") == "/services/grading/"
    assert settings["grading_url"]("https://hub.example.org:8443/") == \
        "https://grading--service.hub.example.org:8443/services/grading/"
    for wrong in ("hub.example.org", "https://hub.example.org/prefix", "javascript://x"):
        with pytest.raises(ValueError, match="COURSE_HUB_SUBDOMAIN_HOST"):
            settings["grading_url"](wrong)
    assert "subdomain_host" not in load_hub_config(tmp_path / "one", monkeypatch).JupyterHub
    config = load_hub_config(tmp_path / "own", monkeypatch, COURSE_HUB_SUBDOMAIN_HOST="https://hub.example.org")
    assert config.JupyterHub.subdomain_host == "https://hub.example.org"
    [item] = json.loads((tmp_path / "own" / "state" / "learner-lab-settings" / "overrides.json").read_text())[
        settings["PLUGIN"]]["menus"][0]["items"]
    assert item["args"]["url"] == "https://grading--service.hub.example.org/services/grading/"


def test_graders_get_the_shared_formgrader_and_no_admin(tmp_path, monkeypatch):
    """COURSE_GRADERS: a group, a role with access to the shared Formgrader and the grading service (named user
    by user: exact at each start), `--grader` for each on the grading service; learners get neither."""
    c = load_hub_config(tmp_path, monkeypatch, COURSE_LEARNERS="learner1", COURSE_GRADERS=" ta2,ta1 ")
    assert c.Authenticator.admin_users == {"instructor"}
    assert c.Authenticator.allowed_users == {"instructor", "learner1", "ta1", "ta2"}
    assert c.JupyterHub.load_groups == {"graders": {"users": ["ta1", "ta2"]}}
    roles = {role["name"]: role for role in c.JupyterHub.load_roles}
    assert roles["grader"]["users"] == ["ta1", "ta2"] and "groups" not in roles["grader"]
    assert set(roles["grader"]["scopes"]) == {"access:services!service=formgrader", "access:services!service=grading"}
    assert roles["user"]["scopes"] == ["self", "access:services!service=grading"]  # every user: no Formgrader
    services = {service["name"]: service for service in c.JupyterHub.services}
    command = services["grading"]["command"]
    assert [command[i + 1] for i, arg in enumerate(command) if arg == "--grader"] == ["ta1", "ta2"]
    assert services["grading"]["environment"]["COURSE_LEARNERS"] == "learner1"  # the class the identity gate admits
    assert "--no-check-owner" in command  # a try-out: one unix user for every server, so no owner tells who
    from types import SimpleNamespace

    as_user = {name: SimpleNamespace(user=SimpleNamespace(name=name)) for name in ("instructor", "learner1")}
    learners_of = c.Spawner.environment["COURSE_LEARNERS"]  # `grader collect`/`autograde` in the instructor's terminal
    assert (learners_of(as_user["instructor"]), learners_of(as_user["learner1"])) == ("learner1", "")
    shared = services["formgrader"]
    assert Path(shared["command"][0]).name == "jupyterhub-singleuser" and shared["cwd"] == str(tmp_path / "course")
    assert shared["environment"]["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [str(DEPLOY / "formgrader"), str(DEPLOY)]
    assert shared["environment"]["TRAITLETS_APPLICATION_RAISE_CONFIG_FILE_ERROR"] == "1"  # fails closed
    assert "--ServerApp.reraise_server_extension_failures=True" in shared["command"]


def test_no_graders_no_shared_formgrader_and_a_grader_is_no_learner(tmp_path, monkeypatch):
    c = load_hub_config(tmp_path, monkeypatch, COURSE_LEARNERS="learner1")
    assert [service["name"] for service in c.JupyterHub.services] == ["grading"]
    assert "grader" not in {role["name"] for role in c.JupyterHub.load_roles} and "--grader" not in \
        c.JupyterHub.services[0]["command"]
    with pytest.raises(SystemExit, match="learner1 cannot be a grader and also a learner"):
        load_hub_config(tmp_path, monkeypatch, COURSE_LEARNERS="learner1", COURSE_GRADERS="learner1,ta1")
    with pytest.raises(SystemExit, match="instructor cannot be a grader"):
        load_hub_config(tmp_path, monkeypatch, COURSE_GRADERS="instructor")


def test_a_terminal_login_shell_finds_the_course_tools(tmp_path):
    """As the hub starts a server (its environment with COURSE_BIN, PATH without the course's tools
    first): the terminal's login shell finds grader and nbgrader."""
    port, token = free_port(), secrets.token_hex(8)
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "COURSE_BIN": str(BIN), "JUPYTER_CONFIG_PATH": str(DEPLOY),
           "COURSE_EXCHANGE_ROOT": str(tmp_path / "exchange"), "LANG": "C.UTF-8"}
    server = subprocess.Popen([str(BIN / "jupyter-server"), f"--port={port}", f"--ServerApp.token={token}",
                               "--no-browser",
                               f"--ServerApp.root_dir={tmp_path}", *(["--allow-root"] if os.getuid() == 0 else [])],
                              env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: server.poll() is None and http_ok(f"{url}/api/status?token={token}"), 60, "the Jupyter server")
        shown = run_in_terminal(url, token, "command -v grader; command -v nbgrader; "
                                            "grader --help >/dev/null && nbgrader --version")
        assert f"{BIN}/grader" in shown and f"{BIN}/nbgrader" in shown, shown
    finally:
        server.terminate()
        server.wait(timeout=30)


def validate(notebook: Path) -> dict:
    """What a learner's Validate button gets: nbgrader's Validator with the class's nbgrader config."""
    from nbgrader.validator import Validator
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(DEPLOY)).load_config()
    return Validator(config=config).validate(str(notebook))


def test_validate_reports_a_failing_public_check(tmp_path):
    folder = tmp_path / CHAPTER.assignment
    shutil.copytree(REPO / "course" / CHAPTER.assignment, folder)  # the chapter as a learner fetches it
    nbformat.write(samples.partly_wrong(CHAPTER, mistakes=1), folder / CHAPTER.notebook_name)
    result = validate(folder / CHAPTER.notebook_name)
    wrong = samples.wrong_variants(CHAPTER)[0].exercise
    failed = [f for f in result.get("failed", []) if f["source"] != "YOUR ANSWER HERE"]
    assert [f["source"] for f in failed] == [f"checks.check_{wrong}({wrong})"], result
    # and it names each written answer not given yet
    unanswered = [f for f in result["failed"] if f["source"] == "YOUR ANSWER HERE"]
    assert len(unanswered) == len(written(CHAPTER.name)) and all("did not provide" in f["error"] for f in unanswered)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    if not PROXY.exists() and not shutil.which("configurable-http-proxy"):
        pytest.fail("configurable-http-proxy is missing: `make test-integration` installs it into .hub/")
    root = tmp_path_factory.mktemp("hub")
    state, exchange = root / "state", root / "exchange"
    exchange.mkdir(mode=0o777)  # the test's own exchange root, never /srv/nbgrader/exchange
    course = state / "home" / "instructor" / "course"
    course.mkdir(parents=True)
    port, password = free_port(), secrets.token_hex(8)
    env = dict(os.environ, COURSE_HUB_PORT=str(port), COURSE_HUB_API_PORT=str(free_port()),
               COURSE_HUB_STATE=str(state), COURSE_EXCHANGE_ROOT=str(exchange),
               COURSE_DIRECTORY=str(course), COURSE_HUB_AUTHENTICATOR="dummy", COURSE_HUB_PASSWORD=password,
               COURSE_HUB_SPAWNER="simple", COURSE_LEARNERS=",".join(LEARNERS),
               # the test drives the Assignments panel through JupyterLab's command registry
               COURSE_SERVER_ARGS="--LabApp.expose_app_in_browser=True")
    log = root / "hub.log"
    server = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(DEPLOY / "jupyterhub_config.py")], cwd=state, env=env,
                              stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: server.poll() is None and http_ok(f"http://127.0.0.1:{port}/hub/api"), 90,
                 "JupyterHub to start")
        yield Hub(f"http://127.0.0.1:{port}", password, state, exchange, course)
    finally:
        server.terminate()  # stops the single-user servers too
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        if SHOTS.is_dir():
            shutil.copyfile(log, SHOTS / "hub.log")



def guides_picture(shot: Path) -> None:
    """The guides' picture of the panel: the top of `shot`, written beside it, and into images/
    when COURSE_UPDATE_SCREENSHOTS=1 (after a change to what a learner sees there)."""
    from PIL import Image

    with Image.open(shot) as full:
        full.crop((0, 0, full.width, 400)).save(SHOTS / "hub-assignments.png", optimize=True)
    if os.environ.get("COURSE_UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(SHOTS / "hub-assignments.png", REPO / "images" / "hub-assignments.png")

@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("browser"), "the hub test") as page:
        yield page


PANEL = "#nbgrader-assignment-list"


def panel_button(page: Page, section: str, label: str) -> str:
    return (f"[...document.querySelectorAll('{PANEL} #{section} button')]"
            f".find(b => b.textContent.trim() === '{label}')")


def click_in_panel(page: Page, section: str, label: str, timeout: float = 120) -> None:
    button = panel_button(page, section, label)
    wait_for(lambda: page.js(f"!!({button}) && !({button}).disabled"), timeout, f"the panel's {label} button")
    page.js(f"({button}).click()")


def panel_text(page: Page, section: str) -> str:
    return page.js(f"(document.querySelector('{PANEL} #{section}') || {{}}).innerText || ''")


def contents_path() -> str:
    return f"/api/contents/{CHAPTER.assignment}/{CHAPTER.notebook_name}"


def save_notebook(hub: Hub, user: str, token: str, nb) -> None:
    """The learner's answers, saved through their server's contents API as JupyterLab saves them."""
    body = {"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(nb))}
    hub.api("PUT", f"/user/{user}{contents_path()}", token, body)


def assignment_action(hub: Hub, user: str, token: str, action: str):
    """What the Assignments panel posts: fetch, submit, fetch_feedback."""
    query = urllib.parse.urlencode({"course_id": COURSE_ID, "assignment_id": CHAPTER.assignment})
    return hub.api("POST", f"/user/{user}/assignments/{action}?{query}", token, body=b"")


def feedback_files(hub: Hub, user: str) -> list[Path]:
    return sorted((hub.home(user) / CHAPTER.assignment / "feedback").glob(f"*/{CHAPTER.name}.html"))


@pytest.mark.integration
def test_a_class_on_the_hub(hub, browser):
    started = time.monotonic()
    points = {name: ex.points for name, ex in exercises(CHAPTER.name).items()}
    total = sum(points.values())
    wrong = samples.wrong_variants(CHAPTER)[0].exercise  # learner 2's catalogued mistake

    # The instructor: the chapter into the hub's course directory (typed in a terminal of their
    # server, with the teaching guide's command), then nbgrader's exchange from their own Formgrader.
    tokens = {user: hub.token(user) for user in ("instructor", *LEARNERS)}
    hub.start("instructor", tokens["instructor"])
    hub.instructor(tokens["instructor"],
                   f"nbgrader --version && grader release {CHAPTER.number} --course-dir {hub.course}")
    hub.formgrader(tokens["instructor"], "release")
    formgrader = hub.api("GET", "/user/instructor/formgrader/api/assignments", tokens["instructor"])
    assert [(a["name"], a["status"]) for a in formgrader] == [(CHAPTER.assignment, "released")], formgrader

    # Learner 1 in Chromium: log in, open the Assignments panel, fetch, work, submit.
    page = browser
    page.send("Page.navigate", url=f"{hub.url}/hub/login")
    wait_for(lambda: page.js("!!document.querySelector('#username_input')"), 60, "the hub's login page")
    page.js(f"document.querySelector('#username_input').value = 'learner1';"
            f"document.querySelector('#password_input').value = '{hub.password}';"
            "document.querySelector('#login_submit').click()")
    wait_for(lambda: page.js("!!(window.jupyterapp && window.jupyterapp.commands"
                             " && window.jupyterapp.commands.hasCommand('nbgrader:open-assignment-list'))"),
             180, "JupyterLab with nbgrader in learner1's server")
    assert page.js("location.pathname").startswith("/user/learner1/lab")
    # A learner's JupyterLab has nbgrader's learner tools only (deploy/jupyterhub/learner/).
    assert page.js("['nbgrader:open-formgrader', 'nbgrader:open-create-assignment']"
                   ".filter(c => window.jupyterapp.commands.hasCommand(c))") == []
    page.js("window.jupyterapp.commands.execute('nbgrader:open-assignment-list').then(() => true)")
    wait_for(lambda: CHAPTER.assignment in panel_text(page, "released_assignments_list"), 120,
             "the released chapter in the Assignments panel")
    page.screenshot(SHOTS / "1-released.png")
    click_in_panel(page, "released_assignments_list", "Fetch")
    wait_for(lambda: (hub.home("learner1") / CHAPTER.assignment / CHAPTER.notebook_name).exists(), 60,
             "the fetched notebook in learner1's home")
    save_notebook(hub, "learner1", tokens["learner1"], samples.reference(CHAPTER))
    click_in_panel(page, "fetched_assignments_list", "Submit")
    wait_for(lambda: CHAPTER.assignment in panel_text(page, "submitted_assignments_list"), 120,
             "learner1's submission in the panel")
    page.screenshot(SHOTS / "2-submitted.png")

    # Learner 2 through the endpoints the panel calls, with a catalogued mistake.
    hub.start("learner2", tokens["learner2"])
    assignment_action(hub, "learner2", tokens["learner2"], "fetch")
    save_notebook(hub, "learner2", tokens["learner2"], samples.partly_wrong(CHAPTER, mistakes=1))
    # Validate, as the notebook's button asks the learner's server: the failing public check is reported.
    checked = hub.api("POST", "/user/learner2/assignments/validate", tokens["learner2"],
                      body={"path": f"{CHAPTER.assignment}/{CHAPTER.notebook_name}"})
    assert checked["success"] and [f["source"] for f in checked["value"].get("failed", [])
                                   if f["source"] != "YOUR ANSWER HERE"] == [f"checks.check_{wrong}({wrong})"], checked
    listed = assignment_action(hub, "learner2", tokens["learner2"], "submit")
    assert listed["success"], listed
    with pytest.raises(urllib.error.HTTPError, match="404"):  # no Formgrader in a learner's server
        hub.api("GET", "/user/learner2/formgrader/api/assignments", tokens["learner2"])

    # The instructor collects, autogrades the course directory's own submitted/, releases feedback.
    hub.formgrader(tokens["instructor"], "collect")
    submitted = hub.course / "submitted" / "learner1" / CHAPTER.assignment
    collected = (submitted / CHAPTER.notebook_name).read_bytes()
    summary = hub.instructor(tokens["instructor"],
                             f"grader autograde {hub.course / 'submitted'} --course-dir {hub.course} --jobs 2 --quiet")
    # The learner's own notebook is kept (grading stages the repaired one into submitted/), with nbgrader's timestamp.
    kept = hub.course / "originals" / "learner1" / CHAPTER.assignment
    assert (kept / CHAPTER.notebook_name).read_bytes() == collected
    assert (submitted / "timestamp.txt").read_text() == (kept / "timestamp.txt").read_text()
    # What Formgrader shows the instructor: a rubric under each written answer.
    graded = (hub.course / "autograded" / "learner1" / CHAPTER.assignment / CHAPTER.notebook_name).read_text()
    assert graded.count(BANNER) == len(written(CHAPTER.name))
    hub.formgrader(tokens["instructor"], "release_feedback")

    with Gradebook(f"sqlite:///{hub.course / 'gradebook.db'}") as gb:
        scores = {s.student.id: s.score for s in gb.find_assignment(CHAPTER.assignment).submissions}
        cells = {g.name: g.score
                 for g in gb.find_submission_notebook(CHAPTER.name, CHAPTER.assignment, "learner2").grades}
        stamps = {s.student.id: s.timestamp for s in gb.find_assignment(CHAPTER.assignment).submissions}
    assert scores["learner1"] == pytest.approx(total), summary
    assert 0 < scores["learner2"] < total, summary
    assert cells[f"test_{wrong}"] < points[wrong], cells
    assert all(cells[f"test_{name}"] == points[name] for name in points if name != wrong), cells
    assert all(stamps[user] is not None for user in LEARNERS), stamps  # the exchange's submission times
    rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader((hub.course / "grades.csv").open())
            if r["assignment"] == CHAPTER.assignment}
    assert rows == pytest.approx(scores), rows

    # Learner 1 fetches feedback in the panel; learner 2 through the endpoint. Each sees their own score.
    click_in_panel(page, "submitted_assignments_list", "Fetch Feedback")
    wait_for(lambda: feedback_files(hub, "learner1"), 120, "learner1's feedback")
    wait_for(lambda: "view feedback" in panel_text(page, "submitted_assignments_list").lower(), 60,
             "the panel's feedback link")
    page.js("[...document.querySelectorAll('button')].find(b => b.textContent.trim() === 'No')"
            "?.click() || true")  # JupyterLab's question about news, not part of the course
    time.sleep(1)
    page.screenshot(SHOTS / "3-feedback.png")
    guides_picture(SHOTS / "3-feedback.png")
    feedback_url = feedback_files(hub, "learner1")[0].relative_to(hub.home("learner1")).as_posix()
    page.send("Page.navigate", url=f"{hub.url}/user/learner1/files/{urllib.parse.quote(feedback_url)}")
    wait_for(lambda: "Score:" in page.js("document.body ? document.body.innerText : ''"), 60, "the feedback page")
    page.screenshot(SHOTS / "4-feedback-page.png")
    assignment_action(hub, "learner2", tokens["learner2"], "fetch_feedback")
    for user in LEARNERS:
        [feedback] = feedback_files(hub, user)  # one file each: their own
        possible = total + sum(item.points for item in written(CHAPTER.name).values())  # + the written answers
        # the heading may go on: "· 3 written answer(s) pending" until the instructor grades them (issue 36)
        score = f"<h4>{CHAPTER.name} (Score: {float(round(scores[user], 2))} / {float(possible)}"
        assert score in feedback.read_text(), (user, score)
        assert BANNER not in feedback.read_text()  # the rubric stays with the instructor
        # The learner gets this file alone: the chapter's figures are inside it, not links to images/.
        assert 'src="images/' not in feedback.read_text() and "data:image/png;base64" in feedback.read_text()

    # Learner 2 sees only their own submission and feedback through the exchange.
    query = urllib.parse.urlencode({"course_id": COURSE_ID})
    listing = hub.api("GET", f"/user/learner2/assignments?{query}", tokens["learner2"])
    assert listing["success"], listing
    seen = [a for a in listing["value"] if a["status"] == "submitted"]
    assert seen and {a["student_id"] for a in seen} == {"learner2"}, seen
    assert "learner1" not in json.dumps(listing["value"])
    print(f"the class on the hub took {time.monotonic() - started:.0f} s (after the hub started)")


ON_SUBMIT = find_chapter("03")  # chapter 02 is the instructor's batch above; 03 is graded on submit
SERVICE = "/services/grading/"


def login(page: Page, hub: Hub, user: str, ready: str = "!!(window.jupyterapp && window.jupyterapp.commands)") -> None:
    page.send("Page.navigate", url=f"{hub.url}/hub/login")
    wait_for(lambda: page.js("!!document.querySelector('#username_input')"), 60, "the hub's login page")
    page.js(f"document.querySelector('#username_input').value = '{user}';"
            f"document.querySelector('#password_input').value = '{hub.password}';"
            "document.querySelector('#login_submit').click()")
    wait_for(lambda: page.js(ready), 180, f"{user}'s JupyterLab")


def ledger_rows(hub: Hub, student: str) -> list[dict]:
    path = hub.course / "on-submit" / "ledger.sqlite"  # grader.classroom.ledger: one JSON row per entry
    with contextlib.closing(sqlite3.connect(path)) if path.is_file() else contextlib.nullcontext() as db:
        rows = [json.loads(data) for (data,) in db.execute("SELECT data FROM entries")] if db else []
    return sorted((r for r in rows if r["student"] == student and r["assignment"] == ON_SUBMIT.assignment),
                  key=lambda r: r["submitted_at"])


def submit_and_wait(hub: Hub, user: str, token: str, nb, status: str, timeout: float = 120) -> tuple[dict, float]:
    """Save, press Submit (the panel's endpoint), wait for the service's verdict; seconds it took."""
    body = {"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(nb))}
    hub.api("PUT", f"/user/{user}/api/contents/{ON_SUBMIT.assignment}/{ON_SUBMIT.notebook_name}", token, body)
    before = len(ledger_rows(hub, user))
    start = time.monotonic()
    query = urllib.parse.urlencode({"course_id": COURSE_ID, "assignment_id": ON_SUBMIT.assignment})
    assert hub.api("POST", f"/user/{user}/assignments/submit?{query}", token, body=b"")["success"]
    wait_for(lambda: len(ledger_rows(hub, user)) > before and ledger_rows(hub, user)[-1]["status"] == status,
             timeout, f"{user}'s submission to be {status}")
    return ledger_rows(hub, user)[-1], time.monotonic() - start


@pytest.mark.integration
def test_graded_on_submit(hub, browser):
    """The service grades each submission as it arrives (term.toml's [on_submit]), feedback comes back
    through Fetch Feedback, each learner's page shows their own rows; killed mid-grading, it restarts
    and loses nothing."""
    points = {name: ex.points for name, ex in exercises(ON_SUBMIT.name).items()}
    total = sum(points.values())
    wrong = samples.wrong_variants(ON_SUBMIT)[0].exercise
    (hub.course / "term.toml").write_text(f'[on_submit]\nchapters = ["{ON_SUBMIT.number}"]\nattempts = 2\n'
                                          'counts = "best"\n'  # learner2's own policy: one more attempt
                                          f'[accommodations.learner2]\n"{ON_SUBMIT.number}" = {{ attempts = 3 }}\n')
    tokens = {user: hub.token(user) for user in ("instructor", *LEARNERS)}
    hub.start("instructor", tokens["instructor"])
    hub.instructor(tokens["instructor"], f"grader release {ON_SUBMIT.number} --course-dir {hub.course}")
    reply = hub.api("POST", f"/user/instructor/formgrader/api/assignment/{ON_SUBMIT.assignment}/release",
                    tokens["instructor"], body=b"")
    assert reply.get("success"), reply
    for user in LEARNERS:
        hub.start(user, tokens[user])
        query = urllib.parse.urlencode({"course_id": COURSE_ID, "assignment_id": ON_SUBMIT.assignment})
        assert hub.api("POST", f"/user/{user}/assignments/fetch?{query}", tokens[user], body=b"")["success"]

    # Learner 1: one mistake. No instructor acts; the feedback comes back through Fetch Feedback.
    first, seconds = submit_and_wait(hub, "learner1", tokens["learner1"],
                                     samples.partly_wrong(ON_SUBMIT, mistakes=1), "graded")
    assert 0 < first["score"] < total, first
    query = urllib.parse.urlencode({"course_id": COURSE_ID, "assignment_id": ON_SUBMIT.assignment})
    hub.api("POST", f"/user/learner1/assignments/fetch_feedback?{query}", tokens["learner1"], body=b"")
    feedback = sorted((hub.home("learner1") / ON_SUBMIT.assignment / "feedback").glob("*/*.html"))
    assert feedback, "Fetch Feedback found nothing"
    print(f"learner1: Submit to graded in {seconds:.1f} s")
    # The learner's page, in Chromium behind the hub's login: the score and the mistake's check message.
    page = browser
    if "/user/learner1/" not in (page.js("location.pathname") or ""):
        login(page, hub, "learner1")
    page.send("Page.navigate", url=f"{hub.url}{SERVICE}")
    wait_for(lambda: "Your submissions, learner1" in page.js("document.body ? document.body.innerText : ''"), 60,
             "the grading service's page")
    text = " ".join(page.js("document.body.innerText").split())
    check = next(c for c in first["checks"] if c["name"] == f"test_{wrong}")
    message = " ".join(check["error"].split())[:60]  # the check that failed, and what it said
    most = total + sum(item.points for item in written(ON_SUBMIT.name).values())  # written answers pending
    assert f"{shown_points(first['score'])} / {shown_points(most)}" in text and wrong in text and message in text, text
    page.screenshot(SHOTS / "5-graded-on-submit.png")

    # Fixed: full marks, and "best" keeps them; a third attempt is refused, with the reason on the page.
    second, _ = submit_and_wait(hub, "learner1", tokens["learner1"], samples.reference(ON_SUBMIT), "graded")
    assert second["score"] == total
    third, _ = submit_and_wait(hub, "learner1", tokens["learner1"], samples.released(ON_SUBMIT), "refused")
    assert "2 attempts allowed" in third["reason"]
    page.send("Page.navigate", url=f"{hub.url}{SERVICE}")
    wait_for(lambda: "2 attempts allowed" in page.js("document.body ? document.body.innerText : ''"), 60,
             "the refusal on the page")

    # A regrade request in Chromium: learner1 asks about a written answer of the counted attempt through the
    # form on their page; the instructor accepts it on the class page with a hand score. One total everywhere.
    answer_id, answer = next(iter(written(ON_SUBMIT.name).items()))
    def learner1_rows() -> list[dict]:
        return json.loads(hub.api("GET", f"{SERVICE}api/mine", tokens["learner1"], raw=True))

    [counted] = [r for r in learner1_rows() if r.get("counted")]
    form = f"document.querySelector('input[name=key][value=\"{ledger_key(counted)}\"]').form"
    page.js(f"{form}.closest('details').open = true; {form}.item.value = '{answer_id}';"
            f"{form}.note.value = 'I named both <b>reasons</b><script>document.title = \"PWNED\"</script>';"
            f"{form}.querySelector('button').click()")
    wait_for(lambda: "I named both <b>reasons</b>" in page.js("document.body ? document.body.innerText : ''"), 60,
             "the request on the learner's page")
    [asked] = json.loads(hub.api("GET", f"{SERVICE}api/requests", tokens["instructor"], raw=True))
    assert (asked["student"], asked["item"], asked["status"]) == ("learner1", answer_id, "open"), asked
    page.send("Network.clearBrowserCookies")  # the instructor, in the same browser
    login(page, hub, "instructor")
    page.send("Page.navigate", url=f"{hub.url}{SERVICE}class")
    wait_for(lambda: "Regrade requests" in page.js("document.body ? document.body.innerText : ''"), 60,
             "the class page")
    text = page.js("document.body.innerText")
    assert "<script>document.title" in text and page.js("document.title") != "PWNED", text  # the note is text
    assert f"learner2 · {ON_SUBMIT.assignment}: " in text, text  # term.toml's accommodation, on the class page
    answer_form = f"document.querySelector('form[action$=\"{asked['id']}/answer\"]')"
    page.js(f"{answer_form}.decision.value = 'accept'; {answer_form}.points.value = '{answer.points:g}';"
            f"{answer_form}.reason.value = 'both reasons are there'; {answer_form}.querySelector('button').click()")
    wait_for(lambda: json.loads(hub.api("GET", f"{SERVICE}api/requests", tokens["learner1"], raw=True))[0]["status"]
             == "accepted", 60, "the accepted request")
    [regraded] = [r for r in learner1_rows() if r.get("counted")]
    assert regraded["score"] == pytest.approx(counted["score"] + answer.points), (counted, regraded)
    assert answer_id not in regraded["pending"] and answer_id in counted["pending"], (counted, regraded)
    page.screenshot(SHOTS / "6-regrade-request-answered.png")

    # Learner 2: the service is killed while it grades; the hub restarts it; graded once, nothing lost.
    body = {"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(samples.reference(ON_SUBMIT)))}
    hub.api("PUT", f"/user/learner2/api/contents/{ON_SUBMIT.assignment}/{ON_SUBMIT.notebook_name}",
            tokens["learner2"], body)
    assert hub.api("POST", f"/user/learner2/assignments/submit?{query}", tokens["learner2"], body=b"")["success"]
    wait_for(lambda: [r["status"] for r in ledger_rows(hub, "learner2")] == ["grading"], 60, "learner2 being graded")
    pid = int((hub.course / "on-submit" / "service.pid").read_text())
    os.kill(pid, 9)
    wait_for(lambda: [r["status"] for r in ledger_rows(hub, "learner2")] == ["graded"], 180,
             "the restarted service to grade learner2")
    assert int((hub.course / "on-submit" / "service.pid").read_text()) != pid
    with Gradebook(f"sqlite:///{hub.course / 'gradebook.db'}") as gb:
        subs = {s.student.id: s.score for s in gb.find_assignment(ON_SUBMIT.assignment).submissions}
    assert subs == {"learner1": pytest.approx(total + answer.points), "learner2": pytest.approx(total)}, subs  # + hand
    assert [r["status"] for r in ledger_rows(hub, "learner2")] == ["graded"]  # one entry, graded once

    # Learner 2 sees neither learner 1's rows nor their feedback.
    mine = json.loads(hub.api("GET", f"{SERVICE}api/mine", tokens["learner2"], raw=True))
    assert {r["student"] for r in mine} == {"learner2"}
    with pytest.raises(urllib.error.HTTPError, match="404"):
        hub.api("GET", f"{SERVICE}feedback/{ledger_key(first)}", tokens["learner2"], raw=True)
    own = hub.api("GET", f"{SERVICE}feedback/{ledger_key(first)}", tokens["learner1"], raw=True)
    assert b"Score" in own

    # The instructor's similarity report of the chapter, in a terminal of their server (both learners handed in).
    shown = hub.instructor(tokens["instructor"], f"grader similarity {ON_SUBMIT.number} --course-dir {hub.course} "
                                                 f"--html {hub.course}/similarity-{ON_SUBMIT.number}.html")
    assert "2 learners, 1 pairs" in shown and re.search(r"learner1\s+learner2\s+[01]\.\d\d", shown), shown
    assert "learner2" in (hub.course / f"similarity-{ON_SUBMIT.number}.html").read_text()


def ledger_key(row: dict) -> str:
    """The service's key of a ledger row (grader.classroom.ledger.Entry.key), as its pages link it."""
    return Entry(row["id"], row["student"], row["assignment"], row["submitted_at"]).key


# A real class: deploy/jupyterhub/setup-class.sh as root, then the hub with the `local` spawner: a unix
# user per learner, whose server runs from the learners' environment. The users and groups are this
# test's own (PREFIX) and are removed after it, and the repository gets its group and modes back: closed
# to others as a class deploys it, it could no longer be read by tests that grade as nobody (test_sandbox).
SETUP = DEPLOY / "setup-class.sh"
PREFIX = "hubtest"
TEACHER, PUPIL, ASSISTANT = f"{PREFIX}-teacher", f"{PREFIX}-learner", f"{PREFIX}-ta"
LEARNERS_ENV = Path("/var/tmp/course-test-learners-env")  # built once (minutes), kept between runs


def course_python_opened() -> list[str]:
    """A command prefix under which every user can run the course's Python. Where it sits under a home
    only root enters (/root/.pyenv on these machines), the class runs in a mount namespace in which that
    home shows the Python alone, to anyone; [] where every user can run it already."""
    base = Path(sys.base_prefix).resolve()
    closed = next((p for p in reversed(base.parents) if p != Path("/") and not p.stat().st_mode & 0o001), None)
    if closed is None:
        return []
    inside = closed / base.relative_to(closed).parts[0]
    script = (f'keep=$(mktemp -d) && mount --bind {closed} "$keep" && mount -t tmpfs -o mode=0711 tmpfs {closed} '
              f'&& mkdir {inside} && mount --bind "$keep/{inside.name}" {inside} && exec "$@"')
    return ["unshare", "--mount", "sh", "-c", script, "sh"]


@dataclass
class RealClass:
    hub: Hub
    env: dict
    base: Path
    process: subprocess.Popen | None = None

    @property
    def course(self) -> Path:
        return self.base / "home" / TEACHER / "course"

    def start_hub(self) -> None:
        state = self.base / "state"
        log = (self.base / "hub.log").open("a")
        self.process = subprocess.Popen([*course_python_opened(), str(BIN / "jupyterhub"), "-f",
                                         str(DEPLOY / "jupyterhub_config.py")], cwd=state, env=self.env,
                                        stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.process.poll() is None and http_ok(f"{self.hub.url}/hub/api"), 180, "JupyterHub to start")

    def stop_hub(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()  # stops the servers and the service too
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def repository_modes() -> dict[str, int]:
    """Every path's permission bits under the repository (links have none of their own)."""
    modes = {}
    for folder, dirs, files in os.walk(REPO):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            if not stat.S_ISLNK(info.st_mode):
                modes[path] = stat.S_IMODE(info.st_mode)
    return modes


def restore_repository_modes(modes: dict[str, int]) -> None:
    """The modes of `repository_modes`; a path the deployment created reads for others as under umask 022."""
    for path, mode in repository_modes().items():
        kept = modes.get(path)
        if kept is None:  # built by setup-class.sh (`grader build`): what others may read, like the group
            kept = mode | (mode & 0o050) >> 3
        if kept != mode:
            os.chmod(path, kept)


def remove_class_users() -> None:
    for user in (PUPIL, TEACHER, ASSISTANT):
        subprocess.run(["userdel", "--force", user], capture_output=True)
    for name in ("staff", "learners", "graders"):
        subprocess.run(["groupdel", f"{PREFIX}-{name}"], capture_output=True)


@pytest.fixture(scope="module")
def real_class():
    if os.getuid() != 0 or not shutil.which("useradd"):
        pytest.skip("a real class needs root: setup-class.sh creates unix users (CI runs as root)")
    if not PROXY.exists() and not shutil.which("configurable-http-proxy"):
        pytest.fail("configurable-http-proxy is missing: `make test-integration` installs it into .hub/")
    base = Path(tempfile.mkdtemp(prefix="course-class-", dir="/var/tmp"))  # /tmp's pytest folders are root's
    base.chmod(0o755)
    (base / "home").mkdir(mode=0o755)
    port, password = free_port(), secrets.token_hex(8)
    env = dict(os.environ, COURSE_INSTRUCTOR=TEACHER, COURSE_LEARNERS=PUPIL, COURSE_STAFF_GROUP=f"{PREFIX}-staff",
               COURSE_LEARNER_GROUP=f"{PREFIX}-learners", COURSE_HOME_BASE=str(base / "home"),
               COURSE_GRADERS=ASSISTANT, COURSE_GRADER_GROUP=f"{PREFIX}-graders",
               COURSE_EXCHANGE_ROOT=str(base / "exchange"), COURSE_HUB_STATE=str(base / "state"),
               COURSE_LEARNER_ENV=str(LEARNERS_ENV), COURSE_HUB_PORT=str(port), COURSE_HUB_API_PORT=str(free_port()),
               COURSE_HUB_SPAWNER="local", COURSE_HUB_AUTHENTICATOR="dummy", COURSE_HUB_PASSWORD=password,
               # an origin per server: <user>.localhost, which Chromium takes for 127.0.0.1
               COURSE_HUB_SUBDOMAIN_HOST=f"http://localhost:{port}")
    group, modes = REPO.stat().st_gid, repository_modes()
    remove_class_users()  # an interrupted run's: their homes would not be this run's
    the_class = RealClass(Hub(f"http://localhost:{port}", password, base / "state", base / "exchange",
                              base / "home" / TEACHER / "course", subdomains=True), env, base)
    try:
        subprocess.run([*course_python_opened(), "bash", str(SETUP)], env=env, check=True, timeout=1800)
        the_class.start_hub()
        yield the_class
    finally:
        the_class.stop_hub()
        proxy = base / "state" / "jupyterhub-proxy.pid"
        for pid in [*service_processes(the_class.course), *formgrader_processes(the_class.course),
                    *([int(proxy.read_text())] if proxy.is_file() else [])]:
            if running(pid):  # what a hub that failed to start left behind
                os.kill(pid, 9)
        remove_class_users()
        subprocess.run(["chgrp", "-R", str(group), str(REPO)], check=True)
        restore_repository_modes(modes)
        if (base / "hub.log").exists():
            SHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(base / "hub.log", SHOTS / "real-class-hub.log")
        shutil.rmtree(base, ignore_errors=True)


def learner_attacks(course: Path) -> dict[str, str]:
    """What a learner types in a terminal to reach the answers, the hidden tests or unlimited grading."""
    notebook = f"~/{ON_SUBMIT.assignment}/{ON_SUBMIT.notebook_name}"
    return {
        "import solutions": "python -c 'import solutions'",
        "import solutions from the repository": f"cd {REPO} && python -c 'import solutions'",
        "read a rubric": f"cat {REPO}/grader/rubrics/{ON_SUBMIT.name}.md",
        "read a hidden spec": f"cat {REPO}/grader/boundary/specs/{ON_SUBMIT.name}.py",
        "import the hidden specs": f"{BIN}/python -c 'import grader.boundary.specs'",
        "list the course directory": f"ls {course}",
        "read the source notebooks": f"ls {course}/source/{ON_SUBMIT.assignment}",
        "run grader grade": f"grader grade {notebook}",
        "run the course's grader": f"{BIN}/grader grade {notebook}",
    }


def in_terminal_each(server: str, token: str, commands: dict[str, str]) -> dict[str, int]:
    """Each command's exit status, run one after another in one terminal of `server`."""
    line = "; ".join(f"({command}) >/dev/null 2>&1; echo attack-{i}:$?" for i, command in enumerate(commands.values()))
    shown = run_in_terminal(server, token, line)
    codes = dict(re.findall(r"attack-(\d+):(\d+)", shown))
    return {name: int(codes[str(i)]) for i, name in enumerate(commands)}


def mine(hub: Hub, token: str) -> list[dict]:
    return json.loads(hub.api("GET", f"{SERVICE}api/mine", token, raw=True))


def release_on_submit(real_class: RealClass, tokens: dict[str, str], chapter=ON_SUBMIT, term: str = "") -> None:
    """The instructor releases `chapter`, graded on submit (term.toml, or `term`), in a terminal; the learner
    fetches it."""
    hub, course = real_class.hub, real_class.course
    (course / "term.toml").write_text(term or f'[on_submit]\nchapters = ["{chapter.number}"]\n')
    shutil.chown(course / "term.toml", TEACHER, f"{PREFIX}-staff")
    hub.start(TEACHER, tokens[TEACHER])
    run_in_terminal(hub.at(f"/user/{TEACHER}"), tokens[TEACHER],
                    f"grader release {chapter.number} --course-dir {course} && cd {course} && "
                    f"nbgrader release_assignment {chapter.assignment}")
    hub.start(PUPIL, tokens[PUPIL])
    query = urllib.parse.urlencode({"course_id": COURSE_ID, "assignment_id": chapter.assignment})
    assert hub.api("POST", f"/user/{PUPIL}/assignments/fetch?{query}", tokens[PUPIL], body=b"")["success"]


def submit_reference(hub: Hub, tokens: dict[str, str], chapter=ON_SUBMIT) -> dict:
    """The learner submits the reference answers of `chapter`; their row once graded on submit."""
    body = {"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(samples.reference(chapter)))}
    hub.api("PUT", f"/user/{PUPIL}/api/contents/{chapter.assignment}/{chapter.notebook_name}", tokens[PUPIL], body)
    query = urllib.parse.urlencode({"course_id": COURSE_ID, "assignment_id": chapter.assignment})
    assert hub.api("POST", f"/user/{PUPIL}/assignments/submit?{query}", tokens[PUPIL], body=b"")["success"]
    graded = wait_for(lambda: [r for r in mine(hub, tokens[PUPIL])
                               if r["status"] == "graded" and r["assignment"] == chapter.assignment], 300,
                      "the learner's submission to be graded on submit")
    return graded[0]


@pytest.mark.integration
def test_a_learner_in_a_real_class_reaches_no_answer_and_is_graded_on_submit(real_class):
    hub, course = real_class.hub, real_class.course
    tokens = {user: hub.token(user) for user in (TEACHER, PUPIL)}
    release_on_submit(real_class, tokens)

    # The learner, in a terminal of their own server: every way to the answers, hidden tests and grader fails.
    codes = in_terminal_each(hub.at(f"/user/{PUPIL}"), tokens[PUPIL], learner_attacks(course))
    assert all(codes.values()), f"these worked for a learner: {[name for name, code in codes.items() if not code]}"
    # (the same terminal runs the chapter's own code: the learners' environment has what it needs)
    run_in_terminal(hub.at(f"/user/{PUPIL}"), tokens[PUPIL],
                    f"cd ~/{ON_SUBMIT.assignment} && python -c 'import torch, course.checks, course.toolkit'")

    # Grading on submit still works for them.
    total = sum(ex.points for ex in exercises(ON_SUBMIT.name).values())
    graded = submit_reference(hub, tokens)
    assert graded["score"] == pytest.approx(total), graded

    # The learner writes a submission under a name of their choosing (the exchange's inbound folder is
    # writable by every learner); the instructor collects with nbgrader's own collect, which checks nothing,
    # and grades submitted/. Before the identity gate, that name became a gradebook student (and script on
    # Formgrader's grading page). The service, which reads the exchange, refuses it as well.
    inbound, forged = hub.exchange / COURSE_ID / "inbound", "<img src=x onerror=alert(document.cookie)>"
    run_in_terminal(hub.at(f"/user/{PUPIL}"), tokens[PUPIL],
                    f'd="{inbound}/{forged}+{ON_SUBMIT.assignment}+2026-11-20 10:00:00.000000 UTC+x" && mkdir "$d" '
                    f'&& cp ~/{ON_SUBMIT.assignment}/{ON_SUBMIT.notebook_name} "$d/" '
                    f'&& echo "2026-11-20 10:00:00.000000 UTC" > "$d/timestamp.txt"')
    shown = run_in_terminal(hub.at(f"/user/{TEACHER}"), tokens[TEACHER],
                            f"cd {course} && nbgrader collect {ON_SUBMIT.assignment} && "
                            f"grader autograde {course}/submitted --course-dir {course} --quiet")
    assert "not a learner name the grader accepts" in shown, shown
    with contextlib.closing(sqlite3.connect(course / "gradebook.db")) as db:
        assert {row[0] for row in db.execute("SELECT id FROM student")} == {PUPIL}

    def ledger() -> list[dict]:
        with contextlib.closing(sqlite3.connect(f"{(course / 'on-submit' / 'ledger.sqlite').as_uri()}?mode=ro",
                                                uri=True)) as db:
            return [json.loads(row[0]) for row in db.execute("SELECT data FROM entries")]
    [refusal] = wait_for(lambda: [e for e in ledger() if e["student"] == forged], 120, "the service to see it")
    assert refusal["status"] == "refused" and "not a learner name" in refusal["reason"], refusal

    # A classmate's submission (another unix user's folder in inbound): the learner cannot rename it away.
    theirs = inbound / f"{ASSISTANT}+{ON_SUBMIT.assignment}+2026-11-20 11:00:00.000000 UTC+y"
    theirs.mkdir()
    shutil.chown(theirs, ASSISTANT, f"{PREFIX}-staff")
    codes = in_terminal_each(hub.at(f"/user/{PUPIL}"), tokens[PUPIL],
                             {"rename a classmate's submission": f'mv "{theirs}" "{inbound}/gone"'})
    assert all(codes.values()) and theirs.is_dir(), f"the learner renamed {theirs.name} away"


# A page a learner serves from their own server (Jupyter's static files, from a folder their own config adds:
# unlike /files/, not sandboxed), which the instructor opens. Each attack reports what it got, or why it got nothing.
ORIGIN_ATTACKS = """<!doctype html><title>my project</title><script>
const at = %s, attacks = {};
async function read(url) {  // a same-origin read needs no XSRF token: the hub and Jupyter let it through
  const reply = await fetch(url, {credentials: "include", mode: "no-cors"});
  if (reply.type === "opaque") throw new Error("another origin: nothing readable");
  return reply.status + " " + await reply.text();
}
async function attempt(name, run) {
  try { attacks[name] = await run(); } catch (err) { attacks[name] = "refused: " + err; }
}
(async () => {
  await attempt("list the hub's users", () => read(at.users));
  await attempt("make a token of the instructor's", async () => {
    const xsrf = (await read(at.tokenPage)).match(/xsrf_token: *"([^"]+)"/)[1];
    const reply = await fetch(at.tokens, {method: "POST", credentials: "include", body: '{"note": "project"}',
      headers: {"X-XSRFToken": xsrf, "Content-Type": "application/json"}});
    return reply.status + " " + await reply.text();
  });
  await attempt("read the instructor's term.toml", () => read(at.term));
  await attempt("read the grading service's class page", () => read(at.classPage));
  await attempt("write a file in the instructor's server", async () => {  // with the token made above
    const token = JSON.parse(attacks["make a token of the instructor's"].slice(4)).token;
    const reply = await fetch(at.written, {method: "PUT", headers: {Authorization: "token " + token},
      body: JSON.stringify({type: "file", format: "text", content: "a learner was here"})});
    return reply.status + " " + await reply.text();
  });
  window.attacks = attacks;
})();
</script>"""


def worked(attacks: dict[str, str]) -> list[str]:
    """The attacks of ORIGIN_ATTACKS that got what they went for."""
    proof = {"list the hub's users": f'"{PUPIL}"', "make a token of the instructor's": '"token"',
             "read the instructor's term.toml": "on_submit",
             "read the grading service's class page": "Regrade requests",
             "write a file in the instructor's server": '"from-a-learner.txt"'}
    assert set(attacks) == set(proof), attacks  # every attack ran
    return [name for name, found in attacks.items() if proof[name] in found]


@pytest.mark.integration
def test_a_page_a_learner_serves_cannot_act_as_the_instructor_who_opens_it(real_class, browser):
    """Each server on its own origin (COURSE_HUB_SUBDOMAIN_HOST): a learner's page, opened by the instructor in
    Chromium, can neither read nor act through the hub, the instructor's server or the grading service."""
    hub, course = real_class.hub, real_class.course
    tokens = {user: hub.token(user) for user in (TEACHER, PUPIL)}
    (course / "term.toml").write_text(f'[on_submit]\nchapters = ["{ON_SUBMIT.number}"]\n')
    shutil.chown(course / "term.toml", TEACHER, f"{PREFIX}-staff")
    hub.start(TEACHER, tokens[TEACHER])
    hub.start(PUPIL, tokens[PUPIL])
    # The learner serves a page of their own: a folder of static files in their server's config, then a restart.
    at = {"users": "/hub/api/users", "tokenPage": "/hub/token", "tokens": f"/hub/api/users/{TEACHER}/tokens",
          "term": f"/user/{TEACHER}/api/contents/course/term.toml", "classPage": f"{SERVICE}class",
          "written": f"/user/{TEACHER}/api/contents/from-a-learner.txt"}
    page_html = ORIGIN_ATTACKS % json.dumps({name: hub.at(path) for name, path in at.items()})
    hub.api("PUT", f"/user/{PUPIL}/api/contents/www", tokens[PUPIL], {"type": "directory"})
    hub.api("PUT", f"/user/{PUPIL}/api/contents/www/project.html", tokens[PUPIL],
            {"type": "file", "format": "text", "content": page_html})
    run_in_terminal(hub.at(f"/user/{PUPIL}"), tokens[PUPIL], "mkdir -p ~/.jupyter && printf "
                    "'{\"ServerApp\": {\"extra_static_paths\": [\"%s/www\"]}}' \"$HOME\" "
                    "> ~/.jupyter/jupyter_server_config.json")
    hub.api("DELETE", f"/hub/api/users/{PUPIL}/server", tokens[PUPIL])
    wait_for(lambda: not hub.api("GET", f"/hub/api/users/{PUPIL}", tokens[PUPIL])["servers"], 120,
             "the learner's server to stop")
    hub.start(PUPIL, tokens[PUPIL])
    assert b"attacks" in hub.api("GET", f"/user/{PUPIL}/static/project.html", raw=True)  # served, to anyone

    # The instructor logs in, works in their JupyterLab, and opens the learner's page.
    login(browser, hub, TEACHER, ready=f"location.pathname.startsWith('/user/{TEACHER}/lab') && "
                                       "document.readyState === 'complete'")
    browser.send("Page.navigate", url=hub.at(f"/user/{PUPIL}/static/project.html"))
    attacks = wait_for(lambda: browser.js("window.attacks"), 120, "the learner's page to try its attacks")
    browser.screenshot(SHOTS / "real-class-origins.png")
    assert not worked(attacks), f"a learner's page, opened by the instructor, did: {attacks}"
    print(json.dumps(attacks, indent=1))  # what each got (pytest -rP shows it)
    made = hub.api("GET", f"/hub/api/users/{TEACHER}/tokens", tokens[TEACHER])["api_tokens"]
    assert not [t for t in made if t["note"] == "project"], made
    assert not (real_class.base / "home" / TEACHER / "from-a-learner.txt").exists()
    # The learners' Help menu leads to the grading page on its own origin (setup-class.sh wrote it).
    assert hub.at(SERVICE) in (LEARNERS_ENV / "share/jupyter/lab/settings/overrides.json").read_text()


FORMGRADER = "/services/formgrader/formgrader"  # the shared Formgrader's pages under the hub's service prefix


def formgrader_processes(course: Path) -> list[int]:
    """The shared Formgrader's server processes of this class (jupyterhub-singleuser in its course directory)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"jupyterhub-singleuser" in (proc / "cmdline").read_bytes() and \
                    os.readlink(proc / "cwd") == str(course):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def post_form(hub: Hub, path: str, token: str, fields: dict) -> int:
    """A form the service's pages post (a script with the hub's token needs no form token)."""
    url, host = on_loopback(hub.at(path))
    request = urllib.request.Request(url, method="POST", data=urllib.parse.urlencode(fields).encode(),
                                     headers={"Authorization": f"token {token}", **host,
                                              "Content-Type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        return reply.status


def refused(call) -> int:
    """The HTTP status with which `call` (a Hub.api call) was refused; fails if it was not."""
    with pytest.raises(urllib.error.HTTPError) as err:
        call()
    return err.value.code


@pytest.mark.integration
def test_a_grader_grades_by_hand_and_cannot_change_the_term(real_class):
    """A teaching assistant (COURSE_GRADERS, a unix user like a learner): the shared Formgrader and a hand grade
    that the one total shows, the class page and a regrade request answered; not the term, a release, the
    repository, the course directory or the hidden tests."""
    hub, course = real_class.hub, real_class.course
    tokens = {user: hub.token(user) for user in (TEACHER, PUPIL, ASSISTANT)}
    if not [r for r in mine(hub, tokens[PUPIL]) if r["status"] == "graded"]:  # run alone: the learner's test's part
        release_on_submit(real_class, tokens)
        submit_reference(hub, tokens)
    [before] = [r for r in mine(hub, tokens[PUPIL]) if r["status"] == "graded"]
    assert before["pending"], before  # written answers wait for a hand grade

    # The shared Formgrader opens for the grader, not for the learner.
    wait_for(lambda: formgrader_processes(course), 120, "the shared Formgrader")
    page = hub.api("GET", f"{FORMGRADER}/manage_assignments", tokens[ASSISTANT], raw=True)
    assert b"Manage Assignments" in page
    assert refused(lambda: hub.api("GET", f"{FORMGRADER}/manage_assignments", tokens[PUPIL], raw=True)) == 403

    # A hand grade of one written answer, through Formgrader's API; the learner's one total counts it.
    [submission] = hub.api("GET", f"{FORMGRADER}/api/submitted_notebooks/{ON_SUBMIT.assignment}/{ON_SUBMIT.name}",
                           tokens[ASSISTANT])
    grades = hub.api("GET", f"{FORMGRADER}/api/grades?submission_id={submission['id']}", tokens[ASSISTANT])
    answer = next(g for g in grades if g["name"] == before["pending"][0])
    given = hub.api("PUT", f"{FORMGRADER}/api/grade/{answer['id']}", tokens[ASSISTANT],
                    {"manual_score": answer["max_score"], "extra_credit": None})
    assert given["manual_score"] == answer["max_score"], given
    def row() -> dict:
        return next(r for r in mine(hub, tokens[PUPIL]) if r["id"] == before["id"])
    wait_for(lambda: len(row()["pending"]) < len(before["pending"]), 60, "the hand grade in the learner's total")
    after = row()
    assert after["pending"] == before["pending"][1:], after
    assert after["score"] == pytest.approx(before["score"] + answer["max_score"]), (before, after)

    # The class page, for the grader and not the learner; a regrade request the learner asks and the grader answers.
    assert b"Regrade requests" in hub.api("GET", f"{SERVICE}class", tokens[ASSISTANT], raw=True)
    assert refused(lambda: hub.api("GET", f"{SERVICE}class", tokens[PUPIL], raw=True)) == 403
    post_form(hub, f"{SERVICE}requests", tokens[PUPIL], {"key": after["key"], "item": answer["name"],
                                                          "note": "I gave both reasons"})
    [asked] = json.loads(hub.api("GET", f"{SERVICE}api/requests", tokens[ASSISTANT], raw=True))
    assert (asked["student"], asked["item"], asked["status"]) == (PUPIL, answer["name"], "open"), asked
    post_form(hub, f"{SERVICE}requests/{asked['id']}/answer", tokens[ASSISTANT],
              {"decision": "decline", "reason": "full marks already", "points": ""})
    [answered] = json.loads(hub.api("GET", f"{SERVICE}api/requests", tokens[PUPIL], raw=True))
    assert (answered["status"], answered["answered_by"], answered["reason"]) == \
        ("declined", ASSISTANT, "full marks already"), answered

    # What the grader cannot do through the service: write term.toml, release, change a due date, autograde,
    # read the course directory beside a submission, run code.
    term, outbound = (course / "term.toml").read_bytes(), sorted((hub.exchange / COURSE_ID / "outbound").rglob("*"))
    ta, a = tokens[ASSISTANT], ON_SUBMIT.assignment
    attempts = {
        "write term.toml": lambda: hub.api("PUT", "/services/formgrader/api/contents/term.toml", ta,
                                           {"type": "file", "format": "text", "content": "[on_submit]\n"}),
        "release": lambda: hub.api("POST", f"{FORMGRADER}/api/assignment/{a}/release", ta, body=b""),
        "unrelease": lambda: hub.api("POST", f"{FORMGRADER}/api/assignment/{a}/unrelease", ta, body=b""),
        "change the due date": lambda: hub.api("PUT", f"{FORMGRADER}/api/assignment/{a}", ta,
                                               {"duedate_notimezone": "2000-01-01 00:00", "duedate_timezone": "UTC"}),
        "autograde": lambda: hub.api("POST", f"{FORMGRADER}/api/submission/{a}/{PUPIL}/autograde", ta, body=b""),
        "read term.toml": lambda: hub.api("GET", f"{FORMGRADER}/submissions/{submission['id']}/"
                                                 "..%2F..%2F..%2Fterm.toml", ta, raw=True),
        "open a terminal": lambda: hub.api("POST", "/services/formgrader/api/terminals", ta, body=b""),
        "start a kernel": lambda: hub.api("POST", "/services/formgrader/api/kernels", ta, {}),
    }
    codes = {name: refused(attempt) for name, attempt in attempts.items()}
    assert set(codes.values()) <= {403, 404}, codes
    assert (course / "term.toml").read_bytes() == term
    assert sorted((hub.exchange / COURSE_ID / "outbound").rglob("*")) == outbound

    # Nor in a terminal of their own server, as their unix user: the learner's attacks and the staff's files.
    hub.start(ASSISTANT, ta)
    codes = in_terminal_each(hub.at(f"/user/{ASSISTANT}"), ta, {
        **learner_attacks(course), "append to term.toml": f"echo x >> {course}/term.toml",
        "read the solutions": f"cat {REPO}/solutions/__init__.py", "list the source": f"ls {course}/source",
        "read the gradebook": f"cat {course}/gradebook.db"})
    assert all(codes.values()), f"these worked for a grader: {[name for name, code in codes.items() if not code]}"


LATE = find_chapter("02")  # three written answers: the TA's hand grades
FEEDBACK_SCORE = re.compile(r"<h4>[^<]*\(Score: ([\d.]+) / ")


def feedback_score(page: bytes | str | None) -> float | None:
    """The total a feedback page shows (None: no page)."""
    text = page.decode() if isinstance(page, bytes) else page
    found = FEEDBACK_SCORE.search(text) if text else None
    return float(found[1]) if found else None


@pytest.mark.integration
def test_a_hand_grade_reaches_every_page_in_one_step(real_class):
    """Issue 45's table on a real hub: a learner submits a chapter an hour late (20% a day), it is graded on
    submit, and a TA hand-grades its written answers in the shared Formgrader. With no other step, one total
    everywhere: the learner's page, Formgrader's lists, grades.csv, the LMS export, and the feedback page in
    the course directory, in the exchange (fetched by the learner's Fetch Feedback) and behind the attempt's link."""
    hub, course = real_class.hub, real_class.course
    tokens = {user: hub.token(user) for user in (TEACHER, PUPIL, ASSISTANT)}
    overdue = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
    release_on_submit(real_class, tokens, LATE, f'[due]\n"{LATE.number}" = {overdue}\n[late]\nper_day = 20\n'
                                                f'[on_submit]\nchapters = ["{ON_SUBMIT.number}", "{LATE.number}"]\n')
    graded = submit_reference(hub, tokens, LATE)
    assert graded["pending"] and graded["penalty"] > 0, graded
    roster = real_class.base / "roster.csv"
    roster.write_text(f"Student,ID,SIS User ID,SIS Login ID,Section\nLearner,1,1,{PUPIL},A\n")

    def every_place() -> dict[str, float | None]:
        [row] = [r for r in mine(hub, tokens[PUPIL]) if r["assignment"] == LATE.assignment and r["counted"]]
        listed = hub.api("GET", f"{FORMGRADER}/api/submissions/{LATE.assignment}", tokens[ASSISTANT])
        chapters = hub.api("GET", f"{FORMGRADER}/api/student_submissions/{PUPIL}", tokens[ASSISTANT])
        grades = [r for r in csv.DictReader((course / "grades.csv").open())
                  if r["student_id"] == PUPIL and r["assignment"] == LATE.assignment]
        lms = real_class.base / "canvas.csv"
        subprocess.run([str(BIN / "grader"), "export", "--lms", "canvas", "--roster", str(roster), "--course-dir",
                        str(course), "--output", str(lms), LATE.number], check=True, capture_output=True)
        [canvas] = [r for r in csv.DictReader(lms.open()) if r["SIS Login ID"] == PUPIL]
        query = urllib.parse.urlencode({"course_id": COURSE_ID, "assignment_id": LATE.assignment})
        assert hub.api("POST", f"/user/{PUPIL}/assignments/fetch_feedback?{query}", tokens[PUPIL], body=b"")["success"]
        folder = f"/user/{PUPIL}/api/contents/{LATE.assignment}/feedback"
        [latest] = sorted(f["name"] for f in hub.api("GET", folder, tokens[PUPIL])["content"])[-1:]
        fetched = hub.api("GET", f"{folder}/{urllib.parse.quote(latest)}/{LATE.name}.html?format=text&type=file",
                          tokens[PUPIL])["content"]
        return {"learner page": row["score"],
                "Formgrader's submissions": next(s["score"] for s in listed if s["student"] == PUPIL),
                "Formgrader's learner page": next(c["score"] for c in chapters if c["name"] == LATE.assignment),
                "grades.csv": float(grades[0]["score"]) if grades else None,
                "Canvas": float(canvas[LATE.assignment]) if canvas[LATE.assignment] else None,
                "feedback (course directory)": feedback_score(
                    (course / "feedback" / PUPIL / LATE.assignment / f"{LATE.name}.html").read_bytes()),
                "feedback (Fetch Feedback)": feedback_score(fetched),
                "feedback (the attempt's link)": feedback_score(
                    hub.api("GET", f"{SERVICE}feedback/{row['key']}", tokens[PUPIL], raw=True))}

    # The TA grades every written answer in Formgrader; nobody presses anything else.
    [submission] = hub.api("GET", f"{FORMGRADER}/api/submitted_notebooks/{LATE.assignment}/{LATE.name}",
                           tokens[ASSISTANT])
    given = 0.0
    for grade in hub.api("GET", f"{FORMGRADER}/api/grades?submission_id={submission['id']}", tokens[ASSISTANT]):
        if grade["name"] in graded["pending"]:
            hub.api("PUT", f"{FORMGRADER}/api/grade/{grade['id']}", tokens[ASSISTANT],
                    {"manual_score": grade["max_score"] - 1, "extra_credit": None})
            given += grade["max_score"] - 1
    expected = round((graded["raw_score"] + given) * 0.8, 2)  # an hour late: 20% of the whole, hand grades too
    seen: dict[str, float | None] = {}

    def one_total() -> bool:
        seen.update({place: None if v is None else round(float(v), 2) for place, v in every_place().items()})
        return set(seen.values()) == {expected}
    try:
        wait_for(one_total, 120, f"{expected} in every place")
    except AssertionError as err:
        raise AssertionError(f"{err}; last seen: {seen}") from None


def service_processes(course: Path) -> list[int]:
    """The `grader serve` processes on this course directory."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and b"serve" in argv and str(course).encode() in argv:
            found.append(int(proc.name))
    return found


@pytest.mark.integration
def test_a_hub_killed_and_restarted_keeps_one_service_and_the_learners_servers(real_class):
    hub, course = real_class.hub, real_class.course
    token = hub.token(PUPIL)
    hub.start(PUPIL, token)
    wait_for(lambda: len(service_processes(course)) == 1, 120, "the grading service")
    [first] = service_processes(course)
    real_class.process.kill()  # the hub dies without cleaning up: its learners' servers run on
    real_class.process.wait(timeout=30)
    wait_for(lambda: not service_processes(course), 30, "the grading service to end with its hub")
    wait_for(lambda: not formgrader_processes(course), 30, "the shared Formgrader to end with its hub")
    real_class.start_hub()
    wait_for(lambda: service_processes(course), 120, "the restarted hub's grading service")
    wait_for(lambda: len(formgrader_processes(course)) == 1, 120, "the restarted hub's shared Formgrader")
    time.sleep(5)  # a second service, had one started, would be running by now
    assert len(service_processes(course)) == 1 and service_processes(course) != [first]
    # The learner's server, started by the killed hub, answers through the new one.
    status = hub.api("GET", f"/user/{PUPIL}/api/status", token)
    assert "started" in status, status
    assert mine(hub, token) is not None


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.integration
def test_stopping_make_hub_stops_what_it_started(tmp_path):
    """`kill` of `make hub` (as a terminal's close or a supervisor sends it) while the grading service grades: the
    hub, its proxy, its servers and its grading service all stop, within seconds and without a traceback; none is
    left to grade next to the next hub's. The grading cut short stays queued for the next service
    (tests/test_service_lock.py grades it again)."""
    state, port = tmp_path / "state", free_port()
    course = state / "home" / "instructor" / "course"
    course.mkdir(parents=True)
    (course / "term.toml").write_text('[on_submit]\nchapters = ["02"]\n')
    env = dict(os.environ, HUB_PORT=str(port), HUB_API_PORT=str(free_port()), HUB_PASSWORD="try-out")
    log = tmp_path / "make.log"
    make = subprocess.Popen(["make", "-o", "hub-setup", "hub", f"HUB_STATE={state}"], cwd=REPO, env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    started: list[int] = []
    try:
        wait_for(lambda: make.poll() is None and http_ok(f"http://127.0.0.1:{port}/hub/api"), 180,
                 "`make hub`'s hub")
        hub = Hub(f"http://127.0.0.1:{port}", "try-out", state, state / "exchange", state / "home" / "instructor")
        hub.start("learner1", hub.token("learner1"))
        wait_for(lambda: (course / "on-submit" / "service.pid").is_file(), 120, "the grading service")
        slow = samples.reference(CHAPTER)
        slow.cells.insert(0, nbformat.v4.new_code_cell("import time\ntime.sleep(600)"))
        submit(hub.exchange, "learner1", slow)
        service = int((course / "on-submit" / "service.pid").read_text())
        wait_for(lambda: sandboxes(service), 300, "the grading service's sandbox")
        time.sleep(5)  # in its 600 s cell by now
        started = family(make.pid)
        names = {Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() for pid in started}
        wanted = ("jupyterhub -f", "configurable-http-proxy", "grader serve", "jupyterhub-singleuser")
        assert all(any(what in name for name in names) for what in wanted), names
        before = log.stat().st_size
        stopped_at = time.monotonic()
        make.terminate()
        make.wait(timeout=120)
        with contextlib.suppress(AssertionError):
            wait_for(lambda: not [pid for pid in started if running(pid)], 60, "everything `make hub` started to stop")
        took = time.monotonic() - stopped_at
        left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:120] for pid in started if running(pid)}
    finally:
        for pid in [make.pid, *started]:
            if running(pid):
                os.kill(pid, 9)
    after = log.read_bytes()[before:].decode(errors="replace")
    print(f"`make hub` stopped in {took:.1f} s")
    # Everything stops and nothing is left; the time is printed, not a target (loaded CI with -n 2: about 37 s; alone:
    # 2-8 s; before issue 45: 70-123 s). The bound only catches a stop that waits on the grading child's limit.
    assert not left and took < 60, f"`make hub` took {took:.0f} s to stop, left {left}:\n{after}"
    assert "Traceback" not in after, after
    assert "stopped while grading learner1" in after, after

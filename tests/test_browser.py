"""`make lab` as a learner sees it, in a real browser: JupyterLab on course/, each chapter opened,
every narrative figure loaded (naturalWidth > 0), and nbgrader's extensions present (the Validate
button on the notebook, the Assignment List). Screenshots go to test-output/browser/.

Needs Chromium or Chrome (`apt-get install chromium`; .ci/run installs it when it can); without
one the test is skipped and says why (it fails instead when COURSE_REQUIRE_BROWSER=1, as in CI). `make
test-integration` runs it, not `make test`. The browser is driven over the Chrome DevTools Protocol
(websocket-client comes with jupyter_server), so no driver binary is needed.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import websocket

from grader.authoring.bundle import image_links
from grader.chapters import CHAPTERS, REPO

# JupyterLab and Chromium started for real, every chapter opened (about two minutes of a loaded CI machine's
# worker): `make test-integration` runs it, with the other tests on real servers.
pytestmark = pytest.mark.integration

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
OUTPUT = Path(os.environ.get("COURSE_TEST_OUTPUT", REPO / "test-output")) / "browser"
WIDTH, HEIGHT = 1400, 1000


def find_browser() -> str | None:
    wanted = os.environ.get("COURSE_BROWSER")
    if wanted:
        return shutil.which(wanted) or wanted
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def require_browser(what: str) -> str:
    """Chromium or Chrome; without one the test skips, saying `what` did not run (fails under CI's
    COURSE_REQUIRE_BROWSER=1, which .ci/run sets once it has installed a browser)."""
    executable = find_browser()
    if executable is None:
        if os.environ.get("COURSE_REQUIRE_BROWSER") == "1":
            pytest.fail("COURSE_REQUIRE_BROWSER=1 but no Chromium or Chrome is on PATH")
        pytest.skip(f"no Chromium or Chrome on PATH (apt-get install chromium, or set COURSE_BROWSER): {what} did not "
                    "run")
    return executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serving(app):
    """A tornado application on a free port of 127.0.0.1, in a thread with its own event loop: its URL."""
    loop, port, ready = asyncio.new_event_loop(), free_port(), threading.Event()

    def run():
        asyncio.set_event_loop(loop)
        app.listen(port, "127.0.0.1")
        loop.call_soon(ready.set)
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


class Page:
    """One browser tab, driven over the DevTools protocol."""

    def __init__(self, debug_port: int):
        def page_socket():
            with urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json", timeout=5) as reply:
                return next((t["webSocketDebuggerUrl"] for t in json.load(reply) if t["type"] == "page"), None)

        self.ws = websocket.create_connection(wait_for(page_socket, 30, "a browser tab"), timeout=60,
                                              suppress_origin=True)
        self.ids = 0
        self.send("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT, deviceScaleFactor=1,
                  mobile=False)

    def send(self, method: str, **params):
        self.ids += 1
        self.ws.send(json.dumps({"id": self.ids, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.ids:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.on_event(message)

    def on_event(self, message: dict) -> None:
        """An event the protocol sent between replies (console messages, requests): ignored here."""

    def js(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"]))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving course/ as `make lab` does, with the nbgrader extensions installed, and the Help-menu
    item a class's hub adds (deploy/jupyterhub/lab_settings.py, as the try-out hub gives it)."""
    import runpy

    browser = require_browser("the browser test of `make lab`")
    home = tmp_path_factory.mktemp("lab")
    settings = home / "settings"
    runpy.run_path(str(REPO / "deploy" / "jupyterhub" / "lab_settings.py"))["write"](home / "app-settings")
    # Render every cell (JupyterLab otherwise renders only those near the viewport); no news pop-up.
    for plugin, values in {"notebook-extension/tracker": {"windowingMode": "none"},
                           "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False}}.items():
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    port = free_port()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               MPLBACKEND="Agg")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         "--ServerApp.token=", "--ServerApp.password=", f"--ServerApp.root_dir={REPO / 'course'}",
         f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={home / 'workspaces'}",
         f"--LabApp.app_settings_dir={home / 'app-settings'}",
         "--LabApp.expose_app_in_browser=True", "--ServerApp.allow_root=True"],
        cwd=home, env=env, stdout=(home / "server.log").open("w"), stderr=subprocess.STDOUT)
    profile = home / "browser"
    chrome = None
    try:
        wait_for(lambda: server.poll() is None and http_ok(f"http://127.0.0.1:{port}/api/status"), 90,
                 "JupyterLab to start")
        chrome = subprocess.Popen(
            [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--no-default-browser-check", f"--window-size={WIDTH},{HEIGHT}", f"--user-data-dir={profile}",
             "--remote-debugging-port=0", "--remote-allow-origins=*", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=(home / "browser.log").open("w"))
        active = profile / "DevToolsActivePort"
        wait_for(lambda: chrome.poll() is None and active.exists() and active.read_text().strip(), 60,
                 "the browser to start")
        page = Page(int(active.read_text().split()[0]))
        yield page, f"http://127.0.0.1:{port}"
        page.ws.close()
    finally:
        for proc in (chrome, server):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()


@contextlib.contextmanager
def chromium(home: Path, what: str, *flags: str):
    """A headless Chromium with its profile in `home`, driven through one Page (DevTools); `what` names the
    test that needs it (require_browser), `flags` are added to its command line."""
    chrome = subprocess.Popen(
        [require_browser(what), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", *flags, f"--user-data-dir={home}",
         "--remote-debugging-port=0", "--remote-allow-origins=*", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        active = home / "DevToolsActivePort"
        wait_for(lambda: chrome.poll() is None and active.exists() and active.read_text().strip(), 60,
                 "the browser to start")
        page = Page(int(active.read_text().split()[0]))
        yield page
        page.ws.close()
    finally:
        chrome.terminate()
        try:
            chrome.wait(timeout=20)
        except subprocess.TimeoutExpired:
            chrome.kill()


IMAGES = """[...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown img')]
             .map(img => ({src: img.getAttribute('src'), complete: img.complete, width: img.naturalWidth}))"""


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.assignment for c in CHAPTERS])
def test_lab_shows_every_figure_and_nbgrader(lab, chapter):
    page, base = lab
    page.send("Page.navigate", url=f"{base}/lab/tree/{chapter.assignment}/{chapter.notebook_name}")
    cells = len(json.loads(chapter.course_notebook.read_text())["cells"])
    wait_for(lambda: page.js("document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').length")
             == cells, 120, f"{chapter.notebook_name} to render its {cells} cells")
    links = image_links(chapter)
    images = wait_for(lambda: (lambda found: found if len(found) == len(links) and all(i["complete"] for i in found)
                               else None)(page.js(IMAGES)), 60, f"the {len(links)} figures to load")
    page.screenshot(OUTPUT / f"{chapter.assignment}.png")
    for number, _ in enumerate(images):
        page.js(f"document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown img')"
                f"[{number}].scrollIntoView({{block: 'center'}})")
        time.sleep(0.3)
        page.screenshot(OUTPUT / f"{chapter.assignment}-figure{number + 1}.png")
    broken = [i["src"] for i in images if i["width"] == 0]
    assert not broken, f"{chapter.notebook_name}: figures that did not load: {broken}"
    served = [i["src"].split("?")[0].split("/files/", 1)[-1] for i in images]
    assert served == [f"{chapter.assignment}/{link}" for link in links]
    # nbgrader's extensions: the Validate button in the notebook's toolbar, the Assignment List.
    wait_for(lambda: page.js("[...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Toolbar *')]"
                             ".some(e => e.children.length === 0 && e.textContent.trim() === 'Validate')"),
             30, "nbgrader's Validate button on the notebook's toolbar")


def test_lab_has_the_nbgrader_assignment_list(lab):
    page, base = lab
    page.send("Page.navigate", url=f"{base}/lab?reset")  # a fresh workspace, no notebooks open
    wait_for(lambda: page.js("!!(window.jupyterapp && window.jupyterapp.commands"
                             " && window.jupyterapp.commands.hasCommand('nbgrader:open-assignment-list'))"),
             120, "nbgrader's commands to register")
    menus = "[...document.querySelectorAll('.lm-MenuBar-itemLabel')].map(m => m.textContent)"
    wait_for(lambda: page.js(menus), 60, "the menu bar")
    wait_for(lambda: "Nbgrader" in page.js(menus), 30, f"an Nbgrader menu in {page.js(menus)}")
    page.js("window.jupyterapp.commands.execute('nbgrader:open-assignment-list').then(() => true)")
    # The panel lists released, downloaded and submitted assignments (none here: no exchange is set up).
    wait_for(lambda: page.js("!!document.querySelector('#nbgrader-assignment-list #released_assignments_list')"),
             60, "the Assignments panel")
    tab = page.js("[...document.querySelectorAll('.lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel')]"
                  ".map(t => t.textContent)")
    assert "Assignments" in tab, tab
    time.sleep(1)
    page.screenshot(OUTPUT / "nbgrader-assignment-list.png")


def test_the_help_menu_leads_to_the_grading_page(lab):
    page, base = lab
    page.send("Page.navigate", url=f"{base}/lab?reset")
    bar = "[...document.querySelectorAll('.lm-MenuBar-item')]"
    wait_for(lambda: page.js(f"{bar}.some(m => m.textContent === 'Help')"), 120, "the menu bar's Help menu")
    time.sleep(1)

    def click(selector: str, text: str) -> None:  # a real mouse (Lumino's menus follow the pointer)
        x, y = page.js(f"(r => [r.x + r.width / 2, r.y + r.height / 2])([...document.querySelectorAll('{selector}')]"
                       f".find(m => m.textContent.startsWith('{text}')).getBoundingClientRect())")
        page.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        time.sleep(0.3)
        for kind in ("mousePressed", "mouseReleased"):
            page.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)
        time.sleep(0.5)

    click(".lm-MenuBar-item", "Help")
    items = page.js("[...document.querySelectorAll('.lm-Menu-itemLabel')].map(m => m.textContent)")
    assert items and items[0] == "Grading page · 批改页面", items
    page.screenshot(OUTPUT / "help-menu-grading-page.png")
    page.js("window.open = (url, target) => { window.openedUrl = url; return null; }; true")
    click(".lm-Menu-item", "Grading page")
    assert page.js("window.openedUrl") == "/services/grading/"  # in a new tab (the page refuses to be framed)

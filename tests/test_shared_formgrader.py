"""The graders' shared Formgrader (deploy/jupyterhub/formgrader/) without a hub: its Jupyter Server started with
the deployment's config on a small course directory, asked what a grader (teaching assistant) could ask.
A hand grade goes through; every other way to change the term, what learners get, or to read the course
directory, run code or write files is refused. tests/test_hub.py runs the same service behind a real hub.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.chapters import REPO
from tests.test_browser import free_port, http_ok, wait_for

SHARED = REPO / "deploy" / "jupyterhub" / "formgrader"
BIN = Path(sys.executable).parent
TOKEN = "graders-token"


@pytest.fixture(scope="module")
def formgrader(tmp_path_factory):
    """The shared Formgrader's server on a course with one submission (learner ada, chapter a1, one written
    answer q1 to grade by hand), a secret term.toml and source/; yields (url, course, submission notebook id,
    grade id)."""
    from nbgrader.api import Gradebook

    root = tmp_path_factory.mktemp("formgrader")
    course = root / "course"
    (course / "autograded" / "ada" / "a1").mkdir(parents=True)
    (course / "autograded" / "ada" / "a1" / "figure.png").write_bytes(b"\x89PNG figure")
    (course / "term.toml").write_text("secret = 'the term'\n")
    (course / "source" / "a1").mkdir(parents=True)
    (course / "source" / "a1" / "n1.ipynb").write_text('{"the solution": 42}')
    env = {"HOME": str(root), "PATH": f"{BIN}{os.pathsep}/usr/bin:/bin", "LANG": "C.UTF-8",
           "JUPYTER_CONFIG_PATH": f"{SHARED}{os.pathsep}{SHARED.parent}", "PYTHONPATH": str(SHARED),
           "COURSE_DIRECTORY": str(course), "COURSE_EXCHANGE_ROOT": str(root / "exchange"),
           "TRAITLETS_APPLICATION_RAISE_CONFIG_FILE_ERROR": "1", "COURSE_HUB_PID": str(os.getpid())}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")  # nbgrader's Gradebook runs alembic
        gb = Gradebook(f"sqlite:///{course / 'gradebook.db'}", "transformers-from-scratch")
        gb.add_assignment("a1")
        gb.add_notebook("n1", "a1")
        gb.add_grade_cell("q1", "n1", "a1", max_score=2, cell_type="markdown")
        gb.add_solution_cell("q1", "n1", "a1")
        gb.add_student("ada")
        gb.add_submission("a1", "ada")
        notebook = gb.find_submission_notebook("n1", "a1", "ada").id
        grade = gb.find_grade("q1", "n1", "a1", "ada").id
        gb.close()
    port = free_port()
    server = subprocess.Popen([str(BIN / "jupyter-server"), f"--port={port}", f"--ServerApp.token={TOKEN}",
                               "--no-browser", "--ServerApp.reraise_server_extension_failures=True",
                               *(["--allow-root"] if os.getuid() == 0 else [])],
                              env=env, cwd=course, stdout=(root / "server.log").open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: server.poll() is None and http_ok(f"{url}/formgrader/api/status?token={TOKEN}"), 90,
                 f"the shared Formgrader (log: {root / 'server.log'})")
        yield url, course, notebook, grade
    finally:
        server.terminate()
        server.wait(timeout=30)


def ask(url: str, method: str, path: str, body=None) -> tuple[int, bytes]:
    data = None if body is None and method == "GET" else json.dumps(body or {}).encode()
    request = urllib.request.Request(url + path, method=method, data=data,
                                     headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_a_grader_grades_by_hand(formgrader):
    url, course, notebook, grade = formgrader
    status, listed = ask(url, "GET", "/formgrader/api/assignments")
    assert status == 200 and [a["name"] for a in json.loads(listed)] == ["a1"]
    assert ask(url, "GET", "/formgrader/manage_assignments")[0] == 200
    status, given = ask(url, "PUT", f"/formgrader/api/grade/{grade}", {"manual_score": 1.5})
    assert status == 200 and json.loads(given)["manual_score"] == 1.5
    [comment] = json.loads(ask(url, "GET", f"/formgrader/api/comments?submission_id={notebook}")[1])
    assert ask(url, "PUT", f"/formgrader/api/comment/{comment['id']}", {"manual_comment": "clear"})[0] == 200
    status, figure = ask(url, "GET", f"/formgrader/submissions/{notebook}/figure.png")  # the notebook's images
    assert status == 200 and figure == b"\x89PNG figure"


# What a grader might try, and what must stop it: each answers 403 or 404.
REFUSED = {
    "change a due date (the term)": ("PUT", "/formgrader/api/assignment/a1", {"duedate_notimezone": "2000-01-01"}),
    "add an assignment": ("PUT", "/formgrader/api/assignment/a2", {}),
    "change the roster": ("PUT", "/formgrader/api/student/mallory", {"first_name": "M"}),
    "generate what learners get": ("POST", "/formgrader/api/assignment/a1/assign", None),
    "release an assignment": ("POST", "/formgrader/api/assignment/a1/release", None),
    "unrelease an assignment": ("POST", "/formgrader/api/assignment/a1/unrelease", None),
    "collect": ("POST", "/formgrader/api/assignment/a1/collect", None),
    "autograde (a learner's code, unsandboxed)": ("POST", "/formgrader/api/submission/a1/ada/autograde", None),
    "release feedback": ("POST", "/formgrader/api/assignment/a1/release_feedback", None),
    "generate feedback": ("POST", "/formgrader/api/assignment/a1/ada/generate_feedback", None),
    "load a config of their own": ("GET", "/formgrader?path=/tmp", None),
    "read term.toml beside a submission": ("GET", "/formgrader/submissions/{notebook}/..%2F..%2F..%2Fterm.toml", None),
    "read the solutions beside a submission": ("GET", "/formgrader/submissions/{notebook}/..%2F..%2F..%2Fsource"
                                                      "%2Fa1%2Fn1.ipynb", None),
    "read the gradebook beside a submission": ("GET", "/formgrader/submissions/{notebook}/../../../gradebook.db", None),
    "read files": ("GET", "/api/contents", None),
    "write term.toml": ("PUT", "/api/contents/term.toml", {"type": "file", "format": "text", "content": "x"}),
    "download term.toml": ("GET", "/files/term.toml", None),
    "start a kernel": ("POST", "/api/kernels", {}),
    "start a session": ("POST", "/api/sessions", {"path": "x.ipynb", "type": "notebook",
                                                  "kernel": {"name": "python3"}}),
    "open a terminal": ("POST", "/api/terminals", None),
    "open JupyterLab": ("GET", "/lab", None),
    "write the server's config": ("PATCH", "/api/config/notebook", {"load_extensions": {"x": True}}),
    "shut the server down": ("POST", "/api/shutdown", None),
}


@pytest.mark.parametrize("attempt", list(REFUSED))
def test_a_grader_cannot(formgrader, attempt):
    url, course, notebook, _ = formgrader
    method, path, body = REFUSED[attempt]
    status, shown = ask(url, method, path.format(notebook=notebook), body)
    assert status in (403, 404), (attempt, status, shown[:300])
    assert b"the term" not in shown and b"the solution" not in shown and not (course / "source" / "a2").exists()


def test_nothing_changed_behind_the_refusals(formgrader):
    from nbgrader.api import Gradebook

    url, course, _, _ = formgrader
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "transformers-from-scratch") as gb:
        assert gb.find_assignment("a1").duedate is None and [s.id for s in gb.students] == ["ada"]
    assert not (course.parent / "exchange").exists() and not (course / "release").exists()
    assert (course / "term.toml").read_text() == "secret = 'the term'\n"


def test_the_exchange_refuses_the_instructors_steps_too():
    """Behind the routes, the service's nbgrader config swaps the exchange's release, collect and feedback steps."""
    from nbgrader.exchange import ExchangeError
    from traitlets.config.loader import PyFileConfigLoader
    from traitlets.utils.importstring import import_item

    config = PyFileConfigLoader("nbgrader_config.py", path=str(SHARED)).load_config()
    sys.path.insert(0, str(SHARED))
    try:
        for step in ("release_assignment", "collect", "release_feedback"):
            refusing = import_item(config.ExchangeFactory[step])
            with pytest.raises(ExchangeError, match="the instructor's"):
                refusing().start()
    finally:
        sys.path.remove(str(SHARED))


def test_it_serves_nothing_unless_locked_down():
    """A config that did not load (or an extension enabled after it) stops the service instead of serving
    Formgrader with Jupyter Server's APIs open: the extension checks the server it loads into."""
    sys.path.insert(0, str(SHARED))
    try:
        import shared_formgrader

        open_server = SimpleNamespace(jpserver_extensions={"jupyterlab": True, "shared_formgrader": True,
                                                           "jupyterhub": True},
                                      authorizer=object(), kernel_manager=object(), contents_manager=object(),
                                      terminals_enabled=True)
        problems = shared_formgrader.unlocked(open_server)
        assert len(problems) == 5 and "server extension jupyterlab is enabled" in problems, problems
        with pytest.raises(RuntimeError, match="not locked down"):
            shared_formgrader._load_jupyter_server_extension(open_server)
    finally:
        sys.path.remove(str(SHARED))


# A grader's hand grade is a finite number in 0..the cell's points (2 here); extra credit is the instructor's.
UNBOUNDED = {
    "a million points": (b'{"manual_score": 1000000}', 400),
    "a negative score": (b'{"manual_score": -5}', 400),
    "NaN (Python's json reads it)": (b'{"manual_score": NaN}', 400),
    "Infinity": (b'{"manual_score": Infinity}', 400),
    "true as a score": (b'{"manual_score": true}', 400),
    "a million points of extra credit": (b'{"manual_score": 1, "extra_credit": 1000000}', 403),
    "extra credit within the maximum": (b'{"manual_score": 1, "extra_credit": 1}', 403),
}


@pytest.mark.parametrize("attempt", list(UNBOUNDED))
def test_a_graders_hand_grade_is_bounded(formgrader, attempt):
    from nbgrader.api import Gradebook

    url, course, _, grade = formgrader
    body, expected = UNBOUNDED[attempt]
    request = urllib.request.Request(f"{url}/formgrader/api/grade/{grade}", method="PUT", data=body,
                                     headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == expected, (attempt, refused.value.read()[:300])
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "transformers-from-scratch") as gb:
        stored = gb.find_grade_by_id(grade)
        assert stored.manual_score in (None, 1.5) and not stored.extra_credit, (stored.manual_score,
                                                                                stored.extra_credit)


def test_a_graders_formgrader_has_no_instructors_buttons(formgrader, tmp_path):
    """In Chromium: Manage Assignments and a chapter's submissions without Release, Collect, Autograde, Generate or
    Release Feedback, Add assignment; a note says they are the instructor's. A screenshot is kept."""
    from tests.adversarial.test_pages import open_page
    from tests.test_browser import OUTPUT

    url, *_ = formgrader
    with chromium(tmp_path) as page:
        open_page(page, f"{url}/formgrader/manage_assignments?token={TOKEN}")
        wait_for(lambda: page.js("document.querySelectorAll('td.release').length") > 0, 60, "the assignments' rows")
        page.screenshot(OUTPUT / "shared-formgrader-assignments.png")
        shown = page.js("""[...document.querySelectorAll('th, td, a')].filter(e => e.checkVisibility())
                           .map(e => e.textContent.trim()).join(' | ')""")
        note = page.js("document.querySelector('.graders-note') && document.querySelector('.graders-note').innerText")
        open_page(page, f"{url}/formgrader/manage_submissions/a1")
        wait_for(lambda: page.js("document.querySelectorAll('td.autograde').length") > 0, 60, "the submissions' rows")
        page.screenshot(OUTPUT / "shared-formgrader-submissions.png")
        submissions = page.js("""[...document.querySelectorAll('th, td')].filter(e => e.checkVisibility())
                                 .map(e => e.textContent.trim()).join(' | ')""")
        hidden = page.js("""[...document.querySelectorAll('td.autograde, td.generate-feedback, td.release-feedback')]
                            .every(e => !e.checkVisibility())""")
    for button in ("Release", "Collect", "Generate Feedback", "Release Feedback", "Generate", "Add new assignment"):
        assert button not in shown.split(" | "), (button, shown)
    assert "a1" in shown and "Manual Grading" in shown, shown
    assert note and "the instructor's" in note, note
    assert "Autograde" not in submissions.split(" | ") and hidden, submissions


def chromium(home: Path):
    from tests.test_browser import chromium as launch

    return launch(home, "the graders' Formgrader")

"""The shared Formgrader: nbgrader's Formgrader for the class's graders (teaching assistants), a hub service at
/services/formgrader/ (jupyterhub_config.py runs it as the grading user, in the course directory, with this
folder first on its Jupyter config path). A grader reads submissions and grades them by hand; nothing more.

Each way in, and what closes it (the server's config is jupyter_server_config.py beside this file):
- Formgrader's own API: every write is refused but a hand grade, a comment and a flag (`for_graders`): no
  new assignment or due date (the term), no roster change, no generate/release/unrelease (what learners get),
  no collect, no autograde (it runs a learner's code as the grading user, outside the sandbox), no feedback
  generated or released. The exchange's release, collect and feedback classes refuse too (nbgrader_config.py
  here), should a route reach them.
- `/formgrader?path=DIR` makes stock Formgrader load DIR/nbgrader_config.py: Python, run as the grading user,
  from any folder the grader can write (/tmp). Refused.
- `/formgrader/submissions/<id>/<file>` serves any file under the course directory to stock Formgrader
  (`..%2F..%2Fsource%2F...`: the solutions, term.toml, the gradebook). Here: only that submission's own
  autograded folder, links resolved, and each file sandboxed (a learner's HTML runs in no origin).
- Jupyter Server's own APIs (contents, kernels, sessions, terminals, config, files, nbconvert, shutdown): the
  authorizer refuses every one (`FormgraderOnly`; Formgrader's handlers do not ask it); besides, no terminals,
  no kernel can start (`NoKernels`, no kernelspec allowed), the contents API sees an empty folder and writes
  nothing (`NoContents`), and no other server extension (JupyterLab, the notebook) is loaded.
- A hand grade: a finite number from 0 to the cell's points (`BoundedGrade`); extra credit is the instructor's.
What it does not close: a hand grade may be given for any graded cell (nbgrader's manual grading, as in
the instructor's Formgrader), and the grading page shows each submission with its rubric. That page renders
the autograded notebook in the hub's origin, as the instructor's Formgrader does; `grader autograde` wrote it
sanitised (grader.classroom.intake.sanitise), which is what keeps a learner's markdown from scripting a grader.
"""
from __future__ import annotations

import json
import os
import signal
import tempfile

from jupyter_server.auth.authorizer import Authorizer
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
from jupyter_server.utils import url_path_join
from nbgrader.api import MissingEntry
from nbgrader.exchange import ExchangeError
from nbgrader.exchange.default import ExchangeCollect, ExchangeReleaseAssignment, ExchangeReleaseFeedback
from nbgrader.server_extensions.formgrader import apihandlers, handlers
from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension
from tornado import ioloop, web
from traitlets import default

from grader.classroom.grades.total import bounded
from grader.classroom.onsubmit.servicelock import end_with_parent

INSTRUCTORS = "is the instructor's (their own Formgrader, in their server): the shared Formgrader grades by hand"
WRITES = ("post", "put", "patch", "delete")


class BoundedGrade(apihandlers.GradeHandler):
    """A grader's hand grade: a finite number from 0 to the cell's points. Extra credit (points past the
    maximum) is the instructor's: a grader's request keeps the one the gradebook holds."""

    @web.authenticated
    @apihandlers.check_xsrf
    @apihandlers.check_notebook_dir
    def put(self, grade_id):
        try:
            grade = self.gradebook.find_grade_by_id(grade_id)
        except MissingEntry:
            raise web.HTTPError(404) from None
        data = self.get_json_body() or {}
        score, extra = data.get("manual_score"), data.get("extra_credit")
        if score is not None and (isinstance(score, bool) or bounded(score, grade.max_score) is None):
            raise web.HTTPError(400, f"a hand grade is a number from 0 to {grade.max_score:g}, "
                                     f"not {str(score)[:40]!r}")
        if extra not in (None, 0, grade.extra_credit):
            raise web.HTTPError(403, f"extra credit {INSTRUCTORS}")
        grade.manual_score = None if score is None else float(score)
        grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
        self.gradebook.db.commit()
        self.write(json.dumps(grade.to_dict()))


# The writes a grader may make: a hand grade, a comment, a flag. Every other POST/PUT/PATCH/DELETE is refused.
GRADERS_WRITE = {BoundedGrade: {"put"}, apihandlers.CommentHandler: {"put"},
                 apihandlers.FlagSubmissionHandler: {"post"}}


def _refuse(self, *args, **kwargs):
    raise web.HTTPError(403, f"{self.request.method} {self.request.path} {INSTRUCTORS}")


def for_graders(handler: type) -> type:
    """`handler` with each write a grader may not make refused (403, with the reason)."""
    allowed = GRADERS_WRITE.get(handler, set())
    refused = {method: _refuse for method in WRITES if method not in allowed}
    return type(f"Graders{handler.__name__}", (handler,), {**refused, "__module__": __name__})


class Start(handlers.FormgraderHandler):
    def get(self):
        if self.get_argument("path", ""):
            raise web.HTTPError(403, "the shared Formgrader grades its own course directory only")
        return super().get()


class SubmissionFiles(handlers.SubmissionFilesHandler):
    """A file of one submission (its notebook's images), from that submission's autograded folder alone."""

    def set_default_headers(self):
        super().set_default_headers()
        self.set_header("Content-Security-Policy", "sandbox")  # a learner's HTML file runs in no origin
        self.set_header("X-Content-Type-Options", "nosniff")

    def validate_absolute_path(self, root, absolute_path):
        submission_id = self.path_args[0].lstrip("/").split("/", 1)[0]
        try:
            notebook = self.gradebook.find_submission_notebook_by_id(submission_id)
        except MissingEntry:
            raise web.HTTPError(404) from None
        folder = os.path.realpath(self.coursedir.format_path(
            self.coursedir.autograded_directory, notebook.student.id, notebook.assignment.assignment.name))
        wanted = os.path.realpath(absolute_path)
        if os.path.commonpath([wanted, folder]) != folder or wanted == folder:
            raise web.HTTPError(404)
        return super().validate_absolute_path(root, absolute_path)


STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
NOTE = ('<p class="alert alert-info graders-note" role="note">The graders\' Formgrader: grade by hand here. Releasing, '
        "collecting, autograding, feedback, and adding assignments or students are the instructor's (their own "
        "Formgrader, in their server), so their buttons are not shown.</p>")


def with_graders_chrome(handler: type) -> type:
    """A page of `handler` with the graders' stylesheet (the instructor's buttons not drawn) and a note saying why."""
    def render(self, name, **ns):
        page = handlers.BaseHandler.render(self, name, **ns)
        link = f'<link rel="stylesheet" href="{self.base_url}/formgrader/graders/graders.css">'
        body = f'<body class="page-{os.path.splitext(name)[0]}">' + (NOTE if name.startswith("manage_") else "")
        return page.replace("</head>", link + "</head>", 1).replace("<body>", body, 1)
    return type(f"Graders{handler.__name__}", (handler,), {"render": render, "__module__": __name__})


REPLACED = {handlers.FormgraderHandler: Start, handlers.SubmissionFilesHandler: SubmissionFiles,
            apihandlers.GradeHandler: BoundedGrade}


def routes(rules: list) -> list:
    """nbgrader's Formgrader routes, each handler replaced by its graders' version."""
    out = []
    for pattern, handler, *rest in rules:
        handler = REPLACED.get(handler, handler)
        if issubclass(handler, apihandlers.BaseApiHandler):
            handler = for_graders(handler)
        elif handler is not SubmissionFiles:
            handler = with_graders_chrome(handler)
        out.append((pattern, handler, *rest))
    return out


class GradersFormgrade(FormgradeExtension):
    def init_handlers(self, webapp):
        """As FormgradeExtension.init_handlers, through `routes`."""
        rules = routes([*handlers.default_handlers, *apihandlers.default_handlers]) + [
            (r"/formgrader/static/(.*)", web.StaticFileHandler, {"path": handlers.static_path}),
            (r"/formgrader/graders/(.*)", web.StaticFileHandler, {"path": STATIC}),
            (r"/formgrader/.*", handlers.Template404)]
        base = webapp.settings["base_url"]
        webapp.add_handlers(".*$", [(url_path_join(base, pattern.lstrip("/")), *rest) for pattern, *rest in rules])


def _jupyter_server_extension_points():
    return [{"module": "shared_formgrader"}]


# Extensions that may run beside it: the hub's login (jupyterhub-singleuser) and this one.
ALLOWED_EXTENSIONS = {"jupyterhub", "shared_formgrader"}


def unlocked(serverapp) -> list[str]:
    """What of jupyter_server_config.py does not hold in `serverapp` (a config that failed to load, an
    extension enabled after it): each, in words."""
    loaded = {name for name, enabled in serverapp.jpserver_extensions.items() if enabled}
    problems = [f"server extension {name} is enabled" for name in sorted(loaded - ALLOWED_EXTENSIONS)]
    for what, have, want in [("authorizer", serverapp.authorizer, FormgraderOnly),
                             ("kernel manager", serverapp.kernel_manager, NoKernels),
                             ("contents manager", serverapp.contents_manager, NoContents)]:
        if not isinstance(have, want):
            problems.append(f"the {what} is {type(have).__name__}, not {want.__name__}")
    if serverapp.terminals_enabled:
        problems.append("terminals are enabled")
    return problems


def _load_jupyter_server_extension(serverapp):
    """As nbgrader.server_extensions.formgrader loads Formgrader, with the graders' handlers; nothing at all
    unless the server is locked down (jupyterhub_config.py makes a failure here stop the service)."""
    problems = unlocked(serverapp)
    if problems:
        raise RuntimeError(f"the shared Formgrader is not locked down: {'; '.join(problems)}")
    formgrader = GradersFormgrade(parent=serverapp)
    formgrader.root_dir = serverapp.root_dir
    formgrader.log = serverapp.log
    formgrader.initialize([])
    formgrader.init_tornado_settings(serverapp.web_app)
    formgrader.init_handlers(serverapp.web_app)
    if os.environ.get("COURSE_HUB_PID"):  # end with the hub, as the grading service does: none left behind
        hub_alive = end_with_parent(int(os.environ["COURSE_HUB_PID"]))
        ioloop.PeriodicCallback(lambda: hub_alive() or os.kill(os.getpid(), signal.SIGTERM), 2000).start()
    serverapp.log.info("the shared Formgrader: hand grading only (%s)", __file__)


class FormgraderOnly(Authorizer):
    """No Jupyter Server API for anyone here: contents, kernels, sessions, terminals, config, shutdown."""

    def is_authorized(self, handler, user, action, resource):
        return False


class NoKernels(AsyncMappingKernelManager):
    async def start_kernel(self, *args, **kwargs):
        raise web.HTTPError(403, "no kernels in the shared Formgrader")


class NoContents(AsyncLargeFileManager):
    """The contents API on an empty folder of its own, read-only."""

    @default("root_dir")
    def _empty_folder(self):
        self._folder = tempfile.TemporaryDirectory(prefix="shared-formgrader-")  # removed when the server ends
        return self._folder.name

    def save(self, *args, **kwargs):
        raise web.HTTPError(403, "the shared Formgrader writes no files")

    delete_file = rename_file = new = new_untitled = copy = save


def _refusing(base: type, what: str) -> type:
    def start(self):
        raise ExchangeError(f"{what} {INSTRUCTORS}")
    return type(f"No{base.__name__}", (base,), {"start": start, "__module__": __name__})


NoReleaseAssignment = _refusing(ExchangeReleaseAssignment, "releasing an assignment")
NoCollect = _refusing(ExchangeCollect, "collecting submissions")
NoReleaseFeedback = _refusing(ExchangeReleaseFeedback, "releasing feedback")

"""`grader serve`: the grading service the hub runs (deploy/jupyterhub/jupyterhub_config.py).

A thread grades (grader.classroom.onsubmit.Service.serve); tornado serves the pages under the hub's
prefix `/services/<name>/`, each request logged in through the hub (OAuth: jupyterhub.services.auth).
A learner gets their own rows and feedback only, as much of them as grader.classroom.visibility allows;
the instructors named on the command line get the class page and anyone's feedback. Every response carries
a strict Content-Security-Policy (a sandbox: no script, nothing loaded but inline styles and data: images)
and nosniff, the feedback files included: what a learner wrote is drawn there (sanitised, and this besides).
"""
from __future__ import annotations

import json
import os
import threading
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
from jupyterhub.utils import url_path_join
from tornado import ioloop, web

from grader.classroom.ledger import STATE_DIR, now
from grader.classroom.onsubmit_pages import batch_feedback, batch_key, class_page, learner_page
from grader.classroom.visibility import learner_view, policy_for

HEADERS = {
    "Content-Security-Policy": "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                               "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class Strict(web.RequestHandler):
    def set_default_headers(self):  # every response, errors and redirects included
        for name, value in HEADERS.items():
            self.set_header(name, value)


class Page(HubOAuthenticated, Strict):
    def initialize(self, service, instructors: set[str], hub_auth: HubOAuth):  # service: onsubmit.Service
        self.service, self.instructors, self.hub_auth = service, instructors, hub_auth

    @property
    def name(self) -> str:
        return self.current_user["name"]

    @property
    def instructor(self) -> bool:
        return self.name in self.instructors

    @property
    def base(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")

    def term(self):
        """The course's term (its policy), or None while term.toml does not read: then each entry's own."""
        try:
            return self.service.term()
        except Exception:  # noqa: BLE001 - a typo in term.toml must not open what the policy hides
            return None


class Callback(HubOAuthCallbackHandler, Strict):
    """The hub's OAuth callback, with the same HubOAuth as the pages (it holds the login's PKCE state)."""

    def initialize(self, hub_auth: HubOAuth):
        self.hub_auth = hub_auth


class Mine(Page):
    @web.authenticated
    def get(self):
        self.write(learner_page(self.service.ledger, self.name, self.base, self.instructor,
                                totals=self.service.totals(), term=self.term()))


class MineJSON(Page):
    @web.authenticated
    def get(self):
        term, moment, totals = self.term(), now(), self.service.totals()
        rows = [learner_view(e, policy_for(term, e), moment, totals.get((e.student, e.assignment))).as_json()
                for e in self.service.ledger.of(student=self.name)]
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps(rows))


class Feedback(Page):
    @web.authenticated
    def get(self, key: str):
        entry = next((e for e in self.service.ledger.of() if e.key == key), None)
        if entry is None and self.instructor:  # a learner graded in batch (the class page's link)
            path = next((p for (s, a), p in batch_feedback(self.service.course_dir).items() if batch_key(s, a) == key),
                        None)
            if path is not None:
                self.set_header("Content-Type", "text/html; charset=utf-8")
                self.write(path.read_bytes())
                return
        if entry is None or entry.feedback is None or (entry.student != self.name and not self.instructor):
            raise web.HTTPError(404)  # another learner's feedback does not exist, as far as this learner knows
        if not self.instructor and not learner_view(entry, policy_for(self.term(), entry), now()).feedback:
            raise web.HTTPError(404)  # what the policy hides for now
        path = self.service.course_dir / STATE_DIR / "feedback" / entry.key / entry.feedback
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.write(path.read_bytes())


class ClassView(Page):
    @web.authenticated
    def get(self):
        if not self.instructor:
            raise web.HTTPError(403, "the class page is for the instructors")
        self.write(class_page(self.service.ledger, self.service.totals(), self.base, self.service.policy.problem,
                              batch_feedback(self.service.course_dir)))


def serve(service, instructors: set[str], poll: float = 1.0, port: int | None = None,
          hub_alive=None) -> None:
    """Grade in a thread, serve the pages here, until interrupted (or, given `hub_alive`, until it says
    the hub that started the service has ended)."""
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
    if port is None:
        port = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101")).port
    auth = HubOAuth(api_token=os.environ["JUPYTERHUB_API_TOKEN"], cache_max_age=60)
    options = {"service": service, "instructors": instructors, "hub_auth": auth}
    app = web.Application([
        (prefix, Mine, options),
        (url_path_join(prefix, "api/mine"), MineJSON, options),
        (url_path_join(prefix, r"feedback/([0-9a-f]{16})"), Feedback, options),
        (url_path_join(prefix, "class"), ClassView, options),
        (url_path_join(prefix, "oauth_callback"), Callback, {"hub_auth": auth}),
    ], cookie_secret=os.urandom(32), login_url=auth.login_url)
    app.listen(port, "127.0.0.1")
    worker = threading.Thread(target=service.serve, args=(poll,), daemon=True, name="grading")
    worker.start()
    pid = service.course_dir / STATE_DIR / "service.pid"  # for an instructor (and the hub test) to find it
    pid.parent.mkdir(parents=True, exist_ok=True)
    pid.write_text(f"{os.getpid()}\n")
    print(f"grading service: {service.course_dir}, exchange {service.exchange}, on port {port} at {prefix}",
          flush=True)
    if hub_alive:
        loop = ioloop.IOLoop.current()
        ioloop.PeriodicCallback(lambda: hub_alive() or loop.stop(), 2000).start()
    try:
        ioloop.IOLoop.current().start()
    finally:
        service.stop()
        worker.join(timeout=60)

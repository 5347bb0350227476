"""`grader serve`: the grading service the hub runs (deploy/jupyterhub/jupyterhub_config.py).

A thread grades (grader.classroom.onsubmit.service.Service.serve); tornado serves the pages under the hub's
prefix `/services/<name>/`, each request logged in through the hub (OAuth: jupyterhub.services.auth).
A learner gets their own rows and feedback only, as much of them as grader.classroom.policy.visibility allows,
and asks for a regrade of one item of a graded row (grader.classroom.grades.requests); the staff named on the
command line (`--instructor`, and the teaching assistants, `--grader`) get the class page, anyone's
feedback and the requests to answer. Nothing on these pages changes the policy (term.toml, the
instructors'). Every response carries a strict Content-Security-Policy (a sandbox: no script, nothing
loaded but inline styles and data: images) and nosniff, the feedback files included: what a learner wrote
is drawn there (sanitised, and this besides); the two pages with forms allow a form posted to the service
itself, nothing more, and every POST needs the XSRF token its form carries.
"""
from __future__ import annotations

import json
import os
import signal
import threading
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
from jupyterhub.utils import url_path_join
from tornado import ioloop, web

from grader.classroom.grades.mistakes import class_mistakes
from grader.classroom.grades.requests import Requests, contexts, hand_score
from grader.classroom.ledger import STATE_DIR, now
from grader.classroom.onsubmit.pages import batch_feedback, batch_key, class_page, learner_page, message_page
from grader.classroom.phrasebook import phrasebook
from grader.classroom.policy.visibility import learner_view, policy_for

STRICT_CSP = ("sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
              "form-action 'none'; frame-ancestors 'none'")
# The learner page and the class page post forms to the service itself; still no script. allow-same-origin:
# a sandbox's opaque origin makes its form's POST cross-site, which carries no SameSite=Lax cookie (the
# hub's login, the XSRF token's); without allow-scripts it gives no script anything (none runs).
FORMS_CSP = ("sandbox allow-forms allow-same-origin; default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
             "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = {
    "Content-Security-Policy": STRICT_CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class Strict(web.RequestHandler):
    def set_default_headers(self):  # every response, errors and redirects included
        for name, value in HEADERS.items():
            self.set_header(name, value)


class Page(HubOAuthenticated, Strict):
    def initialize(self, service, instructors: set[str], hub_auth: HubOAuth, graders: set[str] = frozenset()):
        # service: onsubmit.Service; graders: the teaching assistants (`grader serve --grader NAME`)
        self.service, self.instructors, self.graders, self.hub_auth = service, instructors, graders, hub_auth

    @property
    def name(self) -> str:
        return self.current_user["name"]  # the hub's login (OAuth), never a form field

    @property
    def instructor(self) -> bool:
        """May change the class's policy (nothing on these pages does: term.toml is the instructors')."""
        return self.name in self.instructors

    @property
    def staff(self) -> bool:
        """An instructor or a grader: the class page, anyone's feedback, the requests to answer."""
        return self.instructor or self.name in self.graders

    def requests(self) -> Requests:
        return Requests(self.service.course_dir)

    def check_xsrf_cookie(self):
        """Every POST of a browser carries its form's XSRF token. A script's request that carries the hub's
        API token (`Authorization: token ...`) and no login cookie is exempt, as in the hub itself: no browser
        adds that header to a forged form, and with no cookie to fall back on, a wrong token logs nobody in
        (@web.authenticated refuses the POST)."""
        token = self.request.headers.get("Authorization", "").lower().startswith(("token ", "bearer "))
        login = self.hub_auth.cookie_name  # the hub's OAuth client id ("" unconfigured: no exemption)
        if token and login and login not in self.request.cookies:
            return None
        return super().check_xsrf_cookie()

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
        self.set_header("Content-Security-Policy", FORMS_CSP)
        self.write(learner_page(self.service.ledger, self.name, self.base, self.staff,
                                totals=self.service.totals(), term=self.term(),
                                requests=self.requests().of(self.name), xsrf=self.xsrf_form_html()))


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
        if entry is None and self.staff:  # a learner graded in batch (the class page's link)
            path = next((p for (s, a), p in batch_feedback(self.service.course_dir).items() if batch_key(s, a) == key),
                        None)
            if path is not None:
                self.set_header("Content-Type", "text/html; charset=utf-8")
                self.write(path.read_bytes())
                return
        if entry is None or entry.feedback is None or (entry.student != self.name and not self.staff):
            raise web.HTTPError(404)  # another learner's feedback does not exist, as far as this learner knows
        if not self.staff and not learner_view(entry, policy_for(self.term(), entry), now()).feedback:
            raise web.HTTPError(404)  # what the policy hides for now
        path = self.service.course_dir / STATE_DIR / "feedback" / entry.key / entry.feedback
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.write(path.read_bytes())


class ClassView(Page):
    @web.authenticated
    def get(self):
        if not self.staff:
            raise web.HTTPError(403, "the class page is for the course's staff")
        # lazy: keeps the class's layers at six (tests/test_layout.py)
        from grader.classroom.lti.page import lms_section

        term, totals, requests = self.term(), self.service.totals(), self.requests().of()
        around = contexts(self.service.course_dir, requests, self.service.ledger.of(), totals)
        self.set_header("Content-Security-Policy", FORMS_CSP)
        self.write(class_page(self.service.ledger, totals, self.base, self.service.policy.problem,
                              batch_feedback(self.service.course_dir), requests=requests,
                              accommodations=term.accommodations if term else {}, xsrf=self.xsrf_form_html(),
                              contexts=around,
                              accommodation_terms=self.instructor or bool(term and term.graders_see_accommodations),
                              extensions=term.extensions if term else {},
                              mistakes=class_mistakes(self.service.course_dir),
                              lms=lms_section(self.service.course_dir)))


class Ask(Page):
    """A learner's regrade request about one item of their own graded row (the learner page's form)."""

    @web.authenticated
    async def post(self):
        key, item = self.get_body_argument("key", ""), self.get_body_argument("item", "")
        entry = next((e for e in self.service.ledger.of(student=self.name) if e.key == key), None)
        if entry is None:
            raise web.HTTPError(404)  # another learner's row does not exist, as far as this learner knows
        term = self.term()
        if term is None:
            raise web.HTTPError(503, "the term file has an error; ask again once it is fixed")
        total = self.service.totals().get((entry.student, entry.assignment))
        try:
            await ioloop.IOLoop.current().run_in_executor(None, lambda: self.requests().ask(
                entry, self.name, item, self.get_body_argument("note", ""), term.requests_per_chapter, total))
        except ValueError as err:
            self.refuse(str(err), phrasebook(entry.lang).text)
            return
        self.redirect(self.base, status=303)

    def refuse(self, why: str, say=str) -> None:
        self.set_status(400)
        self.write(message_page(say(why), self.base))


class Answer(Page):
    """A staff member's answer to a request (the class page's form)."""

    @web.authenticated
    async def post(self, request_id: str):
        if not self.staff:
            raise web.HTTPError(403, "requests are answered by the course's staff")
        decision, reason = self.get_body_argument("decision", ""), self.get_body_argument("reason", "")
        points_text = self.get_body_argument("points", "").strip()
        term = self.term()
        try:
            points = float(points_text) if points_text else None
            if points is not None and points != points:  # NaN
                raise ValueError("points: not a number")
            late = term.policy if term else None

            def apply(request, score):
                asked = next((e for e in self.service.ledger.of(request.student) if e.key == request.key), None)
                if asked is None or not asked.counted:  # the gradebook holds another attempt (or none known)
                    raise ValueError(f"the request is about an attempt the gradebook does not hold "
                                     f"({asked.id if asked else request.key}): decline it, or accept it without points")
                return hand_score(self.service.course_dir, request.student, request.assignment, request.item, score,
                                  late, request.id)

            await ioloop.IOLoop.current().run_in_executor(None, lambda: self.requests().answer(
                request_id, decision, reason, self.name, points, apply))
        except LookupError:
            raise web.HTTPError(404) from None
        except ValueError as err:
            self.set_status(400)
            self.write(message_page(str(err).replace("could not convert string to float", "points: not a number"),
                                    f"{self.base}class"))
            return
        self.redirect(f"{self.base}class", status=303)


class RequestsJSON(Page):
    @web.authenticated
    def get(self):
        found = self.requests().of(None if self.staff else self.name)
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps([r.as_json() for r in found]))


def application(service, instructors: set[str], graders: set[str], auth: HubOAuth, prefix: str) -> web.Application:
    """The service's routes under `prefix`, XSRF checked on every POST."""
    options = {"service": service, "instructors": instructors, "graders": graders, "hub_auth": auth}
    return web.Application([
        (prefix, Mine, options),
        (url_path_join(prefix, "api/mine"), MineJSON, options),
        (url_path_join(prefix, r"feedback/([0-9a-f]{16})"), Feedback, options),
        (url_path_join(prefix, "class"), ClassView, options),
        (url_path_join(prefix, "requests"), Ask, options),
        (url_path_join(prefix, r"requests/([0-9a-f]{16})/answer"), Answer, options),
        (url_path_join(prefix, "api/requests"), RequestsJSON, options),
        (url_path_join(prefix, "oauth_callback"), Callback, {"hub_auth": auth}),
    ], cookie_secret=os.urandom(32), login_url=auth.login_url, xsrf_cookies=True,
        xsrf_cookie_kwargs={"samesite": "Lax"})  # as a browser treats the hub's login cookie after 2 minutes


def serve(service, instructors: set[str], poll: float = 1.0, port: int | None = None,
          hub_alive=None, graders: set[str] = frozenset()) -> None:
    """Grade in a thread, serve the pages here, until interrupted (or, given `hub_alive`, until it says
    the hub that started the service has ended)."""
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
    if port is None:
        port = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101")).port
    auth = HubOAuth(api_token=os.environ["JUPYTERHUB_API_TOKEN"], cache_max_age=60)
    app = application(service, instructors, graders, auth, prefix)
    app.listen(port, "127.0.0.1")
    worker = threading.Thread(target=service.serve, args=(poll,), daemon=True, name="grading")
    worker.start()
    pid = service.course_dir / STATE_DIR / "service.pid"  # for an instructor (and the hub test) to find it
    pid.parent.mkdir(parents=True, exist_ok=True)
    pid.write_text(f"{os.getpid()}\n")
    print(f"grading service: {service.course_dir}, exchange {service.exchange}, on port {port} at {prefix}",
          flush=True)
    loop = ioloop.IOLoop.current()
    if hub_alive:
        ioloop.PeriodicCallback(lambda: hub_alive() or loop.stop(), 2000).start()
    for sig in (signal.SIGINT, signal.SIGTERM):  # the hub's stop (SIGINT, then SIGTERM): a plain end, no traceback
        loop.asyncio_loop.add_signal_handler(sig, loop.stop)
    try:
        loop.start()
    finally:
        service.stop()
        worker.join(timeout=10)  # its dispatch round; gradings in flight are not waited for (Service.abandon)

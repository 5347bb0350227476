"""LTI 1.3 in JupyterHub: jupyterhub-ltiauthenticator's LTI13Authenticator (the JupyterHub project's own: its
login initiation, its state and nonce cookies, its redirect to the LMS) with this course's launch check
(grader.classroom.lti.launch) in place of its own, which fetches the key set at every launch, checks no
deployment id, accepts a replayed nonce while its cookie lives and takes the user name from any claim
(email by default). deploy/jupyterhub/jupyterhub_config.py uses it when $COURSE_LTI is set.
"""
from __future__ import annotations

import json

from jupyterhub.handlers import BaseHandler
from jupyterhub.utils import url_path_join
from ltiauthenticator.lti13.auth import LTI13Authenticator
from ltiauthenticator.lti13.handlers import NONCE_STATE_COOKIE_NAME, LTI13CallbackHandler, get_nonce
from tornado.web import HTTPError
from traitlets import Set, Unicode

from grader.classroom.lti.context import save_context
from grader.classroom.lti.launch import KeyCache, LaunchRefused, NonceBook, hub_user, landing, verify_launch
from grader.classroom.lti.platform import load_platform

KEYS = KeyCache()


class CourseCallbackHandler(LTI13CallbackHandler):
    """The launch (the LMS posts the id_token here): refused with a 400 page that says why, or logged in."""

    def decode_and_validate_launch_request(self):
        auth = self.authenticator
        self.check_state()
        nonce_state = self._get_nonce_state_cookie()
        try:
            claims = verify_launch(self.get_body_argument("id_token", ""), auth.platform(),
                                   get_nonce(nonce_state) if nonce_state else None,
                                   NonceBook(auth.folder() / "nonces.json"), KEYS)
        except LaunchRefused as err:
            self.log.warning("LTI launch refused: %s", err)
            raise HTTPError(400, f"LTI launch refused: {err}") from None
        self._landing = landing(claims)
        return claims

    def get_next_url(self, user=None):
        if getattr(self, "_landing", None):
            return self.hub.base_url + self._landing
        return super().get_next_url(user)

    def _get_nonce_state_cookie(self):
        if self._nonce_state_cookie is None:
            self._nonce_state_cookie = self._get_oauth_cookie(NONCE_STATE_COOKIE_NAME)
        return self._nonce_state_cookie


class ToolKeysHandler(BaseHandler):
    """The tool's public key set (the JWKS URL the LMS is given): the LMS checks the grade service's requests
    against it."""

    async def get(self):
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps({"keys": self.authenticator.platform().registration().get_jwks()}))


class CourseLTIAuthenticator(LTI13Authenticator):
    """The hub's authenticator for a class in an LMS: the platform from $COURSE_LTI/platform.json."""

    callback_handler = CourseCallbackHandler
    lti_folder = Unicode(config=True, help="the class's LTI folder ($COURSE_LTI)")
    staff = Set(Unicode(), config=True, help="hub users an LMS instructor or TA may be: the instructor, graders")

    def get_handlers(self, app):
        return [*super().get_handlers(app), (url_path_join("", "lti13", "jwks"), ToolKeysHandler)]

    def folder(self):
        from pathlib import Path

        return Path(self.lti_folder)

    def platform(self):
        platform = load_platform(self.folder())
        if platform is None:
            raise HTTPError(500, "the hub has no LTI registration")
        return platform

    def accounts(self) -> dict[str, str]:
        try:
            found = json.loads((self.folder() / "accounts.json").read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    async def authenticate(self, handler, data=None):
        try:
            name = hub_user(data or {}, self.accounts(), set(self.staff))
        except LaunchRefused as err:
            raise HTTPError(403, f"LTI launch refused: {err}") from None
        save_context(self.folder(), data)
        return {"name": name, "auth_state": None}

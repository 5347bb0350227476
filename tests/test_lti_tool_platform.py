"""The course's LTI tool (grader.classroom.lti) against a real LTI 1.3 platform, Open edX's lti_consumer
(tests/lti_platform.py): the grading service's queue posts a chapter's total through pylti1p3 to the
chapter's line item, pending first, then the hand-graded total, which lands in the platform's gradebook; the
roster comes from the platform's NRPS with learners, TAs as graders and instructors. The same path end to end,
from a launch in Chromium into a hub through grading on submit and a TA's hand grade:
tests/test_lti_hub.py::test_a_launched_learners_total_reaches_the_lms_gradebook_pending_then_hand_graded."""
from __future__ import annotations

import json

import pytest
import tornado.web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from grader.classroom.grades.total import AUTOMATIC, GRADED, PENDING, Part, Total
from grader.classroom.lti.launch import derived_name
from grader.classroom.lti.outbox import AgsSender, Outbox
from grader.classroom.lti.platform import load_platform
from grader.classroom.lti.roster import roster_roles, sync_roster
from tests.lti_platform import Tool, lti_platform
from tests.test_browser import serving

pytestmark = pytest.mark.integration
CHAPTER = "03_positional_encoding"
AGS = "https://purl.imsglobal.org/spec/lti-ags/scope/"


def chapter_total(pending: bool) -> Total:
    written = Part("w1", PENDING, None, 2.0) if pending else Part("w1", GRADED, 1.5, 2.0)
    return Total("ann", CHAPTER, auto=6.0, hand=0.0 if pending else 1.5, late_share=0.0, max_score=10.0,
                 parts=(Part("t1", AUTOMATIC, 6.0, 8.0), written))


def test_the_tool_posts_totals_to_a_real_platforms_gradebook_and_reads_its_roster(tmp_path, monkeypatch):
    folder = tmp_path / "lti"
    folder.mkdir()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (folder / "tool.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                        serialization.NoEncryption()))
    keys = {}

    class ToolKeys(tornado.web.RequestHandler):  # what the hub serves at /hub/lti13/jwks (grader.classroom.lti.hub)
        def get(self):
            self.write(keys)

    with serving(tornado.web.Application([("/jwks", ToolKeys)])) as tool_url:
        tool = Tool(login_url=f"{tool_url}/login", launch_url=f"{tool_url}/launch", jwks_url=f"{tool_url}/jwks")
        with lti_platform(tool, chapters=[CHAPTER]) as platform:
            (folder / "platform.json").write_text(json.dumps({
                "issuer": platform.issuer, "client_id": platform.client_id,
                "deployment_ids": [platform.deployment_id], "auth_login_url": platform.auth_login_url,
                "auth_token_url": platform.auth_token_url, "key_set_url": platform.jwks_url,
                "tool_private_key": "tool.pem"}))
            registered = load_platform(folder)
            keys["keys"] = registered.registration().get_jwks()
            ann = platform.add_user("ann", role="student", name="Ann Lee", email="ann@example.org")
            tim = platform.add_user("tim", role="Community TA", name="Tim Ta")
            ida = platform.add_user("ida", role="instructor", name="Ida Instructor")
            link = platform.chapters[CHAPTER]
            context = {"lineitems": link.lineitems_url, "chapter_lineitems": {CHAPTER: link.lineitem_url},
                       "scope": [AGS + "lineitem", AGS + "lineitem.readonly", AGS + "result.readonly", AGS + "score"],
                       "context_memberships_url": link.memberships_url}
            members = sync_roster(registered, context, {ann: "ann", ida: "instructor"})
            monkeypatch.setenv("COURSE_LEARNERS", "ann")
            outbox, send = Outbox(tmp_path / "course"), AgsSender(registered, context)
            outbox.update({("ann", CHAPTER): chapter_total(pending=True)}, {"ann": ann}, now=1.0)
            assert outbox.flush(send, now=1.0) == 1, outbox.entries
            pending = platform.scores("ann", CHAPTER)
            outbox.update({("ann", CHAPTER): chapter_total(pending=False)}, {"ann": ann}, now=2.0)
            assert outbox.flush(send, now=2.0) == 1, outbox.entries
            final = platform.scores("ann", CHAPTER)
            log = platform.log()
    assert [(s["score_given"], s["grading_progress"]) for s in pending["scores"]] == [(6.0, "PendingManual")], log
    assert pending["gradebook"] is None  # pending is not a final score in the platform's gradebook
    assert [(s["score_given"], s["score_maximum"], s["grading_progress"]) for s in final["scores"]] == [
        (7.5, 10.0, "FullyGraded")], log
    assert final["gradebook"]["score"] == pytest.approx(0.75)
    assert {(m["sub"], m["role"], m["hub_user"]) for m in members} == {
        (ann, "learner", "ann"), (tim, "grader", derived_name(platform.issuer, tim)), (ida, "instructor", "instructor")}
    assert roster_roles(folder)["grader"] == {derived_name(platform.issuer, tim)}

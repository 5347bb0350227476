"""The harness's control API (tests/lti_platform.py): add course members, start a launch as one of them, read
the scores and the gradebook. Answers only requests carrying the key the harness started the platform with."""
import hmac
import json
import uuid

from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from lti_consumer.api import get_lti_1p3_launch_start_url
from lti_consumer.data import Lti1p3LaunchData
from lti_consumer.lti_1p3.extensions.rest_framework.serializers import LtiNrpsContextMembershipPIISerializer
from lti_consumer.models import Lti1p3Passport, LtiAgsScore, LtiConfiguration

from host.apps import course_members
from host.models import Grade, Member

ROLES = {"student", "staff", "instructor", "Community TA", "Group Moderator"}


def chapter_config(chapter):
    for config in LtiConfiguration.objects.all():
        if config.location.block_id == chapter:
            return config
    raise ValueError(f"no resource link for chapter {chapter!r}")


def add_user(body):
    if body.get("role") not in ROLES:
        raise ValueError(f"role must be one of {sorted(ROLES)}, not {body.get('role')!r}")
    user = get_user_model().objects.create(username=body["username"], email=body.get("email", ""),
                                           first_name=body.get("name", ""))
    member = Member.objects.create(user=user, role=body["role"], external_id=body.get("user_id") or uuid.uuid4().hex)
    return {"user_id": member.external_id}


def launch(body):
    """The OIDC login initiation URL at the tool, as the lti_consumer block renders it for this user."""
    member = Member.objects.select_related("user").get(user__username=body["username"])
    config = chapter_config(body["chapter"])
    course = config.location.course_key
    data = Lti1p3LaunchData(
        user_id=member.user_id, external_user_id=member.external_id, user_role=member.role,
        config_id=config.config_id, resource_link_id=str(config.location),
        preferred_username=member.user.username, name=member.user.first_name, email=member.user.email,
        context_id=str(course), context_type=["course_offering"], context_title=settings.COURSE_TITLE,
        context_label=str(course), launch_presentation_document_target="window",
        message_type=body.get("message_type", "LtiResourceLinkRequest"))
    return {"url": get_lti_1p3_launch_start_url(data)}


def scores(body):
    config = chapter_config(body["chapter"])
    member = Member.objects.get(user__username=body["username"])
    posted = LtiAgsScore.objects.filter(line_item__lti_configuration=config, user_id=member.external_id)
    grade = Grade.objects.filter(user=member.user, location=str(config.location)).first()
    return {"scores": [{"score_given": s.score_given, "score_maximum": s.score_maximum, "comment": s.comment,
                        "activity_progress": s.activity_progress, "grading_progress": s.grading_progress,
                        "timestamp": s.timestamp.isoformat()} for s in posted.order_by("timestamp")],
            "gradebook": grade and {"score": grade.score, "max_score": grade.max_score, "comment": grade.comment}}


def memberships(body):
    """The roster the NRPS endpoint serves (its serializer, with names and emails shared)."""
    config = chapter_config(body["chapter"])
    members = sorted(course_members(config.location.course_key).values(), key=lambda m: m["id"])
    for m in members:
        m["external_id"] = Member.objects.get(user_id=m["id"]).external_id
    data = {"id": "", "context": {"id": config.location.course_key}, "members": members}
    return json.loads(json.dumps(LtiNrpsContextMembershipPIISerializer(data).data, default=list))


def signing_key(body):
    """The key the platform signs its launches with (PEM) and its key id: the tests re-sign a launch they altered
    with it, so that the tool's refusal is about the altered claim, not the signature."""
    passport = Lti1p3Passport.objects.get()
    return {"pem": passport.lti_1p3_private_key, "kid": passport.lti_1p3_private_key_id}


ACTIONS = {"users": add_user, "launch": launch, "scores": scores, "memberships": memberships,
           "signing_key": signing_key}


@csrf_exempt
def control(request, action):
    if not hmac.compare_digest(request.headers.get("X-Harness-Key", ""), settings.HARNESS_KEY):
        return JsonResponse({"error": "unknown caller"}, status=403)
    if action == "health":
        return JsonResponse({"ok": True})
    if action not in ACTIONS or request.method != "POST":
        return JsonResponse({"error": f"no action {action!r}"}, status=404)
    try:
        return JsonResponse(ACTIONS[action](json.loads(request.body)))
    except (ValueError, KeyError, Member.DoesNotExist) as error:
        return JsonResponse({"error": f"{type(error).__name__}: {error}"}, status=400)

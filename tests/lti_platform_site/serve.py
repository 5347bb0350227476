"""Starts the LTI 1.3 test platform: migrates a fresh database in LTI_PLATFORM_STATE, registers the tool described
in tool.json there (one resource link per chapter, AGS line item and NRPS on), writes platform.json (what a tool
registers: issuer, client id, URLs) and serves on LTI_PLATFORM_URL's port until terminated."""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.core.servers.basehttp import run  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from lti_consumer.models import CourseAllowPIISharingInLTIFlag, Lti1p3Passport, LtiAgsLineItem, LtiConfiguration  # noqa: E402
from opaque_keys.edx.keys import CourseKey  # noqa: E402


def register(tool):
    course = CourseKey.from_string(tool["course"])
    passport = Lti1p3Passport.objects.create(
        name="course tool", context_key=str(course), lti_1p3_tool_keyset_url=tool.get("jwks_url") or "",
        lti_1p3_tool_public_key=tool.get("public_key") or "")
    passport._generate_lti_1p3_keys_if_missing()
    CourseAllowPIISharingInLTIFlag.objects.create(course_id=course, enabled=True)
    base = settings.BASE_URL + "/api/lti_consumer/v1"
    chapters = {}
    for chapter in tool["chapters"]:
        location = course.make_usage_key("lti_consumer", chapter)
        config = LtiConfiguration.objects.create(
            location=location, version=LtiConfiguration.LTI_1P3, config_store=LtiConfiguration.CONFIG_ON_DB,
            lti_1p3_passport=passport, lti_1p3_oidc_url=tool["login_url"],
            # lti_consumer sends its launch URL as target_link_uri, and posts the id_token to a registered redirect URI.
            lti_1p3_launch_url=tool["target_link_uri"].replace("{chapter}", chapter),
            lti_1p3_redirect_uris=[tool["launch_url"]],
            lti_advantage_ags_mode=LtiConfiguration.LTI_ADVANTAGE_AGS_DECLARATIVE, lti_advantage_enable_nrps=True)
        line_item = LtiAgsLineItem.objects.create(
            lti_configuration=config, resource_id=str(location), resource_link_id=location,
            label=chapter, score_maximum=tool.get("score_maximum", 100))
        chapters[chapter] = {
            "resource_link_id": str(location), "config_id": str(config.config_id),
            "lineitem_url": f"{base}/lti/{config.id}/lti-ags/{line_item.id}",
            "lineitems_url": f"{base}/lti/{config.id}/lti-ags",
            "memberships_url": f"{base}/lti/{config.id}/memberships"}
    return {"issuer": settings.BASE_URL, "client_id": passport.lti_1p3_client_id, "deployment_id": "1",
            "auth_login_url": f"{base}/launch/", "auth_token_url": f"{base}/token/{passport.passport_id}",
            "jwks_url": f"{base}/public_keysets/{passport.passport_id}", "context_id": str(course),
            "chapters": chapters}


def main():
    state = settings.STATE
    call_command("migrate", run_syncdb=True, verbosity=0)
    described = register(json.loads((state / "tool.json").read_text()))
    (state / "platform.json.part").write_text(json.dumps(described))
    (state / "platform.json.part").rename(state / "platform.json")
    port = int(settings.BASE_URL.rsplit(":", 1)[1])
    run("127.0.0.1", port, get_wsgi_application(), threading=True)


if __name__ == "__main__":
    main()

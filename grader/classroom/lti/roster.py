"""The class from the LMS: Names and Role Provisioning Services (NRPS), through pylti1p3.

`sync_roster` reads the LMS course's members and writes $COURSE_LTI/roster.json: each member's stable id
(`sub`), role (learner, grader for a teaching assistant, instructor) and hub user (accounts.json's name for
the `sub`, else one derived from it; never a display name). The hub reads it at start
(deploy/jupyterhub/jupyterhub_config.py): its learners join COURSE_LEARNERS, the class every gate, the class
page, accommodations and similarity use (grader.classroom.intake.identity.the_class), its TAs COURSE_GRADERS.
Run it with `python -m grader.classroom.lti roster`, then restart the hub.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from grader.classroom.intake.identity import SAFE_NAME
from grader.classroom.lti.launch import derived_name

LEARNER, GRADER, INSTRUCTOR = "learner", "grader", "instructor"


def role_of(roles: list[str]) -> str | None:
    """The class role of an NRPS member's LTI roles (a TA is a grader, even where also listed as a learner)."""
    short = {role.rsplit("#", 1)[-1].rsplit("/", 1)[-1] for role in roles if isinstance(role, str)}
    if "TeachingAssistant" in short:
        return GRADER
    if short & {"Instructor", "Administrator"}:
        return INSTRUCTOR
    if "Learner" in short:
        return LEARNER
    return None


def members_to_roster(members: list[dict], issuer: str, accounts: dict[str, str]) -> list[dict]:
    """roster.json's members: the active members with a class role, each with their hub user."""
    found = []
    for member in members:
        sub, role = member.get("user_id"), role_of(member.get("roles", []))
        if not isinstance(sub, str) or not sub or role is None or member.get("status", "Active") != "Active":
            continue
        hub = accounts.get(sub) or derived_name(issuer, sub)
        if not SAFE_NAME.fullmatch(hub):
            raise ValueError(f"accounts.json: {hub!r} (for the LMS user {sub}) is not a name the hub accepts")
        found.append({"sub": sub, "role": role, "hub_user": hub})
    return sorted(found, key=lambda m: (m["role"], m["hub_user"]))


def sync_roster(platform, context: dict, accounts: dict[str, str]) -> list[dict]:
    """Read the LMS course's members (NRPS) and write roster.json; the members written."""
    from pylti1p3.names_roles import NamesRolesProvisioningService
    from pylti1p3.service_connector import ServiceConnector

    url = context.get("context_memberships_url")
    if not url:
        raise ValueError("no LMS roster service yet: launch the tool once from the LMS course (NRPS enabled)")
    service = NamesRolesProvisioningService(ServiceConnector(platform.registration()),
                                            {"context_memberships_url": url})
    members = members_to_roster(service.get_members(), platform.issuer, accounts)
    temp = platform.folder / "roster.json.new"
    temp.write_text(json.dumps({"members": members}, indent=1))
    temp.chmod(0o644)
    os.replace(temp, platform.folder / "roster.json")
    return members


def roster_roles(folder: Path) -> dict[str, set[str]]:
    """role -> hub users, from roster.json ({} of each where there is none)."""
    found: dict[str, set[str]] = {LEARNER: set(), GRADER: set(), INSTRUCTOR: set()}
    try:
        members = json.loads((folder / "roster.json").read_text()).get("members", [])
    except (OSError, ValueError, AttributeError):
        return found
    for member in members:
        if member.get("role") in found and SAFE_NAME.fullmatch(str(member.get("hub_user", ""))):
            found[member["role"]].add(member["hub_user"])
    return found

"""The LMS course the class is linked to: its grade service (AGS line items, the scopes granted) and its
roster service (NRPS), as the platform's launches announce them, kept in $COURSE_LTI/context.json."""
from __future__ import annotations

import json
import os
from pathlib import Path

from grader.classroom.lti.launch import AGS, NRPS, chapter_of


def save_context(folder: Path, claims: dict) -> None:
    """Keep the service URLs of a verified launch (only a verified one: a refusal records nothing), and the line
    item of the chapter its link names (a Canvas assignment or a Moodle activity has its own: the score goes
    there, not to a new column)."""
    ags, nrps = _service(claims, AGS), _service(claims, NRPS)
    before = load_context(folder)
    scope = ags.get("scope")
    found = {**before, **{key: value for key, value in (
        ("lineitems", _url(ags.get("lineitems"))),
        ("scope", scope if isinstance(scope, list) and all(isinstance(s, str) for s in scope) else None),
        ("context_memberships_url", _url(nrps.get("context_memberships_url")))) if value}}
    chapter = chapter_of(claims)
    if chapter is not None and isinstance(ags.get("lineitem"), str):
        found["chapter_lineitems"] = {**before.get("chapter_lineitems", {}), chapter.assignment: ags["lineitem"]}
    if found == before:
        return
    temp = folder / "context.json.new"
    temp.write_text(json.dumps(found, indent=1))
    temp.chmod(0o644)  # the grading service (the instructor's unix user) posts grades with it
    os.replace(temp, folder / "context.json")


def _service(claims: dict, name: str) -> dict:
    """A service claim of a verified launch; one that is not an object announces no service (the LMS signed
    it, but an odd claim must not turn a launch into a server error)."""
    found = claims.get(name)
    return found if isinstance(found, dict) else {}


def _url(value) -> str | None:
    return value if isinstance(value, str) else None


def load_context(folder: Path) -> dict:
    try:
        found = json.loads((folder / "context.json").read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}

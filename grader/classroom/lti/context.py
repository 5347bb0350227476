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
    ags, nrps = claims.get(AGS) or {}, claims.get(NRPS) or {}
    before = load_context(folder)
    found = {**before, **{key: value for key, value in (
        ("lineitems", ags.get("lineitems")), ("scope", ags.get("scope")),
        ("context_memberships_url", nrps.get("context_memberships_url"))) if value}}
    chapter = chapter_of(claims)
    if chapter is not None and isinstance(ags.get("lineitem"), str):
        found["chapter_lineitems"] = {**before.get("chapter_lineitems", {}), chapter.assignment: ags["lineitem"]}
    if found == before:
        return
    temp = folder / "context.json.new"
    temp.write_text(json.dumps(found, indent=1))
    temp.chmod(0o644)  # the grading service (the instructor's unix user) posts grades with it
    os.replace(temp, folder / "context.json")


def load_context(folder: Path) -> dict:
    try:
        found = json.loads((folder / "context.json").read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}

"""`python -m grader.classroom.lti roster`: the class from the LMS (NRPS) into $COURSE_LTI/roster.json."""
from __future__ import annotations

import json
import sys

from grader.classroom.lti.context import load_context
from grader.classroom.lti.platform import load_platform
from grader.classroom.lti.roster import sync_roster


def main(argv: list[str]) -> int:
    if argv != ["roster"]:
        print("usage: python -m grader.classroom.lti roster   (reads the LMS roster into $COURSE_LTI/roster.json)")
        return 2
    try:
        platform = load_platform()
        if platform is None:
            raise ValueError("COURSE_LTI is not set: the class's LTI folder (guides/teaching.md)")
        try:
            accounts = json.loads((platform.folder / "accounts.json").read_text())
        except OSError:
            accounts = {}
        members = sync_roster(platform, load_context(platform.folder), accounts)
    except ValueError as err:
        print(f"roster not read: {err}", file=sys.stderr)
        return 1
    counts = {role: sum(m["role"] == role for m in members) for role in ("learner", "grader", "instructor")}
    print(", ".join(f"{n} {role}s" for role, n in counts.items()) + f": {platform.folder / 'roster.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The class page's LMS section: scores the LMS has not accepted yet, each with why (the LMS down, a scope not
granted) and when it is tried again, so the instructor sees that nothing is lost while it is late."""
from __future__ import annotations

from datetime import datetime, timezone
from html import escape
from pathlib import Path

from grader.classroom.lti.outbox import Outbox
from grader.classroom.lti.platform import lti_folder


def _when(due) -> str:
    try:
        return f"{datetime.fromtimestamp(float(due), timezone.utc):%Y-%m-%d %H:%M UTC}"
    except (TypeError, ValueError, OverflowError, OSError):
        return escape(str(due))


def lms_section(course_dir: Path) -> str:
    """The section's HTML ("" where the class is not in an LMS); every value escaped, the tries and the time
    too (the LMS's error text is data, and so is whatever the outbox file holds)."""
    if lti_folder() is None:
        return ""
    waiting = Outbox(course_dir).waiting()
    items = "".join(
        f"<li>{escape(key)}: {escape(str(entry['want']['score']))} / {escape(str(entry['want']['max_score']))}"
        f" ({escape(entry['want']['progress'])})"
        + (f" · tried {escape(str(entry.get('tries', 0)))} time(s), again at "
           f"{_when(entry.get('due', 0))}: {escape(str(entry['error']))}"
           if entry.get("error") else " · sending")
        + "</li>" for key, entry in waiting)
    return (f"<h2>LMS gradebook</h2><p>{len(waiting)} score(s) not yet accepted by the LMS; they are kept and "
            f"sent again (guides/teaching.md: When the LMS is down).</p><ul>{items or '<li>none</li>'}</ul>")

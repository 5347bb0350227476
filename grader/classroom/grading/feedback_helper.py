"""A second process for a class's feedback pages: nbgrader's generate_feedback for every other chapter while
the grading process does the rest (grader.classroom.grading.recording.feedback_and_export).

A class's feedback takes a second or more per chapter on one core, after the last notebook is judged, with
the machine's other cores idle. The helper starts with the batch, imports nbgrader while notebooks are judged,
then waits for its share. It is the grader's own code, run as the instructor: `python -P` (nothing from the
working directory, where learners' files may lie), its job read from stdin as JSON (the gradebook's URL may
hold a password: never on a command line), its errors in a file of its own. It writes the feedback pages and
the late penalties that generate_feedback settles, as the grading process would; the grading process holds the
course's locks for it meanwhile (grader.classroom.locks) and waits for it. Should it fail, the grading process
makes its chapters' pages itself, so a helper's failure costs time, never a page.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from grader.chapters import Chapter, find_chapter

WAIT = 600  # seconds the grading process waits for the helper's share before making those pages itself


class Gradebook(NamedTuple):
    """What generate_feedback needs of a course directory (grader.classroom.grading.recording.nbgrader_api)."""
    root: Path
    db_url: str


class FeedbackHelper:
    """The helper process, from `start` (the batch begins) to `finish` (its share of the pages is made)."""

    def __init__(self, root: Path, db_url: str):
        self.course = Gradebook(Path(root), db_url)
        self.proc: subprocess.Popen | None = None
        self.errors = tempfile.TemporaryFile()

    def start(self) -> FeedbackHelper:
        try:
            self.proc = subprocess.Popen([sys.executable, "-P", "-m", __name__], stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, stderr=self.errors, cwd=self.course.root)
        except OSError:  # no helper: the grading process makes every page
            self.proc = None
        return self

    def give(self, chapters: list[Chapter], students: list[str] | None, score_only: bool) -> bool:
        """Hand the helper its chapters; False when it cannot take them (the caller makes them)."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        job = {"root": str(self.course.root), "db_url": self.course.db_url,
               "chapters": [c.assignment for c in chapters], "students": students, "score_only": score_only}
        try:
            self.proc.stdin.write(json.dumps(job).encode())
            self.proc.stdin.close()
        except OSError:
            return False
        return True

    def finish(self) -> bool:
        """Wait for the helper; whether it made every page of its share (else its errors go to stderr)."""
        if self.proc is None:
            return False
        try:
            code = self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            code = None
        self.close()
        self.errors.seek(0)
        said = self.errors.read().decode(errors="replace").strip()
        if code != 0:
            print(f"grader: the feedback helper failed ({said[-300:] or f'exit status {code}'}); its chapters' "
                  "feedback is made here instead", file=sys.stderr)
        elif said:
            print(said[-2000:], file=sys.stderr)
        return code == 0

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> FeedbackHelper:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
        self.errors.close()


def main() -> int:
    # imported before the job arrives, while notebooks are judged: nbgrader, its converters, the page's exporter
    from nbgrader.apps import NbGraderAPI  # noqa: F401
    from nbgrader.converters import GenerateFeedback  # noqa: F401

    # lazy: the helper process's own work, not the batch's (which imports this module)
    from grader.classroom.grading.recording import feedback_exporter, generate_feedback

    feedback_exporter()
    raw = sys.stdin.read()
    if not raw:  # the batch ended without handing anything over
        return 0
    job = json.loads(raw)
    chapters = [find_chapter(name) for name in job["chapters"]]
    course = Gradebook(Path(job["root"]), job["db_url"])
    return 0 if generate_feedback(course, chapters, job["students"], job["score_only"]) else 1


if __name__ == "__main__":
    sys.exit(main())

"""A second process for a batch's nbgrader work: each judged submission's autograde into the gradebook, then every
other chapter's feedback pages (grader.classroom.grading.batch, .recording).

The grading process judges: its threads run the hidden checks against the learners' children, one Python thread at
a time. nbgrader's autograde of a judged notebook (a fifth of a CPU-second) took that same turn, and a class's
feedback came after the last notebook, on one core. The helper starts with a batch and imports nbgrader while the
first notebooks are judged; the grading process writes each verdict where nbgrader's FillVerdict reads it
(recording.record) and asks the helper to autograde it, waiting for the answer while its checks go on, so a
submission is recorded exactly as before, under the same locks, in the same order. At the end the helper makes
its share of the pages while the grading process makes the rest.

It is the grader's own code, run as the instructor: `python -P` (nothing from the working directory, where
learners' files may lie), its requests read from stdin as JSON lines (the gradebook's URL may hold a password:
never on a command line), its answers on its own pipe, anything it prints in a file of its own. Should it fail,
the grading process does the rest itself (`available` turns False): a helper costs time, never a grade or a page.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

from grader.chapters import Chapter, find_chapter

WAIT = 600  # seconds to wait for the helper's share of the pages before making them here


class Course(NamedTuple):
    """What nbgrader's API needs of a course directory (grader.classroom.grading.recording.nbgrader_api)."""
    root: Path
    db_url: str


class NbgraderHelper:
    """The helper process, from `start` (the batch begins) to `finish` (its share of the pages is made)."""

    def __init__(self, root: Path, db_url: str, term=None):
        self.course = Course(Path(root), db_url)
        # the late policy nbgrader's AssignLatePenalties applies (grader.classroom.policy.term.Term.configure)
        self.term = None if term is None else {"policy": asdict(term.policy) if term.policy else None}
        self.proc: subprocess.Popen | None = None
        self.answers = None
        self.stopped = False  # it failed: the grading process does the rest
        self.errors = tempfile.TemporaryFile()

    def start(self) -> NbgraderHelper:
        read, write = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-P", "-m", __name__, str(write)], stdin=subprocess.PIPE, stdout=self.errors,
                stderr=self.errors, cwd=self.course.root, pass_fds=(write,), env=_same_grader(os.environ))
            self.answers = os.fdopen(read, "rb")
            self._send({"root": str(self.course.root), "db_url": self.course.db_url, "term": self.term})
        except OSError:  # no helper: the grading process does it all
            os.close(read)
            self.proc = None
        finally:
            os.close(write)
        return self

    @property
    def available(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def autograde(self, assignment: str, student: str) -> dict | None:
        """nbgrader's autograde of one submission in the helper (its outcome: success, error); None when the
        helper cannot (the caller autogrades it itself, and so every later one)."""
        if self.proc is None or self.stopped:
            return None
        answer = None
        if self.available:
            try:
                self._send({"op": "autograde", "assignment": assignment, "student": student})
                answer = json.loads(self.answers.readline() or b"null")
            except (OSError, ValueError):
                pass
        if type(answer) is not dict:
            self.close()
            self.stopped = True
            print(f"grader: the nbgrader helper stopped (exit status {self.proc.returncode}); this process records "
                  "the rest", file=sys.stderr)
            return None
        return answer

    def give(self, chapters: list[Chapter], students: list[str] | None, score_only: bool) -> bool:
        """Hand the helper its chapters' feedback, its last job; False when it cannot take them."""
        if not self.available:
            return False
        try:
            self._send({"op": "feedback", "chapters": [c.assignment for c in chapters], "students": students,
                        "score_only": score_only})
            self.proc.stdin.close()
        except OSError:
            return False
        return True

    def finish(self) -> bool:
        """Wait for the helper; whether it made every page of its share (else what it said goes to stderr)."""
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
            print(f"grader: the nbgrader helper failed ({said[-300:] or f'exit status {code}'}); its chapters' "
                  "feedback is made here instead", file=sys.stderr)
        return code == 0

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> NbgraderHelper:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
        if self.answers is not None:
            self.answers.close()
        self.errors.close()


def _same_grader(environ) -> dict:
    """This process's environment, with the folder this grader package was imported from first on the path, so
    the helper runs the same grader (a checkout, an installed copy) and nothing from its working directory."""
    home = str(Path(__file__).resolve().parents[3])
    return {**environ, "PYTHONPATH": os.pathsep.join([home, *filter(None, [environ.get("PYTHONPATH")])])}


def main(answers_fd: int) -> int:
    # lazy: the helper process's own work, not the batch's (which imports this module)
    from grader.classroom.grading.nbgrader_costs import kept_open
    from grader.classroom.grading.recording import generate_feedback, nbgrader_api
    from grader.classroom.policy.term import LatePolicy, Term

    warnings.simplefilter("ignore")  # SQLAlchemy's notes on nbgrader's sessions, as in the grading process
    answers = os.fdopen(answers_fd, "w")
    setup = json.loads(sys.stdin.readline() or "null")
    if type(setup) is not dict:
        return 0
    course = Course(Path(setup["root"]), setup["db_url"])
    term = None if setup["term"] is None else Term(policy=LatePolicy(**setup["term"]["policy"])
                                                   if setup["term"]["policy"] else None)
    api = nbgrader_api(course, term)  # nbgrader imported and configured before the first verdict arrives
    with kept_open():  # the batch's gradebook connections, open until it ends (grader.classroom.grading.batch)
        for line in sys.stdin:
            job = json.loads(line)
            if job["op"] == "autograde":
                try:
                    outcome = api.autograde(job["assignment"], job["student"], force=True, create=True)
                except Exception as err:  # noqa: BLE001 - the grading process records the reason
                    outcome = {"success": False, "error": f"{type(err).__name__}: {err}"}
                answers.write(json.dumps({"success": bool(outcome.get("success")),
                                          "error": str(outcome.get("error") or "")[-2000:]}) + "\n")
                answers.flush()
            elif job["op"] == "feedback":
                chapters = [find_chapter(name) for name in job["chapters"]]
                return 0 if generate_feedback(course, chapters, job["students"], job["score_only"]) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))

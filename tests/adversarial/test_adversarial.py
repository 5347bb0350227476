"""Submissions that game the grader or break the batch (tests/adversarial/cases.py), autograded as one
class through the real pipeline: each gets exactly what its honest code earns, every one is recorded,
the gradebook keeps every other score, and the instructor is told why in one line."""
import os
import subprocess
import sys

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.authoring import samples
from grader.boundary.confine import Limits, no_new_processes, private_root
from grader.classroom.grading.batch import autograde_class
from tests.adversarial import CLASS_BATCH
from tests.adversarial.cases import CASES, CHAPTER, FULL, Paths


def seccomp_works() -> bool:
    """Whether this machine lets the sandbox refuse new processes (else the fork cases are skipped:
    without the filter a fork bomb would reach the machine)."""
    pid = os.fork()
    if pid == 0:
        try:
            no_new_processes()
            os.fork()
        except OSError:
            os._exit(0)
        os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


def namespaces_work(tmp) -> bool:
    """Whether this machine lets the sandbox have its own filesystem view and network (user namespaces)."""
    (tmp / "job").mkdir()
    (tmp / "root").mkdir()
    pid = os.fork()
    if pid == 0:
        try:
            private_root(str(tmp / "job"), str(tmp / "root"))
        except OSError:
            os._exit(1)
        os._exit(0)
    return os.waitpid(pid, 0)[1] == 0


def skipped(case, seccomp: bool, namespaces: bool) -> str | None:
    if case.needs_seccomp and not seccomp:
        return "no seccomp on this machine: the sandbox cannot refuse new processes here"
    if case.needs_namespaces and not namespaces:
        return "no user namespaces on this machine: the sandbox has no filesystem view of its own here"
    return None


def scores(course) -> dict[str, float]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.find_assignment(CHAPTER.assignment).submissions}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("adversarial")
    paths = Paths(course=str(root / "course"), inbox=str(root / "inbox"))
    seccomp, namespaces = seccomp_works(), namespaces_work(root)
    for case in CASES:
        if skipped(case, seccomp, namespaces):
            continue
        content = case.build(paths)
        path = root / "inbox" / case.name / CHAPTER.notebook_name
        path.parent.mkdir(parents=True)
        path.write_text(content if isinstance(content, str) else nbformat.writes(content))
    summary = autograde_class(root / "inbox", root / "course", jobs=2, timeout=10, chapters=[CHAPTER],
                              progress=False, limits=Limits(memory_mb=1024, file_mb=64, submission_seconds=90))
    return root, summary, scores(root / "course"), (seccomp, namespaces)


@CLASS_BATCH
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_gets_what_honest_code_earns(graded, case):
    root, summary, recorded, available = graded
    if skipped(case, *available):
        pytest.skip(skipped(case, *available))
    assert case.name in recorded, f"{case.name} has no gradebook entry\n{summary}"
    if case.expected is not None:
        assert recorded[case.name] == pytest.approx(case.expected), summary
    if case.at_most:
        assert recorded[case.name] <= recorded[case.at_most] < FULL, summary
    if case.reason:
        notes = [line for line in summary.splitlines() if line.startswith("note:") and f"/{case.name}/" in line]
        assert notes and case.reason in notes[0], summary


@CLASS_BATCH
def test_nothing_left_behind(graded):
    root, summary, recorded, _ = graded
    assert not (root / "course" / "planted-by-a-learner.txt").exists()
    with Gradebook(f"sqlite:///{root / 'course' / 'gradebook.db'}") as gb:
        assert not [g for g in gb.db.query(__import__("nbgrader.api", fromlist=["Grade"]).Grade)
                    if g.manual_score is not None]
    # feedback shows the learner's outputs, bounded: 100 MB of print is cut to a small notebook
    autograded = root / "course" / "autograded" / "100-mb-of-output" / CHAPTER.assignment / CHAPTER.notebook_name
    assert autograded.stat().st_size < 5_000_000
    assert "more characters of output were dropped" in autograded.read_text()


def test_concurrent_runs_and_a_failed_regrade(tmp_path):
    """Two `grader autograde` on one course directory at once both land; a re-grade that fails
    (a corrupt resubmission) records zero with the reason instead of leaving the old score."""
    course = tmp_path / "course"
    inboxes = []
    for student in ("ann", "bob"):
        inbox = tmp_path / f"inbox-{student}"
        (inbox / student).mkdir(parents=True)
        nbformat.write(samples.reference(CHAPTER), inbox / student / CHAPTER.notebook_name)
        inboxes.append(inbox)
    runs = [subprocess.Popen([sys.executable, "-m", "grader", "autograde", str(inbox), "--course-dir", str(course),
                              "--jobs", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for inbox in inboxes]
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, err
    assert scores(course) == {"ann": FULL, "bob": FULL}
    (inboxes[0] / "ann" / CHAPTER.notebook_name).write_text("{ not json")
    summary = autograde_class(inboxes[0], course, jobs=1, timeout=60, chapters=[CHAPTER], progress=False)
    assert scores(course) == {"ann": 0.0, "bob": FULL}
    assert "not a readable Jupyter notebook" in summary

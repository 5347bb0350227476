"""Quick checks of the pieces that let graders share work (no servers): course directories set up by
processes at once, a worker's verdict as plain data, and SQLite's lock saying why a run waits."""
import json
import multiprocessing
import subprocess
import sys
import time
from dataclasses import asdict
from types import SimpleNamespace

from grader.boundary.unit import Verdict, verdict_from_json
from grader.chapters import CHAPTERS
from grader.classroom.grading.cluster import failure_reason
from grader.classroom.locks import shared
from grader.coursedir import CourseDir


def _set_up_repeatedly(root: str, times: int, errors) -> None:
    try:
        for _ in range(times):
            CourseDir(root, CHAPTERS)
    except Exception as err:  # noqa: BLE001 - reported to the test
        errors.put(f"{type(err).__name__}: {err}")


def test_processes_setting_up_one_course_directory_at_once(tmp_path):
    """CourseDir copied each source folder by deleting and re-copying it: two processes doing so at
    once met each other's folder (FileExistsError, the issue's traceback)."""
    ctx = multiprocessing.get_context("fork")
    errors = ctx.Queue()
    procs = [ctx.Process(target=_set_up_repeatedly, args=(str(tmp_path), 15, errors)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert errors.empty(), errors.get()
    for chapter in CHAPTERS:
        copied = {p.relative_to(tmp_path / "source" / chapter.assignment)
                  for p in (tmp_path / "source" / chapter.assignment).rglob("*") if p.is_file()}
        expected = {p.relative_to(chapter.source_dir) for p in chapter.source_dir.rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts}
        assert copied == expected, chapter


def test_a_worker_verdict_is_plain_data():
    verdict = Verdict(cells={0: {"kind": "cell", "outputs": []}, 3: {"passed": ["a"], "failed": [["b", "no"]]}},
                      error=None, missing=["seccomp"], seconds=1.5, timings={"start": 0.1})
    assert verdict_from_json(json.dumps(asdict(verdict))) == verdict
    broken = verdict_from_json('{"cells": {"x": {}}}')
    assert broken.error and "unreadable verdict" in broken.error and not broken.cells


def test_a_unit_that_killed_its_workers_is_recorded_with_the_reason():
    from distributed.scheduler import KilledWorker

    reason = failure_reason(KilledWorker("grade-1", SimpleNamespace(address="tcp://10.0.0.2:4000"), 3))
    assert "died each time it was tried" in reason and "not graded" in reason


def test_a_second_run_on_one_sqlite_gradebook_waits_and_says_so(tmp_path):
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    waiter = [sys.executable, "-c", f"from grader.classroom.locks import shared\nwith shared({url!r}): print('in')"]
    with shared(url):
        proc = subprocess.Popen(waiter, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        said = proc.stderr.readline()  # printed before it blocks
        time.sleep(0.5)
        assert proc.poll() is None  # still waiting
    out, _ = proc.communicate(timeout=60)
    assert out.strip() == "in"
    assert f"another autograde is using the gradebook {tmp_path / 'gradebook.db'}; waiting" in said


def test_a_course_directory_remembers_its_gradebook(tmp_path):
    """regrade, report and export default to the database the course directory was graded into."""
    from grader.coursedir import CourseDir, database_of

    assert database_of(tmp_path) == f"sqlite:///{tmp_path.resolve() / 'gradebook.db'}"
    url = "postgresql+psycopg://grader:secret@db.example/class?sslmode=require"
    CourseDir(tmp_path, [], db_url=url)
    assert database_of(tmp_path) == url
    assert CourseDir(tmp_path, []).db_url == url

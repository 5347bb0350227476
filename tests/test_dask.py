"""Grading on a real Dask cluster (`dask scheduler` and two `dask worker` processes, as an instructor
starts them): the same scores as the local pool for a mixed class, and a worker killed mid-batch
loses no submission."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

import grader.classroom.grading.cluster
from grader.authoring import samples
from grader.authoring.demo import write_class
from grader.boundary.specs import exercises
from grader.chapters import find_chapter
from grader.classroom.grading.batch import autograde_class
from tests.adversarial.cases import CASES, Paths
from tests.helpers import adversarial_expected

pytestmark = pytest.mark.integration
CHAPTER = find_chapter("02")
DASK = str(Path(sys.executable).parent / "dask")


class Cluster:
    """`dask scheduler` and `dask worker`s, each in its own process group (so a test can kill one whole)."""

    def __init__(self, root: Path, workers: int):
        self.root, self.file = root, root / "scheduler.json"
        self.procs = {"scheduler": self._start(["scheduler", "--scheduler-file", str(self.file), "--port", "0",
                                                "--no-dashboard", "--host", "127.0.0.1"], "scheduler")}
        deadline = time.monotonic() + 60
        while not self.file.exists():
            assert time.monotonic() < deadline, (root / "scheduler.log").read_text()
            time.sleep(0.2)
        self.address = json.loads(self.file.read_text())["address"]
        for n in range(1, workers + 1):
            self.procs[f"w{n}"] = self._start(["worker", "--scheduler-file", str(self.file), "--nthreads", "1",
                                               "--name", f"w{n}", "--no-dashboard"], f"w{n}")
        from distributed import Client

        self.client = Client(self.address, timeout=60, set_as_default=False)
        self.client.wait_for_workers(workers, timeout=120)

    def _start(self, argv: list[str], name: str) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "w")
        return subprocess.Popen([DASK, *argv], stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=self.root)

    def kill(self, name: str) -> None:
        """The machine going away: the worker, its nanny and every process they started."""
        os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait()

    def worker_address(self, name: str) -> str:
        return next(a for a, w in self.client.scheduler_info()["workers"].items() if w["name"] == name)

    def stop(self) -> None:
        self.client.close()
        for name, proc in self.procs.items():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def cluster(tmp_path):
    (tmp_path / "dask").mkdir()
    running = Cluster(tmp_path / "dask", workers=2)
    yield running
    running.stop()


def grades(db: str) -> dict:
    """(student, grade cell) -> score, as nbgrader recorded them."""
    with Gradebook(db) as gb:
        return {(s.student.id, g.name): g.score for a in gb.assignments for s in a.submissions
                for n in s.notebooks for g in n.grades}


def test_a_mixed_class_scores_exactly_as_on_the_local_pool(cluster, tmp_path):
    inbox = tmp_path / "inbox"
    write_class(inbox, [CHAPTER])  # reference, untouched, catalogued mistakes (tests/catalogue), adversarial, corrupt
    case = next(c for c in CASES if c.name == "probe-import-spec")  # learner code importing the hidden specs
    (inbox / "mallory").mkdir()
    nbformat.write(case.build(Paths(course=str(tmp_path / "dask-course"), inbox=str(inbox))),
                   inbox / "mallory" / CHAPTER.notebook_name)

    local = autograde_class(inbox, tmp_path / "local-course", jobs=2, timeout=60, progress=False)
    remote = autograde_class(inbox, tmp_path / "dask-course", timeout=60, progress=False, scheduler=cluster.address)

    on_pool, on_dask = (grades(f"sqlite:///{tmp_path / c / 'gradebook.db'}") for c in ("local-course", "dask-course"))
    assert on_dask == on_pool, remote
    by_student = {s: sum(v for (who, _), v in on_dask.items() if who == s) for s, _ in on_dask}
    assert by_student["ada"] == 8 and by_student["ben"] == 0 and 0 < by_student["cy"] < 8
    points = {name: ex.points for name, ex in exercises(CHAPTER.name).items()}
    assert by_student["dee"] == adversarial_expected(points)
    assert by_student["mallory"] == case.expected and by_student["eve"] == 0
    # The same table and notes (the course directories' own paths aside).
    assert (local.replace("local-course", "COURSE").splitlines()[1:]
            == remote.replace("dask-course", "COURSE").splitlines()[1:])
    # Both workers judged units, each with its own grading pool (grader.classroom.grading.cluster's per-process pool).
    assert all(cluster.client.run(lambda: bool(grader.classroom.grading.cluster._POOLS)).values())


def test_a_worker_killed_mid_batch_loses_no_submission(cluster, tmp_path):
    """`w2` is killed, with its nanny, while it grades; its unit goes to `w1` and every notebook is graded."""
    inbox = tmp_path / "inbox"
    students = [f"s{n}" for n in range(6)]
    for student in students:
        (inbox / student).mkdir(parents=True)
        nbformat.write(samples.reference(CHAPTER), inbox / student / CHAPTER.notebook_name)
    run = subprocess.Popen([sys.executable, "-m", "grader", "autograde", str(inbox), "--course-dir",
                            str(tmp_path / "course"), "--scheduler", cluster.address, "--quiet", "--timeout", "60"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    w2, deadline = cluster.worker_address("w2"), time.monotonic() + 300
    while not cluster.client.processing().get(w2):
        assert run.poll() is None and time.monotonic() < deadline, "w2 was never given a unit"
        time.sleep(0.2)
    time.sleep(3)  # mid-unit: its sandboxed child is running the learner's cells
    cluster.kill("w2")
    out, err = run.communicate(timeout=600)
    assert run.returncode == 0, err[-3000:]
    recorded = grades(f"sqlite:///{tmp_path / 'course' / 'gradebook.db'}")
    totals = {s: sum(v for (who, _), v in recorded.items() if who == s) for s in students}
    assert totals == {s: 8.0 for s in students}, out


def test_units_left_without_any_worker_are_recorded_failed_with_the_reason(cluster, tmp_path, monkeypatch):
    """Every worker gone mid-batch: the batch still ends, each unit not graded recorded as zero, saying why."""
    monkeypatch.setattr(grader.classroom.grading.cluster, "NO_WORKER_SECONDS", 10)
    inbox = tmp_path / "inbox"
    for n in range(4):
        (inbox / f"s{n}").mkdir(parents=True)
        nbformat.write(samples.reference(CHAPTER), inbox / f"s{n}" / CHAPTER.notebook_name)

    def kill_all_once_busy():
        while not any(cluster.client.processing().values()):
            time.sleep(0.2)
        cluster.kill("w1")
        cluster.kill("w2")

    killer = threading.Thread(target=kill_all_once_busy, daemon=True)
    killer.start()
    summary = autograde_class(inbox, tmp_path / "course", timeout=60, progress=False, scheduler=cluster.address)
    killer.join(5)
    recorded = grades(f"sqlite:///{tmp_path / 'course' / 'gradebook.db'}")
    students = {who for who, _ in recorded}
    assert students == {f"s{n}" for n in range(4)}, summary
    failed = [line for line in summary.splitlines() if "no Dask worker was left" in line]
    graded = [s for s in students if sum(v for (who, _), v in recorded.items() if who == s) == 8]
    assert failed and len(failed) + len(graded) == 4, summary


def test_grading_on_submit_runs_on_the_cluster(cluster, tmp_path):
    # The service as `grader serve --scheduler` runs it: a submission from the exchange, judged on the cluster.
    from grader.classroom.grading.cluster import DaskPool
    from grader.classroom.onsubmit.service import Service
    from tests.test_onsubmit import TOTAL, course, gradebook_score, submit

    root, exchange = course(tmp_path, "")
    submit(exchange, "ada", samples.reference(CHAPTER))
    with DaskPool(cluster.address, timeout=120) as pool:
        pool.start()
        [entry] = Service(root, exchange, pool).step()
    assert entry.status == "graded" and entry.score == TOTAL and gradebook_score(root, "ada") == TOTAL

"""Graders at once on one gradebook, as an instructor runs them: `grader autograde` processes started
together on a real PostgreSQL server (a throwaway cluster from the system's PostgreSQL binaries),
and the same runs on SQLite. Every grade is kept, none doubled, and no run ends in a traceback."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from grader.authoring.demo import write_class
from grader.boundary.specs import exercises
from grader.chapters import find_chapter
from grader.classroom.grades.written import written
from grader.coursedir import database_of
from tests.helpers import adversarial_expected

pytestmark = pytest.mark.integration
CHAPTER = find_chapter("02")
PG_BIN = [Path(f"/usr/lib/postgresql/{v}/bin") for v in (17, 16, 15, 14)]


def _tool(name: str) -> str | None:
    for folder in PG_BIN:
        if (folder / name).exists():
            return str(folder / name)
    return shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """A throwaway PostgreSQL cluster listening on a Unix socket in a temp dir (no TCP)."""

    def __init__(self, root: Path):
        initdb, self.pg_ctl = _tool("initdb"), _tool("pg_ctl")
        if not initdb or not self.pg_ctl:
            pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) on this machine: apt-get install postgresql")
        self.root, self.port, self.data = root, _free_port(), root / "data"
        # PostgreSQL refuses to run as root: as root, run it as the postgres user the package made.
        self.user = [] if os.getuid() != 0 else ["runuser", "-u", "postgres", "--"]
        if self.user:
            if subprocess.run(["id", "postgres"], capture_output=True).returncode != 0:
                pytest.skip("running as root and no postgres user to run the server as")
            shutil.chown(root, "postgres")
        self._run([initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"])
        self._run([self.pg_ctl, "-D", str(self.data), "-l", str(root / "server.log"), "-w", "start", "-o",
                   f"-k {root} -p {self.port} -c listen_addresses='' -c fsync=off"])
        self.count = 0

    def _run(self, argv: list[str]) -> None:
        proc = subprocess.run(self.user + argv, capture_output=True, text=True)
        if proc.returncode != 0:
            log = (self.root / "server.log").read_text()[-2000:] if (self.root / "server.log").exists() else ""
            pytest.skip(f"cannot start a PostgreSQL server: {' '.join(argv[:2])}: {proc.stderr[-1000:]} {log}")

    def new_database(self) -> str:
        """A new, empty database on this server, as a SQLAlchemy URL (psycopg 3)."""
        self.count += 1
        name = f"gradebook{self.count}"
        self._run([_tool("createdb"), "-h", str(self.root), "-p", str(self.port), "-U", "postgres", name])
        return f"postgresql+psycopg://postgres@/{name}?host={self.root}&port={self.port}"

    def stop(self) -> None:
        subprocess.run(self.user + [self.pg_ctl, "-D", str(self.data), "-m", "immediate", "stop"], capture_output=True)


@pytest.fixture(scope="module")
def postgres():
    root = Path(tempfile.mkdtemp(prefix="grader-pg-"))  # not under pytest's root-only tmp: the server's user reads it
    server = Postgres(root)
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def inbox(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inbox")
    write_class(folder, [CHAPTER])
    return folder


def expected_scores() -> dict[str, float]:
    points = {name: ex.points for name, ex in exercises(CHAPTER.name).items()}
    return {"ada": sum(points.values()), "ben": 0.0, "dee": adversarial_expected(points), "eve": 0.0}


def start(inbox: Path, course: Path, db: str | None) -> subprocess.Popen:
    argv = [sys.executable, "-m", "grader", "autograde", str(inbox), "--course-dir", str(course), "--quiet",
            "--timeout", "60"]
    return subprocess.Popen(argv + (["--db", db] if db else []), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(*procs: subprocess.Popen) -> list[tuple[int, str, str]]:
    outputs = [p.communicate(timeout=600) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs)]


def gradebook(db: str) -> dict:
    """(student, assignment) -> (score, number of grades) for every submission recorded."""
    with Gradebook(db) as gb:
        return {(s.student.id, s.assignment.name): (s.score, sum(len(n.grades) for n in s.notebooks))
                for a in gb.assignments for s in a.submissions}


def check_class(recorded: dict, students: set[str]) -> None:
    """Every learner once, with exactly the score their notebook earns; none doubled or lost."""
    cells = len(exercises(CHAPTER.name)) + len(written(CHAPTER.name))  # test cells and written answers
    assert {student for student, _ in recorded} == students
    for student, score in expected_scores().items():
        if student in students:
            assert recorded[(student, CHAPTER.assignment)] == (pytest.approx(score), cells), student
    if "cy" in students:
        assert 0 < recorded[("cy", CHAPTER.assignment)][0] < expected_scores()["ada"]


def check_clean(outcomes: list[tuple[int, str, str]]) -> None:
    for code, out, err in outcomes:
        assert code == 0, err[-3000:]
        assert "Traceback" not in err and "database is locked" not in err, err[-3000:]
        assert "Gradebook " in out


def test_two_runs_on_one_course_and_one_postgres_database(postgres, inbox, tmp_path):
    """The issue's reproduction: both runs started at once on one course directory and one new
    database. They take turns on the course directory (the second says so); every grade is kept."""
    db = postgres.new_database()
    outcomes = finish(start(inbox, tmp_path / "course", db), start(inbox, tmp_path / "course", db))
    check_clean(outcomes)
    assert sum("another autograde is using" in err for _, _, err in outcomes) == 1
    check_class(gradebook(db), {"ada", "ben", "cy", "dee", "eve"})
    # The course directory remembers its gradebook: a report needs no --db again.
    assert database_of(tmp_path / "course") == db
    proc = subprocess.run([sys.executable, "-m", "grader", "report", "02", "--course-dir", str(tmp_path / "course")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = tmp_path / "course" / "reports" / f"{CHAPTER.assignment}.html"
    assert "5 submission(s) in the gradebook" in report.read_text()


def test_shards_in_separate_course_directories_share_one_postgres_gradebook(postgres, inbox, tmp_path):
    """A large class split across graders: two course directories, one new database, started at
    once. Creating the gradebook and releasing the chapter race in the database without grader's
    advisory locks (UniqueViolation); `cy` is in both shards, so both record that learner."""
    db = postgres.new_database()
    shards = {"one": ["ada", "ben", "cy"], "two": ["cy", "dee", "eve"]}
    for shard, students in shards.items():
        for student in students:
            shutil.copytree(inbox / student, tmp_path / shard / student)
    outcomes = finish(*(start(tmp_path / shard, tmp_path / f"course-{shard}", db) for shard in shards))
    check_clean(outcomes)
    assert not any("another autograde" in err for _, _, err in outcomes)  # side by side, not in turn
    check_class(gradebook(db), {"ada", "ben", "cy", "dee", "eve"})


def test_two_runs_on_one_sqlite_course_take_turns_and_say_so(inbox, tmp_path):
    """SQLite takes one writer at a time: the two runs wait for each other with a message."""
    outcomes = finish(start(inbox, tmp_path / "course", None), start(inbox, tmp_path / "course", None))
    check_clean(outcomes)
    assert sum("another autograde is using" in err for _, _, err in outcomes) == 1
    check_class(gradebook(f"sqlite:///{tmp_path / 'course' / 'gradebook.db'}"), {"ada", "ben", "cy", "dee", "eve"})


def test_two_course_directories_on_one_sqlite_file_take_turns_and_say_so(inbox, tmp_path):
    """Shards sharing one SQLite file: "database is locked" without the file's lock; with it they
    take turns, and the one that waits says on which gradebook."""
    shared = f"sqlite:///{tmp_path / 'shared.db'}"
    outcomes = finish(start(inbox, tmp_path / "a", shared), start(inbox, tmp_path / "b", shared))
    check_clean(outcomes)
    assert sum(f"another autograde is using the gradebook {tmp_path / 'shared.db'}" in err
               for _, _, err in outcomes) == 1
    check_class(gradebook(shared), {"ada", "ben", "cy", "dee", "eve"})


def _release_into(db: str, root: str, errors, together) -> None:
    from grader.classroom.locks import shared
    from grader.coursedir import CourseDir

    course = CourseDir(Path(root), [CHAPTER], db_url=db)
    together.wait()  # both start releasing at the same moment
    try:
        with shared(db) as book, book.releasing():
            course.release(CHAPTER)
    except RuntimeError as err:
        errors.put(str(err)[-500:])


def test_shards_releasing_into_a_new_postgres_gradebook_at_once(postgres, tmp_path):
    """What two shards do first, six times over: without the advisory lock nbgrader creates the
    gradebook's tables twice at once (UniqueViolation, DuplicateTable) in a third of the tries here."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    for attempt in range(6):
        db, errors, together = postgres.new_database(), ctx.Queue(), ctx.Barrier(2)
        procs = [ctx.Process(target=_release_into, args=(db, str(tmp_path / f"{attempt}-{n}"), errors, together))
                 for n in (1, 2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(300)
        assert errors.empty(), errors.get()
        with Gradebook(db) as gb:
            assert [a.name for a in gb.assignments] == [CHAPTER.assignment]

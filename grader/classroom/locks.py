"""The locks of the class: one grader at a time per course directory, and several graders on one gradebook.

`grader autograde` (and `regrade`) hold a lock on its course directory (`locked`), so two runs on
one course directory take turns. A gradebook can also be shared by course directories: a large
class split into shards, each graded by its own `grader autograde --course-dir shard-N --db URL`.
Then nbgrader's own steps race in the database: two processes creating the schema of a new
gradebook, or releasing the same assignment, insert the same rows (a UniqueViolation), and two
recording the same learner both create that learner's submission. So:

- PostgreSQL: advisory locks (held on one connection of this process, gone if it dies). Releasing
  takes the "release" lock exclusively; recording one submission takes it shared, plus that
  learner's own lock. Shards grade side by side; only these short steps take turns.
- SQLite: one writer at a time is all the file allows (past its busy timeout nbgrader fails
  with "database is locked"), so a run holds the database file's lock from start to end; a second
  run on the same file waits, and says so.
- Another database: no lock of ours; one grader at a time is the instructor's to keep.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import sys
from pathlib import Path

RELEASE = "grader:release"


@contextlib.contextmanager
def locked(root: Path, name: str = ".grader-autograde.lock", what: str | None = None, quiet: bool = False):
    """One `grader autograde` at a time per course directory (or per `what`, locked by the file
    `name` in `root`); a second one waits, and says so (unless `quiet`: a short step's wait is expected)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / name, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not quiet:
                print(f"grader: another autograde is using {what or root}; waiting for it to finish",
                      file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _key(name: str) -> int:
    """A stable signed 64-bit advisory lock key for a name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def sqlite_path(db_url: str) -> Path | None:
    if db_url.startswith("sqlite:///") and ":memory:" not in db_url:
        return Path(db_url.removeprefix("sqlite:///").split("?")[0]).resolve()
    return None


class Locks:
    """No locks: one process uses the gradebook."""

    def releasing(self):
        return contextlib.nullcontext()

    def recording(self, student: str):
        return contextlib.nullcontext()

    def close(self) -> None:
        pass


class AdvisoryLocks(Locks):
    """PostgreSQL advisory locks, on a connection of their own (session locks, never in a transaction)."""

    def __init__(self, db_url: str):
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        self.engine = create_engine(db_url, poolclass=NullPool)
        self.connection = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")

    def _hold(self, function: str, name: str) -> None:
        from sqlalchemy import text

        self.connection.execute(text(f"SELECT {function}(:key)"), {"key": _key(name)})

    @contextlib.contextmanager
    def releasing(self):
        self._hold("pg_advisory_lock", RELEASE)
        try:
            yield
        finally:
            self._hold("pg_advisory_unlock", RELEASE)

    @contextlib.contextmanager
    def recording(self, student: str):
        self._hold("pg_advisory_lock_shared", RELEASE)
        self._hold("pg_advisory_lock", f"grader:student:{student}")
        try:
            yield
        finally:
            self._hold("pg_advisory_unlock", f"grader:student:{student}")
            self._hold("pg_advisory_unlock_shared", RELEASE)

    def close(self) -> None:
        self.connection.close()
        self.engine.dispose()


def _shown(db_url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(db_url).render_as_string(hide_password=True)


@contextlib.contextmanager
def shared(db_url: str, quiet: bool = False):
    """The locks this run holds on its gradebook (see the module's docstring), for `with`."""
    path = sqlite_path(db_url)
    if path is not None:
        with locked(path.parent, f".{path.name}.grader-lock", what=f"the gradebook {path}", quiet=quiet):
            yield Locks()
        return
    if db_url.startswith(("postgresql:", "postgresql+", "postgres:")):
        try:
            locks = AdvisoryLocks(db_url)
        except Exception as err:  # the driver missing, the server down: say which
            raise ValueError(f"cannot open the gradebook {_shown(db_url)}: {type(err).__name__}: {err}") from err
        try:
            yield locks
        finally:
            locks.close()
        return
    if not quiet:
        print(f"grader: {db_url.split(':')[0]} gradebook: run one `grader autograde` at a time on it", file=sys.stderr)
    yield Locks()

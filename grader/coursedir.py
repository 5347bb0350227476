"""A throwaway nbgrader course directory and the nbgrader commands run inside it."""
from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbgrader

from course.toolkit import GRADING_ENV
from grader import sources
from grader.chapters import Chapter

COURSE_ID = "transformers-from-scratch"  # nbgrader's course id: the exchange's folder of this course
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "transformers-course-grader"

# What the release puts where a solution was, in each edition's language (nbgrader's defaults in English;
# the chapters' "How to work" paragraph names the code stub).
STUBS = {"en": ("# YOUR CODE HERE\nraise NotImplementedError()", "YOUR ANSWER HERE"),
         "zh": ("# 在此写下你的代码\nraise NotImplementedError()", "在此写下你的回答")}
CONFIG = """\
c = get_config()
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = {course_id!r}
c.CourseDirectory.db_url = {db_url!r}
c.ClearSolutions.code_stub = {{"python": {code_stub!r}}}
c.ClearSolutions.text_stub = {text_stub!r}
# A runaway cell is interrupted and costs that cell only; the next cells still run.
c.Execute.timeout = {timeout}
c.Execute.interrupt_on_timeout = True
# Stock autograde (`nbgrader autograde`, Formgrader's Autograde button) would run each learner's code in a
# kernel of yours, outside the sandbox: it refuses, naming `grader autograde` (grader.classroom.grading.recording).
c.Autograde.autograde_preprocessors = ["grader.classroom.grading.recording.SandboxOnly"]
# Feedback, also from Formgrader's button: the course's page (figures inside, maths as MathML, exercise
# names) and the course's one total (grader.classroom.grades.total: late penalty, pending written answers).
c.GenerateFeedback.preprocessors = ["grader.classroom.grades.written.DropRubrics",
                                    "grader.classroom.grades.total.SettleTotal",
                                    "nbgrader.preprocessors.GetGrades",
                                    "grader.classroom.intake.sanitise.CommentsAsText",
                                    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor"]
c.SettleTotal.root = {root!r}
from grader.classroom.grading.recording import feedback_exporter  # noqa: E402
c.GenerateFeedback.exporter_class = feedback_exporter()
# Generate feedback (no --force) regenerates the pages whose grades changed, and grades.csv
# (grader.classroom.grading.publish).
from grader.classroom.grading.publish import install  # noqa: E402
install()
"""


def source_digest(chapter: Chapter) -> str:
    """The source folder (notebook, figures, carried modules) and nbgrader's version, hashed."""
    digest = hashlib.sha256(nbgrader.__version__.encode() + CONFIG.encode() + chapter.assignment.encode())
    for path in sorted(p for p in chapter.source_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(chapter.source_dir).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


def _write_if_changed(path: Path, data: bytes) -> None:
    """Replace a file in one step (a reader never sees half of it), and only when its bytes differ."""
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:
            return
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.chmod(temp, 0o644)
    os.replace(temp, path)


def sync_folder(source: Path, target: Path) -> None:
    """Make `target` hold exactly `source`'s files (less __pycache__), file by file.

    Safe while another process syncs the same folder (two graders on one course directory, or a
    course directory shared by several): deleting the folder and copying it anew, as before, let
    one process's copytree meet the folder the other had just made (FileExistsError)."""
    wanted = {p.relative_to(source) for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    for rel in sorted(wanted):
        _write_if_changed(target / rel, (source / rel).read_bytes())
    for path in sorted(target.rglob("*"), reverse=True) if target.is_dir() else []:
        rel = path.relative_to(target)
        if path.is_file() and rel not in wanted and not path.name.startswith("."):
            path.unlink(missing_ok=True)
        elif path.is_dir() and not any(p == rel or rel in p.parents for p in wanted):
            with contextlib.suppress(OSError):
                path.rmdir()


DB_LINE = re.compile(r"^c\.CourseDirectory\.db_url = (.+)$", re.M)


def database_of(root: str | Path) -> str:
    """The gradebook a course directory was last graded into (its nbgrader_config.py says), else its
    own SQLite file: a regrade, report or export of a PostgreSQL class needs no `--db` again."""
    root = Path(root).resolve()
    with contextlib.suppress(OSError, ValueError, SyntaxError):
        found = DB_LINE.search((root / "nbgrader_config.py").read_text())
        if found:
            return str(ast.literal_eval(found.group(1)))
    return f"sqlite:///{root / 'gradebook.db'}"


class CourseDir:
    """An nbgrader course root holding `source/<assignment>/` for the given chapters."""

    def __init__(self, root: Path, chapters: list[Chapter], db_url: str | None = None,
                 timeout: int = 120):
        self.root = Path(root).resolve()
        self.db_url = db_url or database_of(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        langs = {c.lang for c in chapters}
        code_stub, text_stub = STUBS[langs.pop() if len(langs) == 1 else "en"]  # one edition per class
        _write_if_changed(self.root / "nbgrader_config.py",
                          CONFIG.format(root=str(self.root), course_id=COURSE_ID, db_url=self.db_url,
                                        timeout=timeout, code_stub=code_stub, text_stub=text_stub).encode())
        for chapter in chapters:
            sources.require(chapter)  # generated, not committed: the CLI builds it first (grader.sources)
            sync_folder(chapter.source_dir, self.root / "source" / chapter.assignment)

    def nbgrader(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        # nbgrader shells out to `alembic`, and kernels must find this interpreter's packages.
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        # The grading flag lets long training cells shorten themselves (course.toolkit.grading_run);
        # one thread per kernel, since notebooks are graded side by side (--jobs).
        env = dict(os.environ, PATH=path, MPLBACKEND="Agg", PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1",
                   **{GRADING_ENV: "1"})
        proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=self.root, env=env,
                              capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def release(self, chapter: Chapter) -> Path:
        self.nbgrader("generate_assignment", chapter.assignment, "--force")
        self._stamps(chapter, self._release_stamp(chapter))
        return self.root / "release" / chapter.assignment

    def release_every(self, chapters: list[Chapter]) -> None:
        """generate_assignment for all of `chapters` in one nbgrader run (its glob): each run pays for
        starting nbgrader and opening the gradebook, seconds on a loaded machine, so releasing the 18
        editions one by one took minutes. Only for a course directory holding exactly these sources
        (a fresh one): the glob takes every folder under source/."""
        if not chapters:
            return
        held = {p.name for p in (self.root / "source").iterdir()}
        if held != {c.assignment for c in chapters}:
            raise ValueError(f"release_every releases all of source/: it holds {sorted(held)}, "
                             f"not the chapters asked for")
        self.nbgrader("generate_assignment", "*", "--force")
        for chapter in chapters:
            self._stamps(chapter, self._release_stamp(chapter))

    def _release_stamp(self, chapter: Chapter) -> str:
        """The source released and the gradebook it went into: a course directory pointed at another
        database (a PostgreSQL URL) must release there too."""
        return hashlib.sha256((source_digest(chapter) + self.db_url).encode()).hexdigest()

    def _stamps(self, chapter: Chapter | None = None, digest: str | None = None) -> dict:
        path = self.root / ".grader-releases.json"
        try:
            stamps = json.loads(path.read_text())
        except (OSError, ValueError):
            stamps = {}
        if chapter is not None:
            stamps[chapter.assignment] = digest
            path.write_text(json.dumps(stamps, indent=1))
        return stamps

    def release_if_changed(self, chapter: Chapter) -> Path:
        """generate_assignment, unless this course directory already released this very source
        (a class graded again, or in batches, skips the seconds it takes)."""
        released = self.root / "release" / chapter.assignment / chapter.notebook_name
        if released.exists() and self._stamps().get(chapter.assignment) == self._release_stamp(chapter) \
                and (self.root / "gradebook.db").exists() == self.db_url.startswith("sqlite:///"):
            return released.parent
        return self.release(chapter)

    def release_cached(self, chapters: list[Chapter]) -> None:
        """Put the released chapters and their gradebook entries in place, from a cache keyed by
        the source folders (notebooks, figures, carried modules) and nbgrader's version
        (generate_assignment takes seconds)."""
        digest = hashlib.sha256("".join(source_digest(c) for c in chapters).encode())
        cached = CACHE / digest.hexdigest()[:20]
        if not (cached / "gradebook.db").exists():
            CACHE.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=CACHE))
            CourseDir(staging, chapters).release_every(chapters)
            try:
                staging.rename(cached)
            except OSError:  # another process cached the same release first
                shutil.rmtree(staging, ignore_errors=True)
        shutil.copyfile(cached / "gradebook.db", self.root / "gradebook.db")
        shutil.copytree(cached / "release", self.root / "release", dirs_exist_ok=True)
        for chapter in chapters:
            self._stamps(chapter, self._release_stamp(chapter))

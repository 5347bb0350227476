"""`grader build` and `grader release`: the generated artefacts and their freshness checks.

The learner notebook in course/ holds narrative, skeletons and public checks; solutions/ holds
the reference code (solution regions marked); grader/specs holds the hidden tests. `build`
joins them into the nbgrader source notebook; `release` runs nbgrader's own
`generate_assignment` on it, and the result must be exactly the learner notebook.
"""
from __future__ import annotations

import ast
import filecmp
import shutil
import tempfile
from pathlib import Path

import nbformat

from grader.chapters import Chapter
from grader.corpus import generated_files
from grader.coursedir import CourseDir
from grader.runner import exercises

TEST_PREFIX = "test_"
HIDDEN_TEST = '''\
# Hidden tests for `{name}` run here when your notebook is graded ({points:g} point{plural}).
### BEGIN HIDDEN TESTS
from grader.runner import run_checks
run_checks("{chapter}", "{name}", globals())
### END HIDDEN TESTS'''


def solution_source(chapter: Chapter, name: str) -> str:
    """The exact text of the top-level def or class `name` in solutions/<chapter>.py."""
    text = chapter.solutions_file.read_text()
    lines = text.splitlines()
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            end = node.end_lineno
            # Comments after the last statement (the END SOLUTION marker) belong to the body.
            while end < len(lines) and (lines[end].startswith((" ", "\t")) or not lines[end].strip()):
                end += 1
            while not lines[end - 1].strip():
                end -= 1
            source = "\n".join(lines[start - 1:end])
            if "### BEGIN SOLUTION" not in source:
                raise ValueError(f"{chapter.solutions_file.name}: `{name}` has no solution region")
            return source
    raise ValueError(f"{chapter.solutions_file.name} defines no `{name}`")


def build_source_notebook(chapter: Chapter) -> nbformat.NotebookNode:
    nb = nbformat.read(chapter.course_notebook, as_version=4)
    specs = exercises(chapter.name)
    solved, tested = [], []
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        meta = cell.metadata.get("nbgrader")
        if not meta:
            continue
        # What generate_assignment adds on release; the source must not carry it.
        for key in ("checksum", "cell_type"):
            meta.pop(key, None)
        for key in ("deletable", "editable"):
            cell.metadata.pop(key, None)
        grade_id = meta["grade_id"]
        if meta.get("solution"):
            cell.source = solution_source(chapter, grade_id)
            solved.append(grade_id)
        elif meta.get("grade"):
            name = grade_id.removeprefix(TEST_PREFIX)
            if name not in specs:
                raise ValueError(f"{chapter.notebook_name}: test cell {grade_id} has no spec in grader/specs")
            meta["points"] = specs[name].points
            points = specs[name].points
            cell.source = HIDDEN_TEST.format(name=name, chapter=chapter.name, points=points,
                                             plural="" if points == 1 else "s")
            tested.append(name)
    for name in specs:
        if solved.count(name) != 1 or tested.count(name) != 1:
            raise ValueError(f"{chapter.notebook_name}: exercise {name} needs exactly one solution cell "
                             f"(grade_id {name!r}) and one test cell (grade_id {TEST_PREFIX + name!r})")
    return nb


def _render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def build(chapters: list[Chapter], check: bool = False) -> list[str]:
    """Write (or, with check, compare) each chapter's source folder; return the stale paths."""
    stale = []
    for chapter in chapters:
        for path, text in generated_files(chapter).items():  # data the chapter folder carries
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
                if not check:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text, encoding="utf-8")
        wanted = {chapter.notebook_name: _render(build_source_notebook(chapter))}
        for extra in sorted(chapter.course_dir.iterdir()):
            if extra.is_file() and extra.suffix != ".ipynb":
                wanted[extra.name] = extra.read_text()
        present = {p.name for p in chapter.source_dir.glob("*")} if chapter.source_dir.exists() else set()
        for name, text in wanted.items():
            path = chapter.source_dir / name
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
                if not check:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
        for name in present - set(wanted):
            stale.append(str(chapter.source_dir / name))
            if not check:
                (chapter.source_dir / name).unlink()
    return stale


def release(chapters: list[Chapter], write: bool = False) -> list[str]:
    """Release each chapter with nbgrader; return the learner files that differ from course/."""
    differ = []
    with tempfile.TemporaryDirectory() as tmp:
        course = CourseDir(Path(tmp), chapters)
        for chapter in chapters:
            released = course.release(chapter)
            names = {p.name for p in released.iterdir()} | {
                p.name for p in chapter.course_dir.iterdir() if p.is_file() and p.name != ".ipynb_checkpoints"}
            for name in sorted(names):
                ours, theirs = chapter.course_dir / name, released / name
                if ours.exists() and theirs.exists() and filecmp.cmp(ours, theirs, shallow=False):
                    continue
                differ.append(str(ours))
                if write and theirs.exists():
                    shutil.copyfile(theirs, ours)
    return differ

"""`grader build` and `grader release`: the generated artefacts and their freshness checks.

The build goes one way. The text source chapters/NN_<name>/<name>.md holds narrative, demo cells and
public checks (grader.authoring.text); solutions/ holds the reference code (solution regions
marked); grader/boundary/specs holds the hidden tests; grader/rubrics the written answers. `build`
joins them into the nbgrader source folder grader/source/NN_<name>/, with the chapter's figures and
data and what the folder must carry to stand on its own (grader.authoring.bundle); `release` runs
nbgrader's own `generate_assignment` on it, and the result is the learner's folder course/NN_<name>/.
Only the learner folders are committed; the source folders are built where they are read (`ensure`),
and the stamps of grader.sources say which are stale.
"""
from __future__ import annotations

import ast
import contextlib
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

from grader import sources
from grader.authoring import figures, glossary, i18n
from grader.authoring.bundle import folder_files, support_files
from grader.authoring.corpus import generated_files
from grader.authoring.text import filled_by, read_text_source
from grader.boundary.specs import exercises
from grader.chapters import RELEASE_PACKAGES, TEST_PREFIX, Chapter, exercise_of, is_answer_cell, is_test_cell
from grader.classroom.grades.written import PREFIX as WRITTEN_PREFIX
from grader.classroom.grades.written import written
from grader.coursedir import CourseDir

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
    nb = read_text_source(chapter)
    specs = exercises(chapter.name)
    questions = written(chapter.name)
    solved, tested, answered = [], [], []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        if not meta:
            continue
        # What generate_assignment adds on release, and what the build adds: not authored.
        for key in ("checksum", "cell_type", "points"):
            if key in meta:
                raise ValueError(f"{chapter.text_source.name}: cell {meta.get('grade_id')} sets nbgrader's {key!r}, "
                                 "which the build or the release writes")
        grade_id = meta["grade_id"]
        if cell.source != filled_by(chapter, cell):
            raise ValueError(f"{chapter.text_source.name}: the body of cell {grade_id} is generated; "
                             f"write only {filled_by(chapter, cell)!r} there")
        if is_answer_cell(cell):  # the model answer; nbgrader's release replaces it with "YOUR ANSWER HERE"
            if grade_id not in questions or not grade_id.startswith(WRITTEN_PREFIX):
                raise ValueError(f"{chapter.notebook_name}: written answer cell {grade_id} has no model answer "
                                 f"and rubric in grader/rubrics/{chapter.name}.md")
            cell.source = questions[grade_id].answer
            meta["points"] = questions[grade_id].points
            answered.append(grade_id)
        elif meta.get("solution"):
            cell.source = solution_source(chapter, grade_id)
            solved.append(grade_id)
        elif is_test_cell(cell):
            name = exercise_of(cell)
            if name not in specs:
                raise ValueError(f"{chapter.notebook_name}: test cell {grade_id} has no spec in grader/boundary/specs")
            meta["points"] = specs[name].points
            points = specs[name].points
            cell.source = HIDDEN_TEST.format(name=name, chapter=chapter.name, points=points,
                                             plural="" if points == 1 else "s")
            tested.append(name)
    for name in specs:
        if solved.count(name) != 1 or tested.count(name) != 1:
            raise ValueError(f"{chapter.notebook_name}: exercise {name} needs exactly one solution cell "
                             f"(grade_id {name!r}) and one test cell (grade_id {TEST_PREFIX + name!r})")
    for grade_id in questions:
        if answered.count(grade_id) != 1:
            raise ValueError(f"{chapter.notebook_name}: written question {grade_id} needs exactly one markdown "
                             "answer cell (nbgrader: solution and grade)")
    return nb


def _render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def _sync(root: Path, wanted: dict[str, bytes], owned: list[str], check: bool) -> list[str]:
    """Make the files under `root` (those in `owned` subfolders, or all when owned is empty) exactly
    `wanted` (relative path -> content); return the paths that were (or, with check, are) stale."""
    stale = []
    present = {rel: path for rel, path in folder_files(root).items()
               if not owned or rel.split("/")[0] in owned}
    for rel, content in wanted.items():
        path = root / rel
        if rel not in present or path.read_bytes() != content:
            stale.append(str(path))
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
    for rel in sorted(set(present) - set(wanted)):
        stale.append(str(root / rel))
        if not check:
            present[rel].unlink()
            for parent in present[rel].parents:
                if parent == root or any(parent.iterdir()):
                    break
                parent.rmdir()
    return stale


def source_files(chapter: Chapter) -> dict[str, bytes]:
    """What the nbgrader source folder grader/source/NN_<name>/ holds (relative path -> content):
    the source notebook, every other file of chapters/NN_<name>/ (figures, data), the data the build
    writes (grader.authoring.corpus) and the `course` and `solutions` modules the notebook imports
    (grader.authoring.bundle). A translated edition (grader/source-<lang>/) differs in the notebook's
    text, its figures (grader.authoring.figures), the font it carries, the translations of its
    `course` modules' messages (course/messages.json, which course.tr reads) and the edition's
    glossary (GLOSSARY.md, grader.authoring.glossary); raises
    i18n.IncompleteTranslation while a catalogue lacks a unit it needs or a figure is not drawn."""
    notebook = build_source_notebook(chapter.edition("en"))
    if chapter.lang != "en":
        notebook = i18n.translate(notebook, chapter, chapter.lang)
    wanted = {chapter.notebook_name: _render(notebook).encode()}
    for rel, path in folder_files(chapter.chapter_dir).items():
        if path != chapter.text_source:
            if rel in (chapter.notebook_name, glossary.FILE) or rel.split("/")[0] in RELEASE_PACKAGES:
                raise ValueError(f"{path}: the build writes this name; authored files may not use it")
            wanted[rel] = path.read_bytes()
    if chapter.lang != "en":  # the edition's figures under the same names: the links stay as they are
        images, missing = figures.edition_images(chapter)
        if missing:
            raise i18n.IncompleteTranslation(missing)
        wanted.update(images)
    wanted.update({rel: text.encode() for rel, text in generated_files(chapter).items()})
    support = support_files(chapter)
    wanted.update(support)
    if chapter.lang != "en":
        carried = [rel for rel in support if rel.startswith("course/") and rel.endswith(".py")]
        wanted[i18n.MESSAGES_FILE] = i18n.messages_file(carried, chapter.lang)
        wanted[glossary.FILE] = glossary.learner_page(chapter.lang).encode()  # the chapter's opening links it
    return dict(sorted(wanted.items()))


def build(chapters: list[Chapter], check: bool = False, force: bool = False) -> list[str]:
    """Generate (or, with check, compare) each chapter's nbgrader source folders, English and
    translated, where they are stale (grader.sources: missing, or built from other inputs than the
    repository holds now; every one with force or check); return the stale paths. A translation that
    lacks units is not written: it is reported stale, with the number of units `grader translate
    --check` lists."""
    stale = []
    digest = sources.inputs_digest()
    wanted_editions = sources.editions(chapters)
    for edition in wanted_editions if force or check else sources.stale(wanted_editions, digest):
        try:
            wanted = source_files(edition)
        except i18n.IncompleteTranslation as err:
            stale.append(f"{edition.source_dir} (not built:{len(err.problems)} translation unit(s) to do, "
                         f"`grader translate --check {edition.number} --lang {edition.lang}`)")
            continue
        stale += _sync(edition.source_dir, wanted, [], check)
        if not check:
            sources.record(edition, digest)
    return stale


def ensure(chapters: list[Chapter]) -> None:
    """Build the chapters' stale source folders before a command reads them, saying so in one line:
    they are generated, not committed (a fresh clone has none; a `git pull` can leave them old)."""
    if not sources.can_build():
        for edition in sources.editions(chapters):
            sources.require(edition)
        return
    try:
        with sources.building():  # a second grader waits here, then finds them fresh
            todo = sources.stale(sources.editions(chapters))
            if todo:
                print(f"grader: building {len(todo)} nbgrader source folder(s) under grader/ from chapters/ "
                      "(missing or out of date; `grader build` does this) ...", file=sys.stderr, flush=True)
                build(chapters)
    except PermissionError as err:
        raise ValueError(f"cannot write the nbgrader source folders ({err}): run `grader build` as the "
                         "repository's owner (deploy/jupyterhub/setup-class.sh does)") from None


def release(chapters: list[Chapter], write: bool = False, course_dir: str | Path | None = None,
            langs: tuple[str, ...] = ("en", *i18n.LANGUAGES)) -> list[str]:
    """Release each chapter with nbgrader, in each edition of `langs`; return the learner files that
    differ from course/ (course/<lang>/ for a translation): the notebook and everything in its
    folder (figures, generated modules). With `course_dir` (a class's course directory, for nbgrader
    release_assignment), the release stays there: one edition, since nbgrader knows one source
    notebook per assignment."""
    if course_dir is not None and len(langs) != 1:
        raise ValueError("a class's course directory takes one edition: choose it with --lang")
    differ = []
    for lang in langs:
        editions = [c.edition(lang) for c in chapters]
        if lang != "en":
            editions = [c for c in editions if c.source_dir.is_dir()]  # not built yet: `grader build` said so
        differ += _release(editions, write, course_dir)
    return differ


def _release(chapters: list[Chapter], write: bool, course_dir: str | Path | None) -> list[str]:
    differ = []
    with tempfile.TemporaryDirectory() if course_dir is None else contextlib.nullcontext(course_dir) as tmp:
        course = CourseDir(Path(tmp), chapters)
        if course_dir is None:  # a fresh folder: one nbgrader run for all (CourseDir.release_every)
            course.release_every(chapters)
        for chapter in chapters:
            released = folder_files(course.release(chapter) if course_dir is not None
                                    else course.root / "release" / chapter.assignment)
            ours = folder_files(chapter.course_dir)
            for rel in sorted(set(released) | set(ours)):
                if rel in ours and rel in released and filecmp.cmp(ours[rel], released[rel], shallow=False):
                    continue
                target = chapter.course_dir / rel
                differ.append(str(target))
                if write and rel in released:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(released[rel], target)
    return differ

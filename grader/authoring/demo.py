"""`grader demo`: the instructor path end to end on generated students."""
from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path

import nbformat

from grader.authoring import samples
from grader.chapters import Chapter
from grader.classroom.grading.batch import autograde_class

STUDENTS = {
    "ada": ("the reference solution", samples.reference),
    "ben": ("the untouched skeleton", samples.released),
    "cy": ("two realistic mistakes", samples.partly_wrong),
    "dee": ("games the grader", samples.adversarial),
}


def unique_cell_ids(nb):
    """A sample that copies a cell copies its id; nbformat would renumber it with a DuplicateCellId
    warning per notebook on writing, so the demo does it quietly first (grade ids are kept as made)."""
    seen = set()
    for cell in nb.cells:
        while cell.get("id") in seen:
            cell["id"] = uuid.uuid4().hex[:8]
        seen.add(cell.get("id"))
    return nb


def write_class(folder: Path, chapters: list[Chapter]) -> None:
    for student, (_, make) in STUDENTS.items():
        for chapter in chapters:
            path = folder / student / chapter.notebook_name
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(unique_cell_ids(make(chapter)), path)
    path = folder / "eve" / chapters[0].notebook_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(samples.corrupt(chapters[0]))


def run_demo(course_dir: str | None, chapters: list[Chapter]) -> int:
    """Grade the sample class into `course_dir` (default: a new folder under the system's temporary
    folder), which is kept: the feedback and Formgrader the summary points to can be opened afterwards."""
    root = Path(course_dir) if course_dir else Path(tempfile.mkdtemp(prefix="grader-demo-"))
    inbox = root / "inbox"
    write_class(inbox, chapters)
    print("Sample students:")
    for student, (what, _) in STUDENTS.items():
        print(f"  {student:<4} {what}")
    print(f"  eve  a corrupt notebook ({chapters[0].notebook_name})")
    print(f"Releasing {len(chapters)} chapter(s), autograding, generating feedback ...", flush=True)
    start = time.perf_counter()
    summary = autograde_class(inbox, root / "course", jobs=2, timeout=60, chapters=chapters)
    print(summary)
    print(f"demo finished in {time.perf_counter() - start:.0f} s; the class is kept in {root}:\n"
          f"  feedback pages: {root / 'course' / 'feedback'}/<student>/<chapter>/*.html (open in a browser)\n"
          f"  Formgrader:     cd {root / 'course'} && jupyter lab   (then Nbgrader > Formgrader)\n"
          f"  remove it with: rm -r {root}")
    return 0

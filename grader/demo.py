"""`grader demo`: the instructor path end to end on generated students."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import nbformat

from grader import samples
from grader.chapters import Chapter
from grader.grading import autograde_class

STUDENTS = {
    "ada": ("the reference solution", samples.reference),
    "ben": ("the untouched skeleton", samples.released),
    "cy": ("two realistic mistakes", samples.partly_wrong),
    "dee": ("games the grader", samples.adversarial),
}


def write_class(folder: Path, chapters: list[Chapter]) -> None:
    for student, (_, make) in STUDENTS.items():
        for chapter in chapters:
            path = folder / student / chapter.notebook_name
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(make(chapter), path)
    path = folder / "eve" / chapters[0].notebook_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(samples.corrupt(chapters[0]))


def run_demo(course_dir: str | None, chapters: list[Chapter]) -> int:
    with tempfile.TemporaryDirectory(prefix="grader-demo-") as tmp:
        root = Path(course_dir) if course_dir else Path(tmp)
        inbox = root / "inbox"
        write_class(inbox, chapters)
        print("Sample students:")
        for student, (what, _) in STUDENTS.items():
            print(f"  {student:<4} {what}")
        print(f"  eve  a corrupt notebook ({chapters[0].notebook_name})")
        print(f"Releasing {len(chapters)} chapter(s), autograding, generating feedback ...", flush=True)
        start = time.perf_counter()
        print(autograde_class(inbox, root / "course", jobs=2, timeout=60, chapters=chapters))
        print(f"demo finished in {time.perf_counter() - start:.0f} s"
              + ("" if course_dir else " (pass --course-dir to keep the course directory)"))
    return 0

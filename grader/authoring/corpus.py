"""Data files the course writes into a chapter folder itself, so a released folder stands alone.

Chapter 08 trains a character-level GPT and a BPE tokenizer on the course's own narrative: the
markdown of chapters 01-06, collected by `grader build` into `course/08_gpt_generation/course_text.txt`
(and checked for freshness with the rest of the build).
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

from grader.chapters import REPO, Chapter, is_answer_cell

CORPUS_CHAPTERS = ("01", "02", "03", "04", "05", "06")
IMAGE_LINE = re.compile(r"^!\[[^\]]*\]\([^)]*\)\s*$", re.MULTILINE)


def course_text(course_root: Path = REPO / "course") -> str:
    """The markdown cells of chapters 01-06, in order, without image links or written-answer cells."""
    parts = []
    for number in CORPUS_CHAPTERS:
        (notebook,) = sorted(course_root.glob(f"{number}_*/*.ipynb"))
        nb = nbformat.read(notebook, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown" and not is_answer_cell(cell):
                text = IMAGE_LINE.sub("", cell.source)
                parts.append(re.sub(r"\n{3,}", "\n\n", text).strip())
    return "\n\n".join(p for p in parts if p) + "\n"


def generated_files(chapter: Chapter) -> dict[Path, str]:
    """path -> text of the data files `grader build` writes into this chapter's course folder."""
    if chapter.name == "gpt_generation":
        return {chapter.course_dir / "course_text.txt": course_text()}
    return {}

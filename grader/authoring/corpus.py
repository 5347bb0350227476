"""Data files the course writes into a chapter folder itself, so a released folder stands alone.

Chapter 08 trains a character-level GPT and a BPE tokenizer on the course's own narrative: the
markdown of chapters 01-06 as their text sources say it, collected by `grader build` into chapter 08's
source folder as `course_text.txt` (and released with it).
"""
from __future__ import annotations

import re

from grader.authoring.text import read_text_source
from grader.chapters import CHAPTERS, Chapter, is_answer_cell

CORPUS_CHAPTERS = ("01", "02", "03", "04", "05", "06")
IMAGE_LINE = re.compile(r"^!\[[^\]]*\]\([^)]*\)\s*$", re.MULTILINE)


def course_text() -> str:
    """The markdown cells of chapters 01-06, in order, without image links or written-answer cells."""
    parts = []
    for chapter in (c for c in CHAPTERS if c.number in CORPUS_CHAPTERS):
        for cell in read_text_source(chapter).cells:
            if cell.cell_type == "markdown" and not is_answer_cell(cell):
                text = IMAGE_LINE.sub("", cell.source)
                parts.append(re.sub(r"\n{3,}", "\n\n", text).strip())
    return "\n\n".join(p for p in parts if p) + "\n"


def generated_files(chapter: Chapter) -> dict[str, str]:
    """relative path -> text of the data files `grader build` writes into this chapter's source folder."""
    if chapter.name == "gpt_generation":
        return {"course_text.txt": course_text()}
    return {}

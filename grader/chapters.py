"""The chapters the course has built so far, and where each one's pieces live."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Chapter:
    number: str  # "01"
    name: str  # "attention_intuition"

    @property
    def assignment(self) -> str:
        return f"{self.number}_{self.name}"

    @property
    def notebook_name(self) -> str:
        return f"{self.name}.ipynb"

    @property
    def course_dir(self) -> Path:
        return REPO / "course" / self.assignment

    @property
    def course_notebook(self) -> Path:
        return self.course_dir / self.notebook_name

    @property
    def source_dir(self) -> Path:
        return REPO / "grader" / "source" / self.assignment

    @property
    def source_notebook(self) -> Path:
        return self.source_dir / self.notebook_name

    @property
    def solutions_file(self) -> Path:
        return REPO / "solutions" / f"{self.name}.py"


CHAPTERS = [
    Chapter("01", "attention_intuition"),
    Chapter("02", "self_attention"),
    Chapter("03", "positional_encoding"),
    Chapter("04", "multi_head_attention"),
    Chapter("05", "add_and_norm"),
    Chapter("06", "decoder_masking"),
    Chapter("07", "bert_pretraining"),
    Chapter("08", "gpt_generation"),
    Chapter("09", "llama_modern"),
]


def find_chapter(key: str) -> Chapter:
    """Look a chapter up by number ("1", "01"), name, assignment or notebook file name."""
    key = Path(key).name.removesuffix(".ipynb")
    for chapter in CHAPTERS:
        if key in (chapter.number, chapter.number.lstrip("0"), chapter.name, chapter.assignment):
            return chapter
    known = ", ".join(c.assignment for c in CHAPTERS)
    raise ValueError(f"unknown chapter {key!r}; known chapters: {known}")

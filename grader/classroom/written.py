"""Written answers: markdown cells a person grades, with a model answer and a rubric.

A chapter's questions stand in its notebook (a question cell, then a markdown answer cell that
nbgrader grades by hand: `solution` and `grade` with `points`, grade id `written_<name>`). The model
answer and the rubric live only in `grader/rubrics/<name>.md`: `grader build` puts the model answer
into the source notebook's answer cell (nbgrader's release replaces it with "YOUR ANSWER HERE"),
`AddRubrics` puts the rubric under each answer in the autograded notebook, which Formgrader shows the
grader, and `DropRubrics` takes it out again before nbgrader renders a learner's feedback.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.boundary.score import shown
from grader.chapters import CHAPTERS, is_answer_cell
from grader.classroom.phrasebook import edition_of, phrasebook

RUBRICS = Path(__file__).resolve().parents[1] / "rubrics"
PREFIX = "written_"
MARK = "course_rubric"  # cell metadata key of a rubric cell the grader added
BANNER = "Rubric for the grader"
IMITATION = shown("[a learner's text imitating the grader's rubric]")
HEADING = re.compile(r"^## (written_\w+) \((\d+(?:\.\d+)?) points?\)\s*$", re.M)
ANSWER, RUBRIC = "**Model answer.**", "**Rubric.**"


@dataclass(frozen=True)
class Written:
    grade_id: str
    points: float
    answer: str
    rubric: str


def written(chapter_name: str) -> dict[str, Written]:
    """grade_id -> Written for a chapter, in the order of `grader/rubrics/<chapter_name>.md`."""
    path = RUBRICS / f"{chapter_name}.md"
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    parts = HEADING.split(text)[1:]  # [grade_id, points, body, grade_id, points, body, ...]
    items = {}
    for grade_id, points, body in zip(parts[::3], parts[1::3], parts[2::3]):
        if ANSWER not in body or RUBRIC not in body or body.index(ANSWER) > body.index(RUBRIC):
            raise ValueError(f"{path.name}: {grade_id} needs '{ANSWER}' and then '{RUBRIC}'")
        answer, rubric = body.split(ANSWER, 1)[1].split(RUBRIC, 1)
        if grade_id in items:
            raise ValueError(f"{path.name}: {grade_id} appears twice")
        items[grade_id] = Written(grade_id, float(points), answer.strip(), rubric.strip())
    return items


def rubric_cell(item: Written) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(
        f"> **{BANNER}** ({item.grade_id}, {item.points:g} point{'' if item.points == 1 else 's'}; "
        f"added while grading, never in a learner's feedback)\n>\n"
        + "\n".join(f"> {line}" if line else ">" for line in
                    (f"{ANSWER} {item.answer}\n\n{RUBRIC}\n\n{item.rubric}").splitlines()))
    cell.metadata[MARK] = item.grade_id
    return cell


def _chapter_name(assignment: str) -> str | None:
    return next((c.name for c in CHAPTERS if c.assignment == assignment), None)


class AddRubrics(NbGraderPreprocessor):
    """Autograde: the rubric under each written answer, for Formgrader. A cell the submission brought
    that claims to be a rubric (the mark, or the banner's words) is kept, but loses that claim."""

    def preprocess(self, nb, resources):
        imitation = phrasebook(edition_of(nb)).say(IMITATION)
        for cell in nb.cells:
            if cell.get("metadata", {}).pop(MARK, None) is not None or BANNER in cell.get("source", ""):
                cell.source = cell.get("source", "").replace(BANNER, imitation)
        name = _chapter_name(resources.get("nbgrader", {}).get("assignment", ""))
        items = written(name) if name else {}
        cells = []
        for cell in nb.cells:
            cells.append(cell)
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if is_answer_cell(cell) and grade_id in items:
                cells.append(rubric_cell(items[grade_id]))
        nb.cells = cells
        return nb, resources


class DropRubrics(NbGraderPreprocessor):
    """Feedback: the notebook without the rubric cells AddRubrics put in."""

    def preprocess(self, nb, resources):
        nb.cells = [c for c in nb.cells if MARK not in c.get("metadata", {})]
        return nb, resources

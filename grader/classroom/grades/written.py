"""Written answers: markdown cells a person grades, with a model answer and a rubric.

A chapter's questions stand in its notebook (a question cell, then a markdown answer cell that
nbgrader grades by hand: `solution` and `grade` with `points`, grade id `written_<name>`). The model
answer and the rubric live only in `grader/rubrics/<name>.md`: `grader build` puts the model answer
into the source notebook's answer cell (nbgrader's release replaces it with "YOUR ANSWER HERE"),
`AddRubrics` puts the rubric under each answer in the autograded notebook, which Formgrader shows the
grader, and `DropRubrics` takes it out again before nbgrader renders a learner's feedback.
"""
from __future__ import annotations

import functools
import html
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.boundary.score import shown
from grader.chapters import CHAPTERS, is_answer_cell, is_test_cell
from grader.classroom.phrasebook import edition_of, phrasebook

RUBRICS = Path(__file__).resolve().parents[2] / "rubrics"
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


# The rubric's box: a style attribute, which no learner cell keeps (grader.classroom.intake.sanitise), so no
# learner content can draw this box, nor hide it.
BOX = ("border: 4px double #8a4b00; background: #fff6e0; color: #2b1700; padding: .4em 1em; margin: .6em 0; "
       "display: block; visibility: visible; opacity: 1; position: static")


def rubric_cell(item: Written) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(
        f'<div style="{BOX}" data-course-rubric="{item.grade_id}">\n\n'
        f"**\N{LOCK} {BANNER}** ({item.grade_id}, {item.points:g} point{'' if item.points == 1 else 's'}; "
        f"added while grading, never in a learner's feedback)\n\n"
        f"{ANSWER} {item.answer}\n\n{RUBRIC}\n\n{item.rubric}\n\n</div>")
    cell.metadata[MARK] = item.grade_id
    return cell


def is_rubric_box(cell) -> bool:
    """A rubric cell AddRubrics drew (it takes the mark off every cell a submission brought first)."""
    return MARK in cell.get("metadata", {}) and cell.get("source", "").startswith(f'<div style="{BOX}" ')


# What a page shows, reduced to the letters a reader takes it for: compatibility forms folded (NFKC), look-alike
# letters of other scripts and digits mapped to the Latin letter they imitate, everything else dropped.
LOOK_ALIKE = str.maketrans({**dict.fromkeys("аɑα@", "a"), **dict.fromkeys("еёε3", "e"), **dict.fromkeys("оοσ0", "o"),
                            **dict.fromkeys("рρ", "p"), **dict.fromkeys("сϲ", "c"), **dict.fromkeys("уү", "y"),
                            **dict.fromkeys("хχ", "x"), **dict.fromkeys("іıɩι1!|", "i"), **dict.fromkeys("ј", "j"),
                            **dict.fromkeys("ԁ", "d"), **dict.fromkeys("ɡ", "g"), **dict.fromkeys("һ", "h"),
                            **dict.fromkeys("ʀг", "r"), **dict.fromkeys("ƅЬъ", "b"), **dict.fromkeys("υսμ", "u"),
                            **dict.fromkeys("ⅼӏ", "l"), **dict.fromkeys("ѕ5$", "s"), **dict.fromkeys("т7", "t"),
                            **dict.fromkeys("пη", "n"), **dict.fromkeys("м", "m")})


def _one_edit(word: str) -> re.Pattern:
    """`word` or any text one letter away from it (changed, dropped or added)."""
    forms = {word} | {word[:i] + "." + word[i + 1:] for i in range(len(word))}
    forms |= {word[:i] + word[i + 1:] for i in range(len(word))}
    forms |= {word[:i] + "." + word[i:] for i in range(len(word) + 1)}
    return re.compile("|".join(sorted(forms)))


CLAIMS = [_one_edit("rubric"), _one_edit("modelanswer")]


def letters(text: str) -> str:
    return re.sub(r"[^a-z]", "", unicodedata.normalize("NFKC", text).casefold().translate(LOOK_ALIKE))


def looks_like_rubric(shown_text: str) -> bool:
    """Whether text a page shows could pass for the rubric's (one letter changed, look-alikes, spacing)."""
    skeleton = letters(shown_text)
    return any(claim.search(skeleton) for claim in CLAIMS)


@functools.lru_cache(maxsize=4096)
def _rendered(markdown: str) -> str:
    """Markdown as HTML; cached, since a class's notebooks share the chapter's own cells."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return markdown2html_mistune(markdown)


def _shown_text(cell) -> str:
    """The text a page draws for a learner's cell: its markdown rendered, its code and its outputs' texts."""
    texts = [_rendered(cell.get("source", "")) if cell.get("cell_type") == "markdown" else cell.get("source", "")]
    for output in cell.get("outputs", []):
        texts.append(output.get("text", "") if isinstance(output.get("text"), str) else "")
        texts += [v if isinstance(v, str) else "" for v in (output.get("data") or {}).values()]
        texts.append(str(output.get("evalue", "")))
    return html.unescape(re.sub(r"<[^>]*>", "", "\n".join(texts)))


def _disclaim(cell, imitation: str) -> None:
    """A learner's cell that passes for a rubric keeps its text, under a line that says whose it is."""
    if cell.get("cell_type") == "markdown":
        cell.source = f"*{imitation}*\n\n" + cell.source.replace(BANNER, imitation)
    elif cell.get("cell_type") == "code":
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=imitation + "\n"),
                        *cell.get("outputs", [])]


def _chapter_name(assignment: str) -> str | None:
    return next((c.name for c in CHAPTERS if c.assignment == assignment), None)


class AddRubrics(NbGraderPreprocessor):
    """Autograde: the rubric under each written answer, for Formgrader, in a box no learner cell can draw
    (after grader.classroom.intake.sanitise). A cell the submission brought that claims to be a rubric (the mark)
    or whose shown text could pass for one is kept, but loses that claim and says so."""

    def preprocess(self, nb, resources):
        imitation = phrasebook(edition_of(nb)).say(IMITATION)
        for cell in nb.cells:
            marked = cell.get("metadata", {}).pop(MARK, None) is not None
            if marked or (not is_test_cell(cell) and looks_like_rubric(_shown_text(cell))):  # test cells: the grader's
                _disclaim(cell, imitation)
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


def left_blank(source: str) -> bool:
    """Whether a written answer is still the text the release put there, in either edition's language: nbgrader
    scores only its own class's stub 0 (a checksum), and a Chinese notebook graded with an English release
    (or the other way round) would otherwise wait for a hand grade that has nothing to grade."""
    from grader.coursedir import STUBS  # lazy: coursedir imports the class's modules

    return source.strip() in {text.strip() for _, text in STUBS.values()}


class ScoreBlankAnswers(NbGraderPreprocessor):
    """Autograde, after SaveAutoGrades: an answer left as released, in any edition, scores 0 (unanswered),
    as nbgrader scores its own stub, instead of pending."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        meta = resources["nbgrader"]
        blank = [c.metadata.nbgrader["grade_id"] for c in nb.cells
                 if is_answer_cell(c) and c.metadata.nbgrader.get("grade") and left_blank(c.source)]
        if blank:
            with Gradebook(meta["db_url"]) as gb:
                for grade_id in blank:
                    grade = gb.find_grade(grade_id, meta["notebook"], meta["assignment"], meta["student"])
                    grade.auto_score, grade.needs_manual_grade = 0.0, False
                gb.db.commit()
        return nb, resources


class DropRubrics(NbGraderPreprocessor):
    """Feedback: the notebook without the rubric cells AddRubrics put in."""

    def preprocess(self, nb, resources):
        nb.cells = [c for c in nb.cells if MARK not in c.get("metadata", {})]
        return nb, resources

"""Recording with nbgrader: its autograde with the judge's verdict in place of execution, the
gradebook's zero for a grading that failed, and feedback HTML and the CSV export (grader.classroom.grading.batch
calls these in the trusted process, one submission at a time; a batch of a class hands nbgrader's autograde and
half the feedback to its helper process, grader.classroom.grading.nbgrader_helper).

`record` hands nbgrader the verdict through a file: it writes the submission's verdict into the course
directory's `.grader-verdicts/`, which nbgrader's configuration names to `FillVerdict`, the preprocessor
that stands in for nbgrader's Execute step and writes the verdict into the cells' outputs (the learner's
outputs and figures, each test cell's report and partial credit), so nbgrader's gradebook, feedback and
export record it. The file goes once nbgrader is done.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
import sys
import warnings
from dataclasses import asdict
from html import escape as html_escape
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from grader.boundary.score import NO_CREDIT, Result, shown
from grader.boundary.unit import Verdict, verdict_from_dict
from grader.chapters import CHAPTERS, Chapter, exercise_of, is_test_cell
from grader.classroom.grades.export import write_course_csv
from grader.classroom.grades.handgrades import FOLDER, BindHandGrades
from grader.classroom.grades.total import SettleTotal, late_policy
from grader.classroom.grades.written import AddRubrics, DropRubrics, ScoreBlankAnswers
from grader.classroom.grading.nbgrader_costs import OneCommit, schema_checked_once, shared_engines, tables_asked_once
from grader.classroom.intake.sanitise import CommentsAsText, SanitiseLast, SanitiseNotebook
from grader.classroom.phrasebook import Phrasebook, edition_of, hidden_test_line, phrasebook
from grader.classroom.submissions import BadSubmission, Submission
from grader.coursedir import COURSE_ID, CourseDir

IMG_WITHOUT_ALT = re.compile(r"<img(?![^>]*\balt=)")
FOCUSABLE = re.compile(r'(<div class="[^"]*\b(?:jp-Cell-inputWrapper|jp-OutputArea-output)\b[^"]*")'
                       r'(?![^>]*\btabindex=)')
# nbgrader's list of graded cells names each "Test cell": name the exercise (grade id test_<exercise>)
TOC_ENTRY = re.compile(r'(<a href="#test_([^"]+)">)Test cell</a>')
# nbgrader's feedback template around the cells: each of its words, in the markup around it (never a
# learner's text), for a translated edition's page.
CHROME = [(re.compile(before + re.escape(word) + after), word) for before, word, after in (
    (r"(<h4>[^<]*\(|</a> \(|<span class=\"pull-right\">\s*)", shown("Score:"), r"( -?[\d.])"),
    (r"(<li class=\"late-penalty\">)", shown("Late submission penalty"), r"( \()"),
    (r"(<li class=\"late-penalty\">[^<(]*\()", shown("Score:"), r"( -)"),
    (r"(<a href=\"#top\">)", shown("(Top)"), r"(</a>)"),
    (r"(<span class=\"nbgrader-label\">)", shown("Student's answer"), r"(</span>)"),
    (r"(<span class=\"nbgrader-label\">)", shown("Student's task"), r"(</span>)"),
    (r"(<span class=\"nbgrader-label\">)", shown("Grade cell:"), r"( <code>)"),
    (r"(<span class=\"nbgrader-label\">)", shown("Task:"), r"( <code>)"),
    (r"(<b>)", shown("Comments:"), r"(</b>)"),
    (r"(<li><a href=\"#[^\"]*\">)", shown("Written response"), r"(</a>)"),
    (r"(<li><a href=\"#[^\"]*\">)", shown("Coding free-response"), r"(</a>)"),
    (r"(<li><a href=\"#[^\"]*\">)", shown("Task"), r"(</a>)"),
    (r"(<li><a href=\"#comment-[^\"]*\">)", shown("Comment"), r"(</a>)"),
)]


def _chrome(page: str, book: Phrasebook, lang: str) -> str:
    """The feedback page's own words in the learner's language."""
    for pattern, word in CHROME:
        page = pattern.sub(lambda found, word=word: found[1] + book.say(word) + found[2], page)
    return page.replace("<html>", f'<html lang="{lang}">', 1)


# A check's report line (FAIL and its reason) wraps in the page instead of scrolling sideways.
FEEDBACK_CSS = "<style>div.output_subarea pre { white-space: pre-wrap; overflow-wrap: break-word; }</style>\n</head>"
# Wherever the file is opened (the service adds its own headers; a learner's disk does not), it runs no script
# and loads nothing: its maths are MathML, its figures data. First in <head>, so it covers every script after it.
FEEDBACK_CSP = ("<head>\n<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'\">")


# TeX as nbconvert leaves it in the page for MathJax: $$display$$ and $inline$ (not a lone price sign)
MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$\w])\$([^$\n]+?)\$(?![\w$])", re.S)
NOT_PROSE = re.compile(r"(<(code|pre|script|style)\b.*?</\2>|<[^>]*>)", re.S)  # code, and any tag's attributes


MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)


@functools.lru_cache(maxsize=4096)
def _converted(tex: str, display: str) -> str | None:
    """One formula as MathML, None where latex2mathml cannot; each once per process: a class's pages
    repeat the chapter's formulas (about 2 000 per 18 pages, a tenth of a page's time)."""
    from latex2mathml.converter import convert

    try:
        return convert(tex, display=display)
    except Exception:  # noqa: BLE001 - latex2mathml raises many kinds; the TeX stays readable
        return None


def _mathml(page: str) -> str:
    """The maths as MathML, which browsers draw themselves: nbconvert's page loads MathJax from a CDN,
    so offline a learner saw raw `$$...$$`. latex2mathml converts every formula of the course (about
    20 KB of markup per chapter, no script); one it cannot convert stays TeX."""
    import html

    try:
        import latex2mathml.converter  # noqa: F401
    except ImportError:  # an environment installed before the dependency: MathJax from the CDN, as before
        return page

    def formula(found: re.Match) -> str:
        converted = _converted(html.unescape(found[1] or found[2]), "block" if found[1] else "inline")
        return found[0] if converted is None else converted

    parts = NOT_PROSE.split(page)  # (prose, code or tag, its name) repeated: maths only in prose
    return "".join(MATH.sub(formula, part) if i % 3 == 0 else part for i, part in enumerate(parts) if i % 3 != 2)


def _learner_view(nb):
    """The graded notebook as its feedback shows it: a test cell's partial credit (the number nbgrader
    reads from its execute_result) is in the score heading, not an `Out[ ]:`; a reason for no credit
    that every test cell repeats (an unreadable notebook) is said once, the later cells point up to it."""
    import copy

    nb, seen = copy.deepcopy(nb), set()
    book = phrasebook(edition_of(nb))
    for cell in nb.cells:
        if cell.get("cell_type") == "code" and is_test_cell(cell):
            cell.outputs = [out for out in cell.get("outputs", []) if _shown(out, seen, book)]
            cell.source = hidden_test_line(cell.source, edition_of(nb))  # restored from the class's source
    return nb


def _shown(output, seen: set, book: Phrasebook) -> bool:
    """Whether a test cell's output stays in the feedback; a no-credit line said before is shortened."""
    kind = output.get("output_type")
    if kind == "execute_result" or (kind == "error" and output.get("evalue") in seen):
        return False
    if kind == "stream" and isinstance(output.get("text"), str):
        prefix = book.say(NO_CREDIT, reason="\0").split("\0")[0]
        same = book.say(NO_CREDIT, reason=SAME_REASON) + "\n"
        lines = []
        for line in output.text.splitlines(keepends=True):
            reason = line.removeprefix(prefix).rstrip("\n") if line.startswith(prefix) else None
            lines.append(same if reason and reason in seen else line)
            seen.add(reason)
        output.text = "".join(lines)
    return True


SAME_REASON = shown("the same reason as above")


def stamp(state: str | None) -> str:
    """The gradebook's state the page shows (grader.classroom.grades.total.states), near its top: feedback whose stamp
    is not the gradebook's state is regenerated (grader.classroom.grading.publish)."""
    return f'\n<meta name="grader-gradebook" content="{state}">' if state and state.isalnum() else ""


def feedback_exporter():
    """nbconvert's HTML exporter for nbgrader's feedback, less its last pass: re-parsing the finished
    page with BeautifulSoup's pure-Python parser (about three quarters of the time per feedback file)
    only to give images without alt text a default one and make cells focusable, done here on the text."""
    from jinja2 import pass_context
    from nbconvert.exporters import HTMLExporter, TemplateExporter
    from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
    from traitlets import Bool

    class FeedbackHTMLExporter(HTMLExporter):
        embed_images = Bool(True)  # a learner gets the feedback file alone: the chapter's figures go inside it

        def _create_environment(self):
            environment = super()._create_environment()
            environment.bytecode_cache = _template_code()  # each chapter's exporter compiled them again
            return environment

        @pass_context
        def markdown2html(self, context, source):
            """nbconvert's, each (text, figures' folder) rendered once per exporter (one chapter's pages: the
            class's markdown cells are the chapter's); a cell with attachments each time."""
            cell = context.get("cell", {})
            if cell.get("attachments"):
                return HTMLExporter.markdown2html(self, context, source)
            key = (source, context.get("resources", {}).get("metadata", {}).get("path", ""))
            rendered = self.__dict__.setdefault("_markdown", {})
            if key not in rendered:
                rendered[key] = HTMLExporter.markdown2html(self, context, source)
            return rendered[key]

        def from_notebook_node(self, nb, resources=None, **kw):
            langinfo = nb.metadata.get("language_info", {})
            lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
            self.register_filter("highlight_code", self.filters.get("highlight_code", functools.partial(
                _highlighted, lexer or "ipython3")))
            nb = _learner_view(nb)
            resources = self._init_resources(resources)
            # autograded/<student>/<assignment>
            graded = Path(resources.get("metadata", {}).get("path") or ".").resolve()
            if len(graded.parents) > 2 and (graded.parents[2] / "release" / graded.name).is_dir():
                resources["metadata"]["path"] = str(figures_of(graded.parents[2] / "release" / graded.name,
                                                               edition_of(nb)))
            self.register_filter("filter_data_type", WidgetsDataTypeFilter(
                notebook_metadata=self._nb_metadata, parent=self, resources=resources))
            html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
            html = _pending(html, resources.get("course_total"), phrasebook(edition_of(nb)))
            if edition_of(nb) != "en":
                html = _chrome(html, phrasebook(edition_of(nb)), edition_of(nb))
            html = IMG_WITHOUT_ALT.sub('<img alt="No description has been provided for this image"', html)
            html = TOC_ENTRY.sub(r"\1\2</a>", html).replace("</head>", FEEDBACK_CSS, 1)
            html = html.replace("<head>", FEEDBACK_CSP + stamp(resources.get("gradebook_state")), 1)
            head, body = html.split("<body", 1)
            maths = _mathml("<body" + body)
            html = (MATHJAX.sub("", head) if maths != "<body" + body else head) + maths  # MathML: no CDN script
            return FOCUSABLE.sub(r'\1 tabindex="0"', html), resources

    return FeedbackHTMLExporter


@functools.lru_cache(maxsize=8192)
def _highlighted_once(lexer: str, source: str, language: str | None, metadata: str) -> str:
    from nbconvert.filters.highlight import Highlight2HTML

    return Highlight2HTML(pygments_lexer=lexer)(source, language, json.loads(metadata) or None)


def _highlighted(lexer: str, source: str, language: str | None = None, metadata=None) -> str:
    """nbconvert's Highlight2HTML of a code cell, each (lexer, source, language, metadata) once per process:
    a class's pages repeat the chapter's code cells (pygments took a quarter of a page's time)."""
    return _highlighted_once(lexer, source, language, json.dumps(metadata or {}, sort_keys=True, default=str))


@functools.cache
def _template_code():
    """The feedback templates' compiled code, kept in this process (Jinja checks each one's source against it):
    every generate_feedback makes a new exporter, which compiled the same templates again (a fifth of a chapter's
    feedback time)."""
    from jinja2 import BytecodeCache

    class Compiled(BytecodeCache):
        def __init__(self):
            self.code: dict[str, bytes] = {}

        def load_bytecode(self, bucket):
            if bucket.key in self.code:
                bucket.bytecode_from_string(self.code[bucket.key])

        def dump_bytecode(self, bucket):
            self.code[bucket.key] = bucket.bytecode_to_string()

    return Compiled()


def figures_of(release: Path, lang: str) -> Path:
    """Where a feedback page's figures come from: the release, or for a translated notebook its own
    edition's folder (course/<lang>/<assignment>/, which CI keeps equal to that edition's release)."""
    chapter = next((c for c in CHAPTERS if c.assignment == release.name), None)
    if lang != "en" and chapter is not None and chapter.edition(lang).course_dir.is_dir():
        return chapter.edition(lang).course_dir
    return release


PENDING = shown("pending: not yet graded by hand")
PENDING_TOTAL = shown("{count} written answer(s) pending: not yet graded by hand")


def _pending(page: str, total, book: Phrasebook) -> str:
    """A written answer nobody graded yet says so, where nbgrader's page says "0.0 / 2.0"; the total
    (grader.classroom.grades.total) says how many are pending."""
    if total is None or not total.pending:
        return page
    for grade_id in total.pending:
        name = re.escape(grade_id)
        say = html_escape(book.say(PENDING))
        page = re.sub(rf'(<a href="#{name}">[^<]*</a> \()Score: [\d.]+ / ([\d.]+)\)',
                      lambda m: f"{m[1]}{say} · {m[2]})", page)
        page = re.sub(rf'(<a name="{name}"></a><div class="panel-heading">.*?<span class="pull-right">\s*)'
                      rf"Score: [\d.]+ / ([\d.]+)", lambda m: f"{m[1]}{say} · {m[2]}", page, count=1,
                      flags=re.S)
    note = html_escape(book.say(PENDING_TOTAL, count=len(total.pending)))
    return re.sub(r"(<h4>[^<]*\(Score: [^<)]*)\)</h4>", lambda m: f"{m[1]} · {note})</h4>", page, count=1)


# ---------------------------------------------------------------- the verdict as the notebook's outputs

OUTPUT_TYPES = {"stream", "display_data", "execute_result", "error"}
VERDICTS = ".grader-verdicts"  # a folder of the course directory: the verdict nbgrader is recording


def _clean_outputs(outputs) -> list:
    """The outputs that are valid nbformat outputs; a malformed one is dropped, never trusted."""
    nodes = []
    for out in outputs if isinstance(outputs, list) else []:
        if not isinstance(out, dict) or out.get("output_type") not in OUTPUT_TYPES:
            continue
        if out["output_type"] == "execute_result":
            out = {**out, "execution_count": None, "metadata": {}}
        try:
            nodes.append(nbformat.from_dict(out))
        except Exception:  # noqa: BLE001
            continue
    if not nodes or _valid(nodes):  # all at once: the schema checks each output alone, so this is each one's verdict
        return nodes
    return [node for node in nodes if _valid([node])]


def _valid(outputs: list) -> bool:
    """Whether nbformat's schema takes these outputs, in a notebook of one code cell (built as plain data: nbformat's
    constructors would validate the cell and the notebook too, before this validates them all)."""
    cell = {"cell_type": "code", "id": "outputs", "metadata": {}, "source": "", "execution_count": None,
            "outputs": outputs}
    try:
        nbformat.validator.validate({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]})
    except Exception:  # noqa: BLE001 - whatever nbformat says is wrong
        return False
    return True


def _output(output_type: str, **fields) -> nbformat.NotebookNode:
    """An output the grader writes itself (a report, a note): its fields are nbformat's, so it is not validated
    one by one (nbformat's new_output would); the notebook is, as nbconvert writes it."""
    if output_type == "execute_result":
        fields = {"metadata": {}, "execution_count": None, **fields}
    return nbformat.from_dict({"output_type": output_type, **fields})


NOT_RERUN = shown("[not re-run while grading: no score depends on this cell; {what}]\n")


def saved_outputs(saved, book: Phrasebook) -> list:
    """A cell the grading run left out (grader.classroom.grading.skipping): the outputs the learner saved, and a
    note."""
    outputs = _clean_outputs(saved)  # bounded when staged (grader.classroom.grading.batch.bound_saved_outputs)
    what = (shown("the outputs below are from your own run") if outputs
            else shown("your notebook saved no outputs for it"))
    return [_output("stream", name="stdout", text=book.say(NOT_RERUN, what=what)), *outputs]


def checks_of(chapter: Chapter) -> dict[str, list[tuple[str, float]]]:
    """Each exercise's checks, (description, weight) in order: what a test cell's report lists. The verdict
    file carries them (`write_verdict`), so nbgrader's process needs no spec module (and no torch)."""
    from grader.boundary.specs import exercises  # lazy: the specs import torch, which the nbgrader helper never needs

    return {name: list(spec.weights().items()) for name, spec in exercises(chapter.name).items()}


def test_outputs(checks: list[tuple[str, float]] | None, exercise: str, points: float, message: dict | None,
                 reason: str | None, book: Phrasebook | None = None) -> list:
    """A test cell's outputs: the report (in `book`'s language), then the partial credit (nbgrader reads
    it) or an error. `checks`: the exercise's, from `checks_of`; None when the chapter has no such exercise."""
    book = book or phrasebook("en")
    result = Result(exercise, points)
    if checks is None:
        result.zero_reason = shown(f"no hidden checks named {exercise!r}")
    elif message is None:
        result.zero_reason = reason or shown("this cell was not run")
    else:
        result.weights = dict(checks)
        known = [description for description, _ in checks]
        seen = set()
        for description in message.get("passed") or []:
            if description in known and description not in seen:
                seen.add(description)
                result.passed.append(description)
        for item in message.get("failed") or []:
            if isinstance(item, list) and len(item) == 2 and item[0] in known and item[0] not in seen:
                seen.add(item[0])
                result.failed.append((item[0], str(item[1])[:500]))
        result.failed += [(d, shown("was not run")) for d in known if d not in seen]
        zero = message.get("zero_reason")
        result.zero_reason = str(zero)[:500] if zero else None
        said = message.get("diagnosis")  # the notebook's own check, on public inputs (grader.boundary.diagnosis)
        result.diagnosis = book.mistake(said[:500]) if isinstance(said, str) and said.strip() else None
    outputs = [_output("stream", name="stdout", text=result.report(book.say) + "\n")]
    if result.score > 0:
        outputs.append(_output("execute_result", data={"text/plain": repr(result.score)}))
    else:
        why = book.text(result.zero_reason or shown(f"{exercise}: no check passed"))
        outputs.append(_output("error", ename="NoCredit", evalue=why, traceback=[f"NoCredit: {why}"]))
    return outputs


def fill(nb: nbformat.NotebookNode, chapter: Chapter, cells: list[dict], verdict: Verdict,
         checks: dict[str, list[tuple[str, float]]]) -> None:
    """Write the verdict into the notebook nbgrader sanitised (same cells, in the same order, as staged);
    `checks`: the chapter's (`checks_of`)."""
    aligned = len(nb.cells) == len(cells)
    reason = verdict.error
    if not aligned:
        reason = shown("the notebook's cells changed between staging and grading")
    book = phrasebook(edition_of(nb), chapter.assignment)
    said = None  # what Python said when a learner's cell failed, since the last test cell
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        cell.execution_count = None
        exercise = exercise_of(cell)
        message = verdict.cells.get(index) if aligned else None
        if exercise is not None:
            cell.outputs = test_outputs(checks.get(exercise), exercise, float(cell.metadata.nbgrader.get("points", 0)),
                                        _python_said(message, said), reason, book)
            said = None
        elif message is None and aligned and "saved" in cells[index]:
            cell.outputs = saved_outputs(cells[index]["saved"], book)
        else:
            cell.outputs = _clean_outputs(message.get("outputs")) if message else []
            failed = [o for o in cell.outputs if o.get("output_type") == "error"]
            said = f"{failed[-1].get('ename')}: {ANSI.sub('', str(failed[-1].get('evalue')))}"[:300] if failed else said


ANSI = re.compile(r"\x1b\[[0-9;]*m")
PYTHON_SAID = shown("{reason}: your cell above raised {error}")


def _python_said(message: dict | None, said: str | None) -> dict | None:
    """An exercise its cell never defined (an IndentationError, a NameError in it) says what Python said,
    not only that the name is missing."""
    zero = (message or {}).get("zero_reason")
    if not said or not isinstance(zero, str) or not zero.endswith("is not defined"):
        return message
    return {**message, "zero_reason": PYTHON_SAID.format(reason=zero, error=said)}


def verdict_file(folder: str | Path, student: str, assignment: str) -> Path:
    """Where `record` leaves a submission's verdict for FillVerdict (named by a hash: any student id)."""
    name = hashlib.sha256("\0".join((student, assignment)).encode()).hexdigest()[:32]
    return Path(folder) / f"{name}.json"


def write_verdict(path: Path, chapter: Chapter, cells: list[dict], verdict: Verdict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"chapter": [chapter.number, chapter.name], "cells": cells, "verdict": asdict(verdict),
                                "checks": checks_of(chapter)}))


def read_verdict(path: Path) -> tuple[Chapter, list[dict], Verdict, dict[str, list[tuple[str, float]]]]:
    """What `write_verdict` left (the grader's own file, in the instructor's course directory)."""
    data = json.loads(path.read_text())
    checks = {name: [(str(d), float(w)) for d, w in pairs] for name, pairs in data["checks"].items()}
    return Chapter(*data["chapter"]), data["cells"], verdict_from_dict(data["verdict"]), checks


class FillVerdict(NbGraderPreprocessor):
    """nbgrader preprocessor used in place of Execute: the judge's verdict becomes the cells' outputs.
    `record` leaves the verdict of the submission nbgrader autogrades in `folder`, which nbgrader's
    configuration names (`nbgrader_api`)."""

    folder = Unicode("", help="where grader.classroom.grading.recording.record leaves each verdict").tag(config=True)

    def preprocess(self, nb, resources):
        chapter, cells, verdict, checks = read_verdict(verdict_file(self.folder, resources["nbgrader"]["student"],
                                                                    resources["nbgrader"]["assignment"]))
        fill(nb, chapter, cells, verdict, checks)
        return nb, resources


UNSANDBOXED = ("nbgrader autograde would run each learner's code in a kernel of yours, outside the sandbox: this "
               "course directory refuses it (Formgrader's Autograde button too). Grade with `grader autograde "
               "SUBMISSIONS --course-dir COURSE_DIR` (nbgrader's submitted/ folder will do): it runs each notebook "
               "in the sandbox and records it in this gradebook.")


class SandboxOnly(NbGraderPreprocessor):
    """Stock autograde's one step in a course directory `grader` writes (grader.coursedir) or on the hub
    (deploy/jupyterhub/nbgrader_config.py): a refusal, before any cell runs. `record` sets its own steps."""

    def preprocess(self, nb, resources):
        raise RuntimeError(UNSANDBOXED)


# ---------------------------------------------------------------- nbgrader's steps

class ScoreOnly(NbGraderPreprocessor):
    """Feedback that shows each test cell's score but not what its checks said (grading on submit
    before the due date, when the instructor's policy says so: grader.classroom.onsubmit.service)."""

    def preprocess(self, nb, resources):
        text = phrasebook(edition_of(nb)).say(SCORE_ONLY)
        for cell in nb.cells:
            if is_test_cell(cell):
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        return nb, resources


SCORE_ONLY = shown("[what the checks found is shown after the due date; your score is above]\n")


def nbgrader_api(course: CourseDir, term=None, score_only: bool = False, exchange: str | Path | None = None):
    from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import (
        AssignLatePenalties,
        CheckCellMetadata,
        GetGrades,
        IgnorePattern,
        LimitOutput,
    )
    from traitlets.config import Config

    shared_engines()
    tables_asked_once()
    schema_checked_once()
    config = Config()
    config.CourseDirectory.root = str(course.root)
    config.CourseDirectory.course_id = COURSE_ID
    if exchange is not None:  # release_feedback (grading on submit: grader.classroom.onsubmit.service)
        config.Exchange.root = str(exchange)
    config.CourseDirectory.db_url = course.db_url
    config.Autograde.autograde_preprocessors = [FillVerdict, SanitiseNotebook, AddRubrics, IgnorePattern,
                                                ClearMetadataPreprocessor, LimitOutput, OneCommit,
                                                ScoreBlankAnswers, BindHandGrades, AssignLatePenalties,
                                                CheckCellMetadata, SanitiseLast]
    config.FillVerdict.folder = str(course.root / VERDICTS)
    config.BindHandGrades.folder = str(course.root / FOLDER)
    config.GenerateFeedback.preprocessors = [DropRubrics, *([ScoreOnly] if score_only else []), SettleTotal,
                                             GetGrades, CommentsAsText, CSSHTMLHeaderPreprocessor]
    config.SettleTotal.root = str(course.root)
    config.GenerateFeedback.exporter_class = feedback_exporter()
    config.NbGraderAPI.log_level = "ERROR"
    # nbconvert validates the whole notebook against its schema after each of autograde's 12 steps and feedback's
    # 6; once, after the last step (nbconvert's own option), still refuses an invalid notebook
    config.Exporter.optimistic_validation = True
    if term is not None:
        term.configure(config)  # the course's late policy, through nbgrader's AssignLatePenalties
    return NbGraderAPI(CourseDirectory(config=config), config=config)


def zero_grades(course: CourseDir, submission: Submission) -> None:
    """A grading that failed must not leave an earlier score looking current."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(course.db_url) as gb:
        try:
            notebook = gb.find_submission_notebook(submission.chapter.name, submission.chapter.assignment,
                                                   submission.student)
        except MissingEntry:
            return
        for grade in notebook.grades:
            grade.auto_score = 0.0
            grade.manual_score = None
            grade.needs_manual_grade = False
        gb.db.commit()


def record(course: CourseDir, api, submission: Submission, helper=None) -> None:
    """nbgrader's autograde of one staged submission, the verdict standing in for execution; raises
    BadSubmission with nbgrader's reason when nbgrader could not autograde it. `helper`: a started
    grader.classroom.grading.nbgrader_helper.NbgraderHelper, which runs that autograde in its process."""
    chapter = submission.chapter
    verdict = submission.verdict or Verdict(error=submission.error or shown("not graded"))
    if submission.error:
        verdict.error = submission.error
    handed = verdict_file(course.root / VERDICTS, submission.student, chapter.assignment)
    write_verdict(handed, chapter, submission.cells, verdict)  # FillVerdict reads it inside nbgrader's autograde
    try:
        outcome = helper.autograde(chapter.assignment, submission.student) if helper is not None else None
        if outcome is None:  # no helper, or it failed: here
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SQLAlchemy's notes on nbgrader's sessions
                outcome = api.autograde(chapter.assignment, submission.student, force=True, create=True)
    finally:
        handed.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the folder goes with its last file
            handed.parent.rmdir()
    if not outcome.get("success"):  # grader.classroom.grading.batch then records the release with this reason
        last = [ln for ln in (outcome.get("error") or "").strip().splitlines() if ln.strip()]
        why = last[-1][:300] if last else shown("no reason given")
        raise BadSubmission(shown(f"nbgrader autograde failed: {why}"))
    if verdict.error and not submission.error:
        submission.error = verdict.error


def feedback_and_export(course: CourseDir, chapters: list[Chapter], students: list[str] | None = None,
                        score_only: bool = False, helper=None) -> None:
    """nbgrader's generate_feedback for each chapter (for `students` only, when given) and its CSV
    export; `score_only`: the feedback shows scores, not the checks' messages; `helper`: a started
    grader.classroom.grading.nbgrader_helper.NbgraderHelper, which makes every other chapter's pages meanwhile."""
    from nbgrader.api import Gradebook

    mine, theirs = list(chapters), []
    if helper is not None and len(chapters) > 1 and helper.give(chapters[1::2], students, score_only):
        mine, theirs = chapters[0::2], chapters[1::2]
    generate_feedback(course, mine, students, score_only)
    if theirs and not helper.finish():
        generate_feedback(course, theirs, students, score_only)
    with Gradebook(course.db_url) as gb:
        write_course_csv(gb, course.root / "grades.csv", late_policy(course.root))


def generate_feedback(course, chapters: list[Chapter], students: list[str] | None = None,
                      score_only: bool = False) -> bool:
    """nbgrader's generate_feedback for each chapter (for `students` only, when given), in this process;
    whether every one succeeded (a failure is said on stderr). `course`: its root and db_url."""
    api = nbgrader_api(course, score_only=score_only)
    succeeded = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for chapter in chapters:
            for student in students or [None]:
                outcome = api.generate_feedback(chapter.assignment, student_id=student, force=True)
                if not outcome.get("success"):
                    succeeded = False
                    print(f"grader: feedback for {chapter.assignment} failed: {outcome.get('error', '')[-300:]}",
                          file=sys.stderr)
    return succeeded

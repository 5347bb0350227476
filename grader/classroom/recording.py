"""Recording with nbgrader: its autograde with the judge's verdict in place of execution, the
gradebook's zero for a grading that failed, and feedback HTML and the CSV export (grader.classroom.grading
calls these in the trusted process, one submission at a time)."""
from __future__ import annotations

import re
import sys
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from grader.chapters import Chapter
from grader.coursedir import CourseDir
from grader.boundary.pool import VERDICTS, Verdict

if TYPE_CHECKING:
    from grader.classroom.grading import Submission


def _shared_engines() -> None:
    """nbgrader opens the gradebook, each time with a new SQLAlchemy engine, about nine times for every
    notebook it autogrades; one engine per database URL in this process keeps SQLAlchemy's cache of
    compiled statements between them (a fifth of the time nbgrader takes per notebook)."""
    import nbgrader.api

    if getattr(nbgrader.api.create_engine, "shared", False):
        return
    original, engines, lock = nbgrader.api.create_engine, {}, threading.Lock()

    def create_engine(url, **kwargs):
        key = (str(url), tuple(sorted(kwargs.items())))
        with lock:
            if key not in engines:
                engines[key] = original(url, **kwargs)
            return engines[key]

    create_engine.shared = True
    nbgrader.api.create_engine = create_engine


IMG_WITHOUT_ALT = re.compile(r"<img(?![^>]*\balt=)")
FOCUSABLE = re.compile(r'(<div class="[^"]*\b(?:jp-Cell-inputWrapper|jp-OutputArea-output)\b[^"]*")(?![^>]*\btabindex=)')
# nbgrader's list of graded cells names each "Test cell": name the exercise (grade id test_<exercise>)
TOC_ENTRY = re.compile(r'(<a href="#test_([^"]+)">)Test cell</a>')
NO_CREDIT = "  no credit: "
# A check's report line (FAIL and its reason) wraps in the page instead of scrolling sideways.
FEEDBACK_CSS = "<style>div.output_subarea pre { white-space: pre-wrap; overflow-wrap: break-word; }</style>\n</head>"


# TeX as nbconvert leaves it in the page for MathJax: $$display$$ and $inline$ (not a lone price sign)
MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$\w])\$([^$\n]+?)\$(?![\w$])", re.S)
NOT_PROSE = re.compile(r"(<(code|pre|script|style)\b.*?</\2>|<[^>]*>)", re.S)  # code, and any tag's attributes


def _mathml(page: str) -> str:
    """The maths as MathML, which browsers draw themselves: nbconvert's page loads MathJax from a CDN,
    so offline a learner saw raw `$$...$$`. latex2mathml converts every formula of the course (about
    20 KB of markup per chapter, no script); one it cannot convert stays TeX."""
    import html

    try:
        from latex2mathml.converter import convert
    except ImportError:  # an environment installed before the dependency: MathJax from the CDN, as before
        return page

    def formula(found: re.Match) -> str:
        try:
            return convert(html.unescape(found[1] or found[2]), display="block" if found[1] else "inline")
        except Exception:  # noqa: BLE001 - latex2mathml raises many kinds; the TeX stays readable
            return found[0]

    parts = NOT_PROSE.split(page)  # (prose, code or tag, its name) repeated: maths only in prose
    return "".join(MATH.sub(formula, part) if i % 3 == 0 else part for i, part in enumerate(parts) if i % 3 != 2)


def _learner_view(nb):
    """The graded notebook as its feedback shows it: a test cell's partial credit (the number nbgrader
    reads from its execute_result) is in the score heading, not an `Out[ ]:`; a reason for no credit
    that every test cell repeats (an unreadable notebook) is said once, the later cells point up to it."""
    import copy

    nb, seen = copy.deepcopy(nb), set()
    for cell in nb.cells:
        grading = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and grading.get("grade") and not grading.get("solution"):
            cell.outputs = [out for out in cell.get("outputs", []) if _shown(out, seen)]
    return nb


def _shown(output, seen: set) -> bool:
    """Whether a test cell's output stays in the feedback; a no-credit line said before is shortened."""
    kind = output.get("output_type")
    if kind == "execute_result" or (kind == "error" and output.get("evalue") in seen):
        return False
    if kind == "stream" and isinstance(output.get("text"), str):
        lines = []
        for line in output.text.splitlines(keepends=True):
            reason = line.removeprefix(NO_CREDIT).rstrip("\n") if line.startswith(NO_CREDIT) else None
            lines.append(f"{NO_CREDIT}the same reason as above\n" if reason and reason in seen else line)
            seen.add(reason)
        output.text = "".join(lines)
    return True


def _feedback_exporter():
    """nbconvert's HTML exporter for nbgrader's feedback, less its last pass: re-parsing the finished
    page with BeautifulSoup's pure-Python parser (about three quarters of the time per feedback file)
    only to give images without alt text a default one and make cells focusable, done here on the text."""
    from nbconvert.exporters import HTMLExporter, TemplateExporter
    from nbconvert.filters.highlight import Highlight2HTML
    from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
    from traitlets import Bool

    class FeedbackHTMLExporter(HTMLExporter):
        embed_images = Bool(True)  # a learner gets the feedback file alone: the chapter's figures go inside it

        def from_notebook_node(self, nb, resources=None, **kw):
            langinfo = nb.metadata.get("language_info", {})
            lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
            self.register_filter("highlight_code", self.filters.get(
                "highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)))
            nb = _learner_view(nb)
            resources = self._init_resources(resources)
            graded = Path(resources.get("metadata", {}).get("path") or ".").resolve()  # autograded/<student>/<assignment>
            if len(graded.parents) > 2 and (graded.parents[2] / "release" / graded.name).is_dir():
                resources["metadata"]["path"] = str(graded.parents[2] / "release" / graded.name)
            self.register_filter("filter_data_type", WidgetsDataTypeFilter(
                notebook_metadata=self._nb_metadata, parent=self, resources=resources))
            html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
            html = IMG_WITHOUT_ALT.sub('<img alt="No description has been provided for this image"', html)
            html = TOC_ENTRY.sub(r"\1\2</a>", html).replace("</head>", FEEDBACK_CSS, 1)
            html = html.split("<body", 1)[0] + _mathml("<body" + html.split("<body", 1)[1])
            return FOCUSABLE.sub(r'\1 tabindex="0"', html), resources

    return FeedbackHTMLExporter


def nbgrader_api(course: CourseDir, term=None):
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput, SaveAutoGrades
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from traitlets.config import Config

    from grader.boundary.pool import FillVerdict

    _shared_engines()
    config = Config()
    config.CourseDirectory.root = str(course.root)
    config.CourseDirectory.course_id = "transformers-from-scratch"
    config.CourseDirectory.db_url = course.db_url
    config.Autograde.autograde_preprocessors = [FillVerdict, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
                                                SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
    config.GenerateFeedback.exporter_class = _feedback_exporter()
    config.NbGraderAPI.log_level = "ERROR"
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


def record(course: CourseDir, api, submission: Submission) -> None:
    """nbgrader's autograde of one staged submission, the verdict standing in for execution; raises
    BadSubmission with nbgrader's reason when nbgrader could not autograde it."""
    chapter = submission.chapter
    verdict = submission.verdict or Verdict(error=submission.error or "not graded")
    if submission.error:
        verdict.error = submission.error
    VERDICTS[(submission.student, chapter.assignment)] = (chapter, submission.cells, verdict)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SQLAlchemy's notes on nbgrader's sessions
            outcome = api.autograde(chapter.assignment, submission.student, force=True, create=True)
    finally:
        VERDICTS.pop((submission.student, chapter.assignment), None)
    if not outcome.get("success"):  # grader.classroom.grading then records the release with this reason
        from grader.classroom.submissions import BadSubmission

        last = [ln for ln in (outcome.get("error") or "").strip().splitlines() if ln.strip()]
        raise BadSubmission("nbgrader autograde failed: " + (last[-1][:300] if last else "no reason given"))
    if verdict.error and not submission.error:
        submission.error = verdict.error


def feedback_and_export(course: CourseDir, chapters: list[Chapter]) -> None:
    """nbgrader's generate_feedback for each chapter and its CSV export, in this process."""
    from nbgrader.api import Gradebook

    from grader.classroom.export import write_course_csv

    api = nbgrader_api(course)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for chapter in chapters:
            outcome = api.generate_feedback(chapter.assignment, force=True)
            if not outcome.get("success"):
                print(f"grader: feedback for {chapter.assignment} failed: {outcome.get('error', '')[-300:]}",
                      file=sys.stderr)
        with Gradebook(course.db_url) as gb:
            write_course_csv(gb, course.root / "grades.csv")

"""Learner content as data where it becomes a page: an allowlist for HTML (`clean_html`), a check of
learner markdown (`clean_markdown`), and `SanitiseNotebook`, the autograde step that runs a submitted
notebook's cells and outputs through them once, where the trusted side writes the autograded notebook:
Formgrader, the feedback files and the grading service's pages all render that notebook.

What a learner's cell may render to: text structure (paragraphs, lists, tables, code, emphasis), links
to http(s)/mailto/#anchors, and images as png/jpeg data (or the chapter's own `images/*.png`). Never a
script, event handler, style, class, id, iframe, object, form, or `javascript:` URL. A markdown cell that
asks for more is shown as its text, in a code block, with a note; an SVG output is dropped for a line
saying so (an SVG is a document that can hold script and style); a `text/html` output is cleaned.
"""
from __future__ import annotations

import base64
import binascii
import copy
import functools
import re

import nbformat
import nh3
from nbconvert.filters.markdown_mistune import MarkdownWithMath
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.boundary.score import shown
from grader.classroom.phrasebook import edition_of, phrasebook

TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details", "div",
        "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol",
        "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td",
        "tfoot", "th", "thead", "tr", "u", "ul", "var"}
ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title", "width", "height"}, "abbr": {"title"},
              "ol": {"start"}, "td": {"colspan", "rowspan"}, "th": {"colspan", "rowspan"}}
DROPPED_WITH_CONTENT = {"script", "style", "template", "noscript", "title", "svg", "math", "iframe", "object"}
LINK = re.compile(r"(?i)^(?:https?://|mailto:|#)[^\s\"'<>`]*$")
DATA_IMAGE = re.compile(r"^data:image/(?:png|jpeg);base64,([A-Za-z0-9+/\s]+={0,2})$")
RELATIVE_LINK = re.compile(r"^(?!/)(?![A-Za-z][\w+.-]*:)[\w./#%-]+$")  # a chapter linking another: no scheme
COURSE_FIGURE = re.compile(r"^(?!/)(?!.*\.\.)[\w./-]+\.(?:png|jpe?g)$")  # the chapter's own figures (images/x.png)
NUMBER = re.compile(r"^\d{1,4}$")
# TeX that MathJax (Formgrader loads it) turns into links, styles, classes or ids
MATHJAX_MARKUP = re.compile(r"\\(?:href|url|style|class|cssId|bbox|unicode|require|html|data|mmlToken|toggle|"
                            r"texttip|mathtip|tooltip|action)(?![A-Za-z])")
INLINE_TAG = re.compile(r"(?i)^</?(b|i|em|strong|sub|sup|code|kbd|u|s|del|ins|mark|small|var|br)\s*/?>$")


def _base64(text: str) -> bool:
    try:
        base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _attribute(element: str, attribute: str, value: str) -> str | None:
    if element == "a" and attribute == "href":
        return value if LINK.match(value.strip()) else None
    if element == "img" and attribute == "src":
        found = DATA_IMAGE.match(value.strip())
        return value.strip() if found and _base64(found[1]) else None
    if attribute in ("width", "height", "colspan", "rowspan", "start"):
        return value if NUMBER.match(value.strip()) else None
    return value


def clean_html(html: str) -> str:
    """`html` with only the allowlisted tags and attributes (nh3: the ammonia sanitiser)."""
    return nh3.clean(str(html), tags=TAGS, attributes=ATTRIBUTES, attribute_filter=_attribute,
                     clean_content_tags=DROPPED_WITH_CONTENT, link_rel="noopener noreferrer nofollow",
                     url_schemes={"http", "https", "mailto", "data"}, strip_comments=True)


_PARSER = MarkdownWithMath(renderer=None)  # the parser nbconvert renders notebooks with, as tokens


def markdown_problem(source: str, attachments: dict | None = None) -> str | None:
    """What in learner markdown would render to more than the allowlist; None: nothing. TeX that MathJax would
    draw as markup (MATHJAX_MARKUP) counts wherever a token carries it outside code: its raw text, its text or
    any attribute (a \\begin{..} environment's body is only in attrs)."""
    return _problem(source, frozenset(attachments or {}))


@functools.lru_cache(maxsize=4096)  # a class's notebooks share the chapter's own cells
def _problem(source: str, attachments: frozenset) -> str | None:
    pending = list(_PARSER(source))
    while pending:
        token = pending.pop()
        kind, attrs = token.get("type"), token.get("attrs") or {}
        tex = [token.get("raw"), token.get("text"), *attrs.values()]  # latex_environment: attrs name and body
        if kind not in ("codespan", "block_code") and any(isinstance(t, str) and MATHJAX_MARKUP.search(t)
                                                          for t in tex):
            return shown("TeX that draws links or styles")  # MathJax leaves code alone
        if kind == "inline_html" and not INLINE_TAG.match(token.get("raw", "").strip()):
            return shown("HTML markup")
        if kind == "block_html":
            return shown("HTML markup")
        if kind == "link" and not (LINK.match(attrs.get("url", "")) or RELATIVE_LINK.match(attrs.get("url", ""))):
            return shown("a link that is not http, https or mailto")
        if kind == "image" and not _image_allowed(attrs.get("url", ""), attachments):
            return shown("an image that is not a png or jpeg")
        if kind == "block_code" and (attrs.get("info") or "").strip().lower().startswith("mermaid"):
            return shown("a diagram")
        pending.extend(token.get("children") or [])
    return None


def _image_allowed(url: str, attachments: frozenset) -> bool:
    if url.startswith("attachment:"):
        return url.removeprefix("attachment:") in attachments
    found = DATA_IMAGE.match(url)
    return bool(found and _base64(found[1])) or bool(COURSE_FIGURE.match(url))


AS_TEXT = shown("[shown as text: this cell held {what}, which the grader does not draw]")


def fenced(source: str) -> str:
    """Markdown that shows `source` verbatim in a code block (a fence longer than any it holds): its letters,
    never markup or maths (MathJax leaves code alone)."""
    longest = max((len(run) for run in re.findall(r"`+", source)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{source}\n{fence}\n"


def code_span(text: str) -> str:
    """`text` on one line as a markdown code span (what `fenced` is within a line)."""
    line = " ".join(str(text).split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    return f"{fence} {line} {fence}" if line else ""


def as_text(source: str, note: str) -> str:
    """`source` verbatim in a code block, under `note`."""
    return f"*{note}*\n\n{fenced(source)}"


def _english(template: str, **values) -> str:
    return template.format(**values)


def clean_markdown(source: str, attachments: dict | None = None, say=_english) -> str:
    """Learner markdown unchanged when it draws only allowlisted markup, else as text with a note saying
    why (`say`: a phrasebook's, for the notebook's edition)."""
    problem = markdown_problem(source, attachments)
    if problem is None:
        return source
    note = say(AS_TEXT, what=say(problem))
    shown_as_text = as_text(source, note)
    if markdown_problem(shown_as_text) is not None:  # cannot happen with a longer fence; never draw it
        return f"*{note}*"
    return shown_as_text


def _attachments(cell) -> dict:
    """Attachments that are png or jpeg images (base64), each alone: nbconvert prefers svg when there is one."""
    kept = {}
    for name, bundle in (cell.get("attachments") or {}).items():
        images = {mime: data for mime, data in (bundle or {}).items()
                  if mime in ("image/png", "image/jpeg") and isinstance(data, str) and _base64(data)}
        if images:
            kept[name] = images
    return kept


RAW_CELL = shown("a raw cell")
SVG_DROPPED = shown("[an SVG image, not shown: the grader shows png and jpeg images only]")
KIND_DROPPED = shown("[output not shown: the grader does not draw {kinds}]")
TEXT_KINDS = ("text/plain",)


def clean_output(output, say=_english):
    """A code cell's output with only what the allowlist draws (a new node; streams and errors are escaped
    text wherever they are drawn)."""
    if output.get("output_type") not in ("display_data", "execute_result"):
        return output
    output = copy.deepcopy(output)
    data, kept, dropped = output.get("data") or {}, {}, []
    for mime, value in data.items():
        text = "".join(value) if isinstance(value, list) else value
        if mime == "text/plain" and isinstance(text, str):
            kept[mime] = text
        elif mime == "text/html" and isinstance(text, str) and not MATHJAX_MARKUP.search(clean_html(text)):
            kept[mime] = clean_html(text)
        elif mime == "text/markdown" and isinstance(text, str) and markdown_problem(text) is None:
            kept[mime] = text
        elif mime in ("image/png", "image/jpeg") and isinstance(text, str) and _base64(text):
            kept[mime] = text
        else:
            dropped.append(mime)
    if "image/svg+xml" in dropped and "text/plain" not in kept:
        kept["text/plain"] = say(SVG_DROPPED)
    elif dropped and not kept:
        kept["text/plain"] = say(KIND_DROPPED, kinds=", ".join(sorted(dropped)))
    output["data"] = kept
    sizes = (output.get("metadata") or {})
    output["metadata"] = {mime: {k: v for k, v in (sizes.get(mime) or {}).items()
                                 if k in ("width", "height") and isinstance(v, int) and not isinstance(v, bool)}
                          for mime in ("image/png", "image/jpeg") if isinstance(sizes.get(mime), dict)}
    return output


def sanitise_notebook(nb, kept=lambda cell: False) -> None:
    """Every cell of a submitted notebook but those `kept` made safe to draw, in place (SanitiseNotebook)."""
    book = phrasebook(edition_of(nb))
    nb.metadata.pop("widgets", None)  # nbconvert would load the widgets' scripts to draw this state
    for cell in nb.cells:
        if kept(cell):
            continue
        if cell.get("cell_type") == "markdown":
            cell.attachments = _attachments(cell)
            if not cell.attachments:
                cell.pop("attachments", None)
            cell.source = clean_markdown(cell.source, cell.get("attachments"), book.say)
        elif cell.get("cell_type") == "raw":  # drawn as raw HTML by nbconvert: a markdown cell of its text
            note = book.say(AS_TEXT, what=book.say(RAW_CELL))
            replacement = nbformat.v4.new_markdown_cell(as_text(cell.source, note), metadata=cell.metadata)
            cell.clear()
            cell.update(replacement)
        elif cell.get("cell_type") == "code":
            cell.outputs = [clean_output(out, book.say) for out in cell.get("outputs", [])]


class SanitiseNotebook(NbGraderPreprocessor):
    """Autograde, right after the outputs are in (FillVerdict or Execute) and before the rubrics: the
    learner's cells and outputs as data (grader.classroom.intake.sanitise)."""

    def preprocess(self, nb, resources):
        sanitise_notebook(nb)
        return nb, resources


class SanitiseLast(NbGraderPreprocessor):
    """Autograde, the last step: every cell once more, so that what the trusted side added after
    SanitiseNotebook (a grader's earlier hand grades and comments: grader.classroom.grades.handgrades) is data too.
    Only the rubric boxes AddRubrics drew stay as drawn (the chapter's own text; no learner or grader wrote it)."""

    def preprocess(self, nb, resources):
        from grader.classroom.grades.written import is_rubric_box  # lazy: keeps the class's layers at six

        sanitise_notebook(nb, kept=is_rubric_box)
        return nb, resources


class CommentsAsText(NbGraderPreprocessor):
    """Feedback, after nbgrader's GetGrades: each grader's comment as its text. nbgrader's feedback template
    renders a comment as markdown, so a comment's HTML (a `<meta http-equiv=refresh>`, a fake notice) was
    live in the learner's page."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("comment"):
                meta["comment"] = fenced(str(meta["comment"]))
        return nb, resources

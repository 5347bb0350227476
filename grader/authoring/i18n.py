"""Translations of a chapter's learner-facing text: gettext catalogues, one per chapter and language.

The English chapter stays the only source of code, exercises and structure. What a learner reads in
it is cut into translation units, each keyed by its English text (gettext's msgid):

- `markdown`: a markdown cell (written answers excepted: the learner writes those);
- `docstring`: the docstring of an exercise's def or class, or of a method inside it;
- `code`: a code cell with comments or printed prose, translated as a whole; a translation may
  change only comments and string constants (checked with `ast`), never the code;
- `message`: a message of the public checks and helpers the chapter folder carries, `tr("template")`
  in course/checks/<name>.py or course/toolkit/<name>.py (grader.authoring.messages); a translation
  keeps the template's `{fields}`. The messages of modules no chapter owns have their own catalogue,
  `common`.
- `figure`: a text the chapter's figure script draws, `_("...")` in images/<name>_figures.py
  (grader.authoring.figures).

`i18n/<lang>/<NN_name>.po` (and `common.po`) holds them. Editing an English unit changes its msgid, so the old
translation no longer applies: `grader translate` keeps it as a fuzzy entry holding the previous
English (`#| msgid`), which `problems` reports, with the chapter and the unit, until a translator
updates it and drops the fuzzy flag.
"""
from __future__ import annotations

import ast
import copy
import difflib
import inspect
import io
import json
import re
import textwrap
import tokenize
from dataclasses import dataclass
from pathlib import Path

import nbformat
import polib

from grader.authoring import figures, messages
from grader.authoring.messages import COMMON, MESSAGES_FILE
from grader.chapters import LANGUAGES, REPO, Chapter, is_answer_cell
from grader.classroom import phrasebook

__all__ = ["COMMON", "LANGUAGES", "MESSAGES_FILE", "IncompleteTranslation", "messages_file", "problems",
           "translate", "units", "update"]
CATALOGUES = REPO / "i18n"
FUZZY_CUTOFF = 0.6  # how alike an edited unit must be to its old English to keep the old translation
PROSE = re.compile(r"[A-Za-z]{2,}[^A-Za-z]+[A-Za-z]{2,}")  # two words: a string a reader reads


class IncompleteTranslation(ValueError):
    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Feedback:
    """A catalogue of graded feedback (grader.classroom.phrasebook): a chapter's hidden checks, by its
    assignment, or the texts every chapter's feedback shares (COMMON)."""
    name: str

    @property
    def assignment(self) -> str:
        return f"feedback/{self.name}"


Catalogue = Chapter | Feedback | str


def feedback_catalogues(chapters: list[Chapter]) -> list[Feedback]:
    return [Feedback(c.assignment) for c in chapters] + [Feedback(phrasebook.COMMON)]


@dataclass(frozen=True)
class Unit:
    kind: str  # markdown | docstring | code | message | figure
    where: str  # "cell 12", "SelfAttention.forward", "course/checks/self_attention.py: check_softmax"
    text: str


def _name(catalogue: Catalogue) -> str:
    """A catalogue is a chapter's (its assignment, NN_<name>), COMMON, the shared messages', or a
    feedback catalogue (feedback/NN_<name>, feedback/common)."""
    return catalogue if isinstance(catalogue, str) else catalogue.assignment


def catalogue_path(catalogue: Catalogue, lang: str) -> Path:
    return CATALOGUES / lang / f"{_name(catalogue)}.po"


# ------------------------------------------------------------------ what a learner reads
def _docstrings(source: str):
    """(qualified name, docstring node, owner node) of every def and class in `source`, depth first."""
    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + node.name
                doc = node.body[0] if node.body else None
                if isinstance(doc, ast.Expr) and isinstance(getattr(doc.value, "value", None), str):
                    yield name, doc.value, node
                yield from walk(node.body, name + ".")
    yield from walk(ast.parse(source).body, "")


def _has_prose(source: str) -> bool:
    """Whether a code cell holds a comment or a string a reader reads (printed labels, messages)."""
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    return any(t.type == tokenize.COMMENT or (t.type in (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1))
                                               and PROSE.search(t.string)) for t in tokens)


def units(nb: nbformat.NotebookNode) -> list[Unit]:
    """The translation units of a chapter's nbgrader source notebook, in reading order."""
    found = []
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        where = f"cell {index}"
        if cell.cell_type == "markdown" and not is_answer_cell(cell):
            found.append(Unit("markdown", where, cell.source))
        elif cell.cell_type == "code" and meta.get("solution"):
            for name, doc, _ in _docstrings(cell.source):
                found.append(Unit("docstring", name, inspect.cleandoc(doc.value)))
        elif cell.cell_type == "code" and not meta.get("grade") and _has_prose(cell.source):
            found.append(Unit("code", where, cell.source))
    return found


def all_units(catalogue: Catalogue, nb: nbformat.NotebookNode | None) -> list[Unit]:
    """What a catalogue holds: a chapter's units (its notebook's, the texts its figures draw, then its
    modules' messages), or the shared messages (COMMON, with nb None)."""
    if isinstance(catalogue, Feedback):
        return [Unit(kind, where, text) for kind, where, text in phrasebook.units(catalogue.name)]
    found = []
    if nb is not None:
        drawn = {}  # a text drawn twice is one unit
        for where, text in figures.texts(catalogue):
            drawn.setdefault(text, Unit("figure", f"{figures.script(catalogue).name} {where}", text))
        found = units(nb) + list(drawn.values())
    return found + [Unit("message", where, text) for where, text in messages.owned(_name(catalogue))]


# ------------------------------------------------------------------ catalogues
def _entry(unit: Unit) -> polib.POEntry:
    return polib.POEntry(msgid=unit.text, msgstr="", comment=f"{unit.kind}: {unit.where}")


def load(chapter: Catalogue, lang: str) -> polib.POFile:
    path = catalogue_path(chapter, lang)
    if not path.exists():
        catalogue = polib.POFile(wrapwidth=0)
        catalogue.metadata = {"Project-Id-Version": _name(chapter), "Language": lang,
                              "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
                              "Content-Transfer-Encoding": "8bit"}
        return catalogue
    return polib.pofile(str(path), wrapwidth=0)


def update(chapter: Catalogue, lang: str,
           nb: nbformat.NotebookNode | None) -> tuple[polib.POFile, dict[str, int]]:
    """The catalogue with the chapter's units now (msgmerge's job): a unit whose English is unchanged
    keeps its translation; an edited one keeps the most alike old translation, fuzzy, with the old
    English as previous msgid; units gone from the chapter are dropped. COMMON (nb None): the shared
    messages."""
    old = load(chapter, lang)
    known = {e.msgid.strip(): e for e in old if not e.obsolete}  # blank lines around a unit do not count
    leftover = [e for e in old if not e.obsolete and e.msgstr]
    fresh = polib.POFile(wrapwidth=0)
    fresh.metadata = old.metadata
    counts = {"kept": 0, "fuzzy": 0, "new": 0}
    for unit in all_units(chapter, nb):
        entry = _entry(unit)
        if unit.text.strip() in known:
            previous = known[unit.text.strip()]
            entry.msgstr, entry.flags = previous.msgstr, list(previous.flags)
            entry.previous_msgid = previous.previous_msgid
            counts["kept"] += 1
        else:
            alike = difflib.get_close_matches(unit.text, [e.msgid for e in leftover], n=1, cutoff=FUZZY_CUTOFF)
            if alike:
                previous = next(e for e in leftover if e.msgid == alike[0])
                entry.msgstr, entry.flags, entry.previous_msgid = previous.msgstr, ["fuzzy"], previous.msgid
                counts["fuzzy"] += 1
            else:
                counts["new"] += 1
        if unit.text in {e.msgid for e in fresh}:
            continue  # the same English twice: one translation serves both
        fresh.append(entry)
    return fresh, counts


def save(catalogue: polib.POFile, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(catalogue) + "\n", encoding="utf-8")


def _strings_blanked(source: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.dump(tree)


def _code_source(source: str) -> str:
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def problems(chapter: Catalogue, lang: str, nb: nbformat.NotebookNode | None) -> list[str]:
    """What keeps the chapter's catalogue (or COMMON's, nb None) from translating the chapter: each line
    names the catalogue and the unit (missing, untranslated, out of date, a code translation that changes
    code, or a message translation with other fields than the English)."""
    name = _name(chapter)
    catalogue = {e.msgid.strip(): e for e in load(chapter, lang) if not e.obsolete}
    found = []
    for unit in all_units(chapter, nb):
        first = unit.text.strip().splitlines()[0][:70] if unit.text.strip() else ""
        label = f"{name} ({lang}) {unit.kind} {unit.where} «{first}»"
        entry = catalogue.get(unit.text.strip())
        if entry is None:
            found.append(f"{label}: not in i18n/{lang}/{name}.po (run `grader translate`)")
        elif "fuzzy" in entry.flags:
            found.append(f"{label}: out of date (the English changed; update the translation, drop `fuzzy`)")
        elif not entry.msgstr.strip():
            found.append(f"{label}: not translated")
        elif unit.kind == "code":
            try:
                same = _strings_blanked(_code_source(entry.msgstr)) == _strings_blanked(_code_source(unit.text))
            except SyntaxError:
                same = False
            if not same:
                found.append(f"{label}: the translation changes the code, not only comments and strings")
        elif unit.kind in ("message", "figure") and (why := messages.field_problem(unit.text, entry.msgstr)):
            found.append(f"{label}: {why}")
        elif unit.kind in ("check", "feedback") and (why := phrasebook.field_problem(unit.text, entry.msgstr)):
            found.append(f"{label}: {why}")
    return found


def messages_file(modules: list[str], lang: str) -> bytes:
    """The `course/messages.json` of a chapter folder in `lang` that carries `modules` (paths like
    course/checks/self_attention.py): the translation of each of their messages, from the catalogue
    that owns the module; raises IncompleteTranslation naming each message that has none."""
    tables: dict[str, dict[str, str]] = {}
    table, missing = {}, []
    for module in modules:
        name = messages.owner(module)
        if name not in tables:
            tables[name] = {e.msgid: e.msgstr for e in load(name, lang)
                            if not e.obsolete and e.msgstr.strip() and "fuzzy" not in e.flags}
        for where, text in messages.templates(module):
            if text in tables[name] and not messages.field_problem(text, tables[name][text]):
                table[text] = tables[name][text]
            else:
                missing.append(f"{name} ({lang}) message {where} «{text[:70]}»: not translated "
                               f"(`grader translate --check --lang {lang}`)")
    if missing:
        raise IncompleteTranslation(sorted(set(missing)))
    content = {"generated": f"by `grader build` from i18n/{lang}/*.po: edit those, not this file",
               "lang": lang, "messages": dict(sorted(table.items()))}
    return (json.dumps(content, ensure_ascii=False, indent=1) + "\n").encode()


# ------------------------------------------------------------------ a translated notebook
def _replace_docstrings(source: str, translations: dict[str, str]) -> str:
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    edits = []
    for _, doc, owner in _docstrings(source):
        english = inspect.cleandoc(doc.value).strip()
        if english not in translations:
            continue
        indent = " " * owner.body[0].col_offset
        body = textwrap.indent(translations[english], indent).lstrip(" ")
        closing = "\n" + indent if "\n" in translations[english] else ""
        literal = f'"""{body}{closing}"""'
        start = offsets[doc.lineno - 1] + doc.col_offset
        end = offsets[doc.end_lineno - 1] + doc.end_col_offset
        edits.append((start, end, literal))
    for start, end, literal in sorted(edits, reverse=True):
        source = source[:start] + literal + source[end:]
    return source


def translate(nb: nbformat.NotebookNode, chapter: Chapter, lang: str) -> nbformat.NotebookNode:
    """The chapter's nbgrader source notebook in `lang`; raises ValueError naming each unit that
    keeps it from being whole (grader.authoring.i18n.problems)."""
    missing = problems(chapter, lang, nb)
    if missing:
        raise IncompleteTranslation(missing)
    table = {e.msgid.strip(): e.msgstr for e in load(chapter, lang) if not e.obsolete}
    out = copy.deepcopy(nb)
    out.metadata["course_edition"] = lang  # which release a grader restores its cells from
    for cell in out.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown" and not is_answer_cell(cell):
            cell.source = table[cell.source.strip()]
        elif cell.cell_type == "code" and meta.get("solution"):
            cell.source = _replace_docstrings(cell.source, table)
        elif cell.cell_type == "code" and meta.get("grade"):
            cell.source = phrasebook.hidden_test_line(cell.source, lang)
        elif cell.cell_type == "code" and cell.source.strip() in table:
            cell.source = table[cell.source.strip()]
    return out

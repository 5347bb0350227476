"""Graded feedback in the learner's language: the hidden checks' names and messages and the report's
own words, translated in the trusted process from `i18n/<lang>/feedback/*.po`, which no release folder
carries (it would list the hidden checks).

What a learner's feedback can show is found in the source, as templates whose `{fields}` stand for the
values a message carries:

- every string with prose in a chapter's hidden checks (grader/boundary/specs/<name>.py), docstrings
  and the docstring rules a check `states` excepted: the check names (kind `check`) and the messages
  they raise (kind `feedback`), in the chapter's catalogue `feedback/NN_<name>`;
- every text marked `shown(...)` anywhere else in grader/ (the report's words, no-credit reasons, the
  checks' shared helpers), in `feedback/common`.

A message is translated by the template it matches, literal pieces in order (no regular expression: a
message can hold the learner's text); the values it carries are translated the same way (a check's
`what=` label inside a shared helper's message), and anything no template matches stays as it is
(Python's own error text, the learner's). Where several match, the outer one wins: a template with a
`{what}` label (the checks' helpers name their label so), then one with text at both ends (a field at
an end could swallow a whole message), then the one with the most text.
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import polib

from grader.chapters import CHAPTERS, LANGUAGES, REPO

CATALOGUES = REPO / "i18n"
SPECS = REPO / "grader" / "boundary" / "specs"
HELPERS = REPO / "grader" / "boundary" / "spec.py"  # what the hidden checks share
COMMON = "common"
MARK = "shown"  # grader.boundary.score.shown: marks a text the feedback shows
PROSE = re.compile(r"[A-Za-z]{2,}[^A-Za-z]*\s[^A-Za-z]*[A-Za-z]{2,}")  # two words apart, outside any field
FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
SIMPLE = re.compile(r"[A-Za-z_][\w.]*")
WORD = re.compile(r"[A-Za-z]{3,}")
CJK_GAP = re.compile(r"(?<=[\u4e00-\u9fff]) (?=[\u4e00-\u9fff])")  # a label's space, between two Chinese words
MAX_DEPTH = 3  # a message, a label inside it, a label inside that
# The one line of prose in a test cell (grader.authoring.build.HIDDEN_TEST), per language: the release
# writes it, and the feedback shows it again, from the class's source notebook.
HIDDEN_TEST_LINE = re.compile(r"^# Hidden tests for `(?P<name>\w+)` run here when your notebook is graded "
                              r"\((?P<points>[\d.]+) points?\)\.$", re.MULTILINE)
HIDDEN_TEST_TRANSLATED = {"zh": "# 批改你的笔记本时，`{name}` 的隐藏测试在这里运行（{points} 分）。"}


# ------------------------------------------------------------------ templates found in the source
def _literal(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _template(node: ast.expr, format_fields: bool = False) -> str | None:
    """The template of a string expression: a constant, an f-string, or a `+` of them and other values
    (which become fields, named by their expression when it is a plain name, else by their place);
    None for anything else. `format_fields`: a constant is a str.format template already."""
    parts, count = [], [0]

    def field(expr: ast.expr) -> str:
        source = ast.unparse(expr)
        if SIMPLE.fullmatch(source):
            return "{" + source + "}"
        count[0] += 1
        return "{" + str(count[0]) + "}"

    def add(expr) -> None:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            parts.append(expr.value if format_fields else _literal(expr.value))
        elif isinstance(expr, ast.JoinedStr):
            for value in expr.values:
                parts.append(_literal(value.value) if isinstance(value, ast.Constant) else field(value.value))
        elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add) and _stringy(expr):
            add(expr.left)
            add(expr.right)
        else:
            parts.append(field(expr))

    if not _stringy(node):
        return None
    add(node)
    return "".join(parts)


def _stringy(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and (_stringy(node.left)
                                                                             or _stringy(node.right))


def has_prose(template: str) -> bool:
    return bool(PROSE.search(FIELD.sub("0", template)))


def _skipped(tree: ast.Module) -> set[int]:
    """ids of the nodes that are not feedback: docstrings, rules a check `states`, dict keys and indexes."""
    skip = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
                getattr(body[0].value, "value", None), str):
            skip.add(id(body[0].value))
        if isinstance(node, ast.keyword) and node.arg == "states":
            skip.update(id(n) for n in ast.walk(node.value))
        if isinstance(node, ast.Subscript):
            skip.update(id(n) for n in ast.walk(node.slice))
    return skip


def _checks(tree: ast.Module) -> set[int]:
    """ids of the check names: the first argument of `<exercise>.check(...)` and `.side_check(...)`."""
    return {id(node.args[0]) for node in ast.walk(tree) if isinstance(node, ast.Call) and node.args
            and isinstance(node.func, ast.Attribute) and node.func.attr in ("check", "side_check")}


def _labels(tree: ast.Module) -> set[int]:
    """ids of the labels a check hands its helpers: `what=...`, and a `what` parameter's default (a
    single word, "output", is a label too)."""
    found = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == "what"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.posonlyargs + node.args.args
            found |= {id(default) for arg, default in zip(args[len(args) - len(node.args.defaults):],
                                                          node.args.defaults) if arg.arg == "what"}
            found |= {id(default) for arg, default in zip(node.args.kwonlyargs, node.args.kw_defaults)
                      if arg.arg == "what" and default is not None}
    return found


@functools.lru_cache(maxsize=None)
def _found(path: Path, everything: bool) -> tuple[tuple[str, str, str], ...]:
    """(kind, where, template) of a module: with `everything`, each prose string (a hidden-checks module),
    else each `shown(...)` text."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(REPO).as_posix()
    found = []
    if everything:
        skip, checks, labels = _skipped(tree), _checks(tree), _labels(tree)

        def visit(node):
            if id(node) in skip:
                return
            template = _template(node) if isinstance(node, ast.expr) else None
            if template is not None:
                if id(node) in checks or id(node) in labels or has_prose(template):  # names and labels always
                    found.append(("check" if id(node) in checks else "feedback", f"{rel}:{node.lineno}", template))
                if not isinstance(node, ast.BinOp):
                    return
            for child in ast.iter_child_nodes(node):
                visit(child)
        visit(tree)
    else:
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == MARK
                    and len(node.args) == 1 and (template := _template(node.args[0], format_fields=True))):
                found.append(("feedback", f"{rel}:{node.lineno}", template))
    return tuple(sorted(found, key=lambda unit: int(unit[1].rsplit(":", 1)[1])))  # in reading order


def _marked_modules() -> list[Path]:
    return sorted(p for p in (REPO / "grader").rglob("*.py")
                  if SPECS not in p.parents and "__pycache__" not in p.parts
                  and not any(part.startswith("source") for part in p.relative_to(REPO / "grader").parts))


def catalogues() -> list[str]:
    """The feedback catalogues: one per chapter with hidden checks (its assignment), and COMMON."""
    return [c.assignment for c in CHAPTERS] + [COMMON]


def units(catalogue: str) -> list[tuple[str, str, str]]:
    """(kind, where, English template) of a feedback catalogue, each template once."""
    if catalogue == COMMON:  # the checks' shared helpers, then each marked text
        found = list(_found(HELPERS, everything=True))
        found += [u for path in _marked_modules() if path != HELPERS for u in _found(path, everything=False)]
    else:
        found = list(_found(SPECS / f"{catalogue.split('_', 1)[1]}.py", everything=True))
    seen, unique = set(), []
    for kind, where, text in found:
        if text not in seen:
            seen.add(text)
            unique.append((kind, where, text))
    return unique


def catalogue_path(catalogue: str, lang: str) -> Path:
    return CATALOGUES / lang / "feedback" / f"{catalogue}.po"


def field_names(template: str) -> list[str]:
    return sorted(re.split(r"[:!]", m[1], maxsplit=1)[0] for m in FIELD.finditer(template) if m[1] is not None)


def field_problem(english: str, translated: str) -> str | None:
    if field_names(english) != field_names(translated):
        return (f"the translation's fields {field_names(translated)} differ from the English's "
                f"{field_names(english)} (keep each {{field}} as it is)")
    return None


# ------------------------------------------------------------------ translating a message
@dataclass(frozen=True)
class Template:
    english: str
    translated: str
    pieces: tuple[str, ...]  # the literal text around the fields: one more than the fields
    fields: tuple[str, ...]

    @classmethod
    def of(cls, english: str, translated: str) -> Template:
        pieces, fields, last = [], [], 0
        for found in FIELD.finditer(english):
            if found[1] is None:
                continue
            pieces.append(english[last:found.start()].replace("{{", "{").replace("}}", "}"))
            fields.append(re.split(r"[:!]", found[1], maxsplit=1)[0])
            last = found.end()
        pieces.append(english[last:].replace("{{", "{").replace("}}", "}"))
        return cls(english, translated, tuple(pieces), tuple(fields))

    @property
    def weight(self) -> int:
        return sum(map(len, self.pieces))

    @property
    def anchored(self) -> bool:
        return bool(self.pieces[0] and self.pieces[-1])

    def match(self, text: str) -> dict[str, str] | None:
        """The field values if `text` is this template filled in, else None: each literal piece at its
        first place after the one before."""
        first, last = self.pieces[0], self.pieces[-1]
        if not self.fields:
            return {} if text == first else None
        if len(text) < len(first) + len(last) or not (text.startswith(first) and text.endswith(last)):
            return None
        end, position, values = len(text) - len(last), len(first), []
        for piece in self.pieces[1:-1]:
            if not piece:
                return None  # two fields side by side: no telling where one ends
            found = text.find(piece, position, end)
            if found < 0:
                return None
            values.append(text[position:found])
            position = found + len(piece)
        values.append(text[position:end])
        return dict(zip(self.fields, values))

    def fill(self, values: dict) -> str:
        """The translation with each field's value; a value that is not text keeps the field's format."""
        def put(found: re.Match) -> str:
            if found[1] is None:
                return found[0][0]
            name, _, spec = found[1].partition(":")
            name = name.split("!")[0]
            if name not in values:
                return found[0]
            value = values[name]
            return value if isinstance(value, str) else format(value, spec)
        return CJK_GAP.sub("", FIELD.sub(put, self.translated))


class Phrasebook:
    """A chapter's feedback texts in one language (all English where there is no catalogue)."""

    def __init__(self, table: dict[str, str], edition: tuple[str | None, str | None] = (None, None)):
        self.table = table
        self.edition = edition  # (language, assignment): where `mistake` finds the public checks' messages
        # A template with fields but no words ("{name} {what}") would match anything: exact use only.
        found = [Template.of(e, t) for e, t in table.items() if FIELD.search(e)]
        self.templates = sorted((t for t in found if WORD.search("".join(t.pieces))),
                                key=lambda t: ("what" not in t.fields, not t.anchored, -t.weight))

    def text(self, message: str, depth: int = 0) -> str:
        """`message` translated where a template matches it, with the values it carries."""
        if not isinstance(message, str) or depth > MAX_DEPTH or not message.strip():
            return message
        if message in self.table:
            return self.table[message]
        for template in self.templates:
            values = template.match(message)
            if values is not None:
                return template.fill({k: self.text(v, depth + 1) for k, v in values.items()})
        return message

    def say(self, template: str, **values) -> str:
        """A marked template (`shown(...)`) in this language, filled with `values` (texts are translated)."""
        translated = Template.of(template, self.table.get(template, template))
        return translated.fill({k: self.text(v) if isinstance(v, str) else v for k, v in values.items()})

    def mistake(self, message: str) -> str:
        """A public check's message (the likely mistake, grader.boundary.diagnosis) in this language."""
        return public_messages(*self.edition).text(message)


def load(catalogue: str, lang: str) -> dict[str, str]:
    """A catalogue's usable translations (none fuzzy, empty or with other fields than the English)."""
    path = catalogue_path(catalogue, lang)
    if not path.is_file():
        return {}
    return {e.msgid: e.msgstr for e in polib.pofile(str(path), wrapwidth=0)
            if not e.obsolete and e.msgstr.strip() and "fuzzy" not in e.flags and not field_problem(e.msgid, e.msgstr)}


@functools.lru_cache(maxsize=32)
def phrasebook(lang: str | None, assignment: str | None = None) -> Phrasebook:
    """The feedback texts of a chapter (its assignment) in `lang`; English for "en", None or a language
    the course has no edition in."""
    if lang not in LANGUAGES:
        return Phrasebook({})
    table = load(COMMON, lang)
    if assignment:
        table.update(load(assignment, lang))
    return Phrasebook(table, (lang, assignment))


def load_messages(catalogue: str, lang: str) -> dict[str, str]:
    """The public checks' messages a chapter folder's `course/messages.json` carries (units of kind
    `message`, grader.authoring.messages), from `i18n/<lang>/<catalogue>.po`; usable ones only."""
    path = CATALOGUES / lang / f"{catalogue}.po"
    if not path.is_file():
        return {}
    return {e.msgid: e.msgstr for e in polib.pofile(str(path), wrapwidth=0)
            if e.comment.startswith("message:") and not e.obsolete and e.msgstr.strip() and "fuzzy" not in e.flags
            and not field_problem(e.msgid, e.msgstr)}


@functools.lru_cache(maxsize=16)
def public_messages(lang: str | None, assignment: str | None) -> Phrasebook:
    """The public checks' messages of a chapter (and the shared ones) in `lang`, read only when a
    report names a likely mistake."""
    if lang not in LANGUAGES:
        return Phrasebook({})
    table = load_messages(COMMON, lang)
    if assignment:
        table.update(load_messages(assignment, lang))
    return Phrasebook(table)


def hidden_test_line(source: str, lang: str) -> str:
    """A test cell's source with its line of prose in `lang`."""
    if lang not in HIDDEN_TEST_TRANSLATED:
        return source
    return HIDDEN_TEST_LINE.sub(lambda m: HIDDEN_TEST_TRANSLATED[lang].format(**m.groupdict()), source)


def edition_of(nb) -> str:
    """The language a learner's notebook says it is in ("en" unless a known translation)."""
    lang = nb.metadata.get("course_edition") if hasattr(nb, "metadata") else None
    return lang if isinstance(lang, str) and lang in LANGUAGES else "en"

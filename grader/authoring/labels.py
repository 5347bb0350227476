"""Labels a translated chapter quotes: a curve, a row, a variant named in the text must be one the
edition prints or draws (issue 39: a Chinese question asked about "the “scaled” curve" of a plot
whose legend says 缩放 / 不缩放).

What an edition shows is read from its source, not from a run: every string in its code cells (an
f-string with its conditional parts spelled out, `{'有' if warmup else '无'}` giving both), the texts
its figure script draws, and the messages of the `course` modules (templates: a `{field}` matches
one word). A quote (“…”, 「…」, ‘…’, "…", '…', or a code span `…` that is not Python) is a label when
it is one of those texts, or a part of one between commas, colons or brackets ("LLaMA, 4 kv heads"). For each
markdown cell and docstring, the translation must quote at least as many labels of its own edition
as the English quotes of the English edition; a label of the English edition quoted (or named at
the head of a list item, "- **4 kv heads**: ...") in a translation whose edition does not show it is
named.
"""
from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass

import nbformat

from grader.authoring import figures, i18n, messages
from grader.chapters import Chapter

BACKTICKS = re.compile(r"`([^`\n]+)`")
QUOTES = re.compile(r"“([^”]{1,80})”|「([^」]{1,80})」|‘([^’]{1,80})’|\"([^\"]{1,80})\""
                    r"|(?<!\w)'(?!\s)([^'\n]+?)(?<!\s)'(?!\w)")
# "- **4 kv heads**: ..." names a row of a table; counted only when it is the other edition's label
NAMED = re.compile(r"^[ \t]*(?:[-*]|\d+\.)[ \t]+\*\*([^*\n]+)\*\*[:：]", re.MULTILINE)
FIELD = re.compile(r"\{[^{}]*\}")  # a str.format field of a message template
ANY = "\0"  # what a field or a computed part of an f-string stands as: a value, one word
WORDS = re.compile(r"[^\W\d_]")  # a label holds letters, not only a computed value: two, or one CJK
CJK = re.compile(r"[\u4e00-\u9fff]")
TRIM = " \t:：,，.。;；"
PARTS = re.compile(r"[,，:：;；()（）\n]")  # a label may name one part of a shown text: "LLaMA, 4 kv heads"


@dataclass(frozen=True)
class Shown:
    """The texts an edition prints or draws, as patterns (a computed part matches one word)."""
    patterns: tuple[re.Pattern, ...]

    def has(self, label: str) -> bool:
        label = label.strip(TRIM)
        return bool(label) and any(p.fullmatch(label) for p in self.patterns)


def _parts(node: ast.expr) -> list[str] | None:
    """The values a formatted part can take when it is a literal or a choice of literals, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        body, orelse = _parts(node.body), _parts(node.orelse)
        return None if body is None or orelse is None else body + orelse
    return None


def _spelled_out(node: ast.JoinedStr) -> list[str]:
    """Each text an f-string can make, a computed part as ANY (a few dozen at most)."""
    choices = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            choices.append([value.value])
        else:
            choices.append(_parts(value.value) or [ANY])
    return ["".join(parts) for parts in itertools.islice(itertools.product(*choices), 64)]


def _strings(source: str) -> list[str]:
    try:
        tree = ast.parse(i18n._code_source(source))
    except SyntaxError:
        return []
    inside = {id(sub) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
              for sub in ast.walk(node) if sub is not node}
    # a docstring or a bare string statement is read, not printed
    inside |= {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and id(node) not in inside:
            found += _spelled_out(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside:
            found.append(node.value)
    return found


def _pattern(text: str) -> re.Pattern | None:
    text = FIELD.sub(ANY, text).strip(TRIM)
    literal = text.replace(ANY, "")
    if len(WORDS.findall(literal)) < 2 and not CJK.search(literal):
        return None
    if ANY in text and len(re.findall(r"[^\W\d_]{2,}", literal)) < 2 and not CJK.search(literal):
        return None  # "{hits} of {total}" would match any three words ("Mixtral of Experts", a paper's title)
    return re.compile(r"\S+?".join(re.escape(piece) for piece in text.split(ANY)))


def shown(chapter: Chapter, nb: nbformat.NotebookNode) -> Shown:
    """What the edition of `nb` (the chapter's source notebook in that edition) prints or draws."""
    texts = [text for cell in nb.cells if cell.cell_type == "code" for text in _strings(cell.source)]
    english = [text for _, text in figures.texts(chapter)] + [
        text for name in (chapter.assignment, messages.COMMON) for _, text in messages.owned(name)]
    if chapter.lang == "en":
        texts += english
    else:
        wanted = set(english)
        for name in (chapter.assignment, messages.COMMON):
            texts += [e.msgstr for e in i18n.load(name, chapter.lang)
                      if e.msgid in wanted and e.msgstr and not e.obsolete and "fuzzy" not in e.flags]
    lines = {line for text in texts for line in [text, *PARTS.split(text)]}
    return Shown(tuple(p for p in map(_pattern, sorted(lines)) if p is not None))


def _is_python(span: str) -> bool:
    """An expression, or arguments of a call (`dim=-1, keepdim=True`)."""
    for text in (span, f"f({span})"):
        try:
            ast.parse(text, mode="eval")
            return True
        except SyntaxError:
            pass
    return False


def quotes(text: str) -> list[str]:
    """The quoted spans of a cell: code spans that are not code (`head 0`), then quotes outside them."""
    spans = [span for span in BACKTICKS.findall(text) if not _is_python(span)]
    rest = BACKTICKS.sub(" ", text)
    return [" ".join(span.split()).strip(TRIM) for span in
            spans + [next(g for g in m.groups() if g) for m in QUOTES.finditer(rest)]]


def named(text: str) -> list[str]:
    return [span.strip(TRIM) for span in NAMED.findall(BACKTICKS.sub(" ", text))]


def problems(chapter: Chapter, lang: str, english_nb: nbformat.NotebookNode) -> list[str]:
    """Each markdown cell or docstring of the translation whose quoted labels do not match what its
    edition shows (see the module's docstring), naming the chapter, the unit and the labels."""
    edition = chapter.edition(lang)
    ours, theirs = shown(chapter, english_nb), shown(edition, i18n.translate(english_nb, edition, lang))
    table = {e.msgid.strip(): e.msgstr for e in i18n.load(chapter, lang) if not e.obsolete}
    found = []
    for unit in i18n.units(english_nb):
        if unit.kind not in ("markdown", "docstring") or unit.text.strip() not in table:
            continue
        translation = table[unit.text.strip()]
        labels = sorted({q for q in quotes(unit.text) if ours.has(q)})
        kept = sorted({q for q in quotes(translation) if theirs.has(q)})
        foreign = sorted({q for q in quotes(translation) + named(translation) if ours.has(q) and not theirs.has(q)})
        where = f"{chapter.assignment} ({lang}) {unit.kind} {unit.where}"
        if foreign:
            found.append(f"{where}: quotes {foreign}, label(s) of the English edition that the {lang} edition "
                         "does not show (quote what its code prints, its figures and messages draw)")
        elif len(kept) < len(labels):
            found.append(f"{where}: the English quotes the label(s) {labels}; the translation quotes "
                         f"only {kept} of those the {lang} edition shows")
    return found

"""The `course` package's messages as translation units (grader.authoring.i18n, kind `message`).

A learner reads messages from the public checks and the helpers: a check's hint, "not implemented yet",
a helper's printed line. Each is written where it is made as `tr("english template with {field}",
field=value)` (`course.tr`), and the template, a `str.format` string, is its msgid. Its translation goes
to the catalogue of the chapter whose name the module bears (course/checks/<name>.py and
course/toolkit/<name>.py: i18n/<lang>/NN_<name>.po); a module of no chapter (course/checks/__init__.py,
course/toolkit/addition.py, ...) goes to i18n/<lang>/common.po, so that it is translated once. A
translated chapter folder carries the translations of every message of the `course` modules it carries,
in `course/messages.json`, which `grader build` writes and `course.tr` reads.

The templates are read from the source with `ast`: `tr`'s first argument must be a string literal (an
f-string could not be looked up), and its fields plain names that the call passes as keywords.
"""
from __future__ import annotations

import ast
import string
from pathlib import Path

from grader.chapters import CHAPTERS, REPO

COMMON = "common"  # the catalogue of the messages no chapter owns
MESSAGES_FILE = "course/messages.json"  # in a translated chapter folder; course.MESSAGES_FILE
COURSE = REPO / "course"


def course_modules() -> list[str]:
    """Every module of the `course` package (posix paths relative to the repository)."""
    packages = [d for d in sorted(COURSE.iterdir()) if (d / "__init__.py").is_file()]
    paths = [COURSE / "__init__.py"] + [p for d in packages for p in sorted(d.rglob("*.py"))]
    return [p.relative_to(REPO).as_posix() for p in paths if "__pycache__" not in p.parts]


def owner(module: str) -> str:
    """The catalogue a module's messages belong to: its chapter's (NN_<name>) or COMMON."""
    stem = Path(module).stem
    return next((c.assignment for c in CHAPTERS if c.name == stem), COMMON)


def fields(template: str) -> list[tuple[str, str, str]]:
    """The (name, conversion, format spec) of each replacement field, sorted; ValueError if `template`
    is not a format string."""
    return sorted({(name, conversion or "", spec or "")
                   for _, name, spec, conversion in string.Formatter().parse(template) if name is not None})


def field_problem(english: str, translated: str) -> str | None:
    """Why `translated` cannot stand for `english` (other fields, or not a format string), or None."""
    try:
        theirs = fields(translated)
    except ValueError as err:
        return f"the translation is not a format string ({err}; write a literal brace as {{{{ or }}}})"
    ours = fields(english)
    if theirs != ours:
        def show(found):
            return ", ".join("{" + n + (f"!{c}" if c else "") + (f":{s}" if s else "") + "}" for n, c, s in found)
        return f"the translation has the fields {show(theirs) or 'none'}; the English has {show(ours) or 'none'}"
    return None


def _where(node: ast.stmt) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return next((t.id for t in targets if isinstance(t, ast.Name)), "module")


def _template(call: ast.Call, label: str) -> str:
    """The call's template, checked: a literal format string whose fields are exactly its keywords."""
    first = call.args[0] if call.args else None
    if len(call.args) != 1 or not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        raise ValueError(f"{label}: tr() takes one string literal, the English template (not an f-string: "
                         "its fields go as keywords, tr('... {x} ...', x=value))")
    try:
        names = {name for name, _, _ in fields(first.value)}
    except ValueError as err:
        raise ValueError(f"{label}: {first.value!r} is not a format string ({err})") from None
    if any(not name.isidentifier() for name in names):
        raise ValueError(f"{label}: {first.value!r}: each field is a keyword's name, like {{shape}}")
    given = {k.arg for k in call.keywords}
    if None not in given and given != names:  # tr(..., **values) is taken on trust
        raise ValueError(f"{label}: the template's fields {sorted(names)} differ from the keywords {sorted(given)}")
    return first.value


def templates(module: str) -> list[tuple[str, str]]:
    """(where, template) of every tr() call in a module, in source order; `where` names the module and
    the top-level definition holding the call (the context a translator reads)."""
    tree = ast.parse((REPO / module).read_text(encoding="utf-8"))
    found = []
    for statement in tree.body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "tr":
                where = f"{module}: {_where(statement)}"
                found.append((node.lineno, node.col_offset, where, _template(node, f"{module}:{node.lineno}")))
    return [(where, text) for _, _, where, text in sorted(found)]


def owned(name: str) -> list[tuple[str, str]]:
    """(where, template) of the messages catalogue `name` holds (a chapter's assignment, or COMMON)."""
    return [found for module in course_modules() if owner(module) == name for found in templates(module)]

"""Learner-facing helpers: public checks, toy data and plots. No reference code lives here.

Every message a learner reads from this package (a public check's hint, a helper's printed line) is
written where it is made as `tr("english template with {fields}", fields=...)`. In a translated
chapter folder `grader build` puts `course/messages.json` beside this file ({"lang": ..., "messages":
{english template: translated template}}); everywhere else (the repository, an English folder) there
is no such file and `tr` gives the English. guides/maintaining.md: The Chinese edition.
"""
from __future__ import annotations

import json
import re
import string
from pathlib import Path

MESSAGES_FILE = "messages.json"
_messages: dict[str, str] | None = None
_WIDE = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]")  # CJK characters and full-width punctuation
_CONVERT = {"r": repr, "s": str, "a": ascii}


def _translations() -> dict[str, str]:
    """The translated templates of this folder's edition, read once; {} when there are none or the file
    cannot be read (a message is then English, never an error)."""
    global _messages
    if _messages is None:
        try:
            found = json.loads(Path(__file__).with_name(MESSAGES_FILE).read_text(encoding="utf-8"))["messages"]
            _messages = {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            _messages = {}
    return _messages


def _wide(text: str) -> bool:
    return bool(text) and _WIDE.match(text) is not None


def _format(template: str, values: dict[str, object]) -> str:
    """`template.format(**values)` for a translated template, less the space that sets a field off from
    Chinese text where the field's value is Chinese at that end too ("{what} 的形状" with what = "输出")."""
    out = ""
    for literal, name, spec, conversion in string.Formatter().parse(template):
        if literal.startswith(" ") and _wide(out[-1:]) and _wide(literal[1:2]):
            literal = literal[1:]
        out += literal
        if name is not None:
            value = values[name]
            text = format(_CONVERT[conversion](value) if conversion else value, spec or "")
            if _wide(text[:1]) and out.endswith(" ") and _wide(out[-2:-1]):
                out = out[:-1]
            out += text
    return out


def tr(template: str, /, **values: object) -> str:
    """The message `template.format(**values)`, in the language of this chapter folder: its translation
    of `template` where it has one that formats with `values`, else the English."""
    translated = _translations().get(template)
    if translated is not None:
        try:
            return _format(translated, values)
        except (KeyError, IndexError, ValueError, AttributeError, TypeError):  # a broken translation: English
            pass
    return template.format(**values)

"""The glossary of a translated edition, i18n/<lang>/glossary.md: for learners and for the checks.

The translators' file holds the table of terms (English | translation | note), the conventions of the
text, and under "## Rejected renderings" a table of texts the edition does not use (rejected | use |
why, each text in backticks). `grader build` writes the terms into every chapter folder of the edition
as GLOSSARY.md (`learner_page`), which each chapter's opening links; `misused` finds a rejected text in
the edition's catalogues (chapters, shared messages, graded feedback).
"""
from __future__ import annotations

import re
from pathlib import Path

import polib

from grader.authoring import i18n

FILE = "GLOSSARY.md"  # in each chapter folder of a translated edition
REJECTED = "## Rejected renderings"
ROW = re.compile(r"^\|(.*)\|\s*$")
INTRO = {"zh": """\
# 中英术语表

本课程中文版所用的术语，以及它们的英文原文。一个术语在每章第一次出现时，括号里会注明英文，例如
缩放点积注意力（scaled dot-product attention）；之后只用中文。用语大体沿用《动手学深度学习》。

代码保持原样，不作翻译：函数、类、参数和变量的名称（`softmax`、`SelfAttention`、`d_model`），
形状字母（B、T、S、D、H、Dh、V），以及公式。模型名称（BERT、GPT、LLaMA、RoPE、RMSNorm、SwiGLU）
也保留英文。

*这个文件由 `grader build` 从 i18n/zh/glossary.md 生成。*
"""}


def source(lang: str) -> Path:
    return i18n.CATALOGUES / lang / "glossary.md"


def _tables(lang: str) -> dict[str, list[list[str]]]:
    """The rows (cells) of each table in the glossary, under the `## ` heading above it ("" at the
    top); the header row and the |---| row left out."""
    found: dict[str, list[list[str]]] = {}
    heading, header_seen = "", False
    for line in source(lang).read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            heading, header_seen = line.strip(), False
            continue
        row = ROW.match(line)
        if not row:
            header_seen = False
            continue
        cells = [cell.strip() for cell in row.group(1).split("|")]
        if not header_seen:
            header_seen = True  # the header; the next row is |---|
        elif not set("".join(cells)) <= set("-: "):
            found.setdefault(heading, []).append(cells)
    return found


def terms(lang: str) -> list[tuple[str, str]]:
    """(English, translation) of each term, in the glossary's order."""
    rows = _tables(lang).get("", [])
    if not rows:
        raise ValueError(f"{source(lang)}: no table of terms at the top")
    return [(row[0], row[1]) for row in rows]


def rejected(lang: str) -> list[tuple[str, str]]:
    """(rejected text, the text to use) of each row of the rejected renderings."""
    pairs = []
    for row in _tables(lang).get(REJECTED, []):
        texts = [cell[1:-1] for cell in row[:2] if len(cell) > 2 and cell[0] == cell[-1] == "`"]
        if len(texts) != 2:
            raise ValueError(f"{source(lang)}: {REJECTED}: a row is `rejected` | `use` | why, got {row}")
        pairs.append((texts[0], texts[1]))
    return pairs


def learner_page(lang: str) -> str:
    """GLOSSARY.md of the edition's chapter folders: the terms, translation first."""
    lines = [INTRO[lang], f"| {'中文' if lang == 'zh' else lang} | English |", "|---|---|"]
    lines += [f"| {translated} | {english} |" for english, translated in terms(lang)]
    return "\n".join(lines) + "\n"


def misused(lang: str) -> list[str]:
    """Each use of a rejected text in the edition's catalogues: the file, the unit, the text and what
    to write instead."""
    folder = i18n.CATALOGUES / lang
    found = []
    for path in sorted(folder.glob("*.po")) + sorted(folder.glob("feedback/*.po")):
        for entry in polib.pofile(str(path), wrapwidth=0):
            if entry.obsolete:
                continue
            for text, use in rejected(lang):
                if text in entry.msgstr:
                    found.append(f"{lang}/{path.relative_to(folder)} ({entry.comment or entry.msgid[:40]}): "
                                 f"«{text}», write «{use}» (i18n/{lang}/glossary.md: {REJECTED[3:]})")
    return found

"""The CJK font the course ships for a translation's figures and plots: a subset of a system font.

Learners' machines and CI have no CJK font, so the course carries one: i18n/<lang>/fonts/ holds a
subset of Noto Sans CJK SC (SIL Open Font License, OFL.txt beside it) with exactly the characters
the edition's figure texts use, plus ASCII and the minus sign. Figure texts are the `figure`
units' translations (grader.authoring.figures), in the `code` units' translations every string outside a print()
call (plot titles, labels, legends; printed text goes to the console, not to a figure), and the translations of
every message of the toolkit (course/toolkit/*.py: the plotting helpers' titles, labels and legends; its few
printed or raised messages are counted too, which is simpler than telling them apart and costs a few glyphs).

    python -m grader.authoring.fonts --write   # regenerate (needs the system package fonts-noto-cjk)
    python -m grader.authoring.fonts           # list the characters the shipped subset lacks

`missing` reads only the shipped file (and matplotlib's DejaVu Sans, drawn first), never the system font.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTCollection, TTFont

from grader.authoring import figures, i18n, messages
from grader.chapters import CHAPTERS, LANGUAGES

TOOLKIT = "course/toolkit/"  # the plotting helpers' package: its messages' translations are drawn

SYSTEM_FONTS = Path("/usr/share/fonts/opentype/noto")  # Debian: fonts-noto-cjk, NotoSansCJK-<weight>.ttc
SYSTEM_FAMILY = "Noto Sans CJK SC"
LICENCE = Path("/usr/share/doc/fonts-noto-cjk/copyright")
# ASCII, and the minus sign of tick labels (drawn as $\mathdefault{...}$: the first family, no fallback)
ALWAYS = {chr(c) for c in range(0x20, 0x7F)} | {"\u2212"}


def _strings_outside_print(source: str) -> list[str]:
    try:
        tree = ast.parse(i18n._code_source(source))
    except SyntaxError:
        return []
    printed = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            printed |= {id(sub) for sub in ast.walk(node)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in printed]


def toolkit_messages() -> dict[str, set[str]]:
    """Catalogue (a chapter's assignment or messages.COMMON) -> the templates of the toolkit's messages it holds."""
    found: dict[str, set[str]] = {}
    for module in messages.course_modules():
        if module.startswith(TOOLKIT):
            found.setdefault(messages.owner(module), set()).update(text for _, text in messages.templates(module))
    return found


def figure_texts(lang: str) -> dict[str, str]:
    """Each translated text drawn in a figure or plot of the edition -> where (catalogue, unit kind)."""
    found = {}
    toolkit = toolkit_messages()
    for catalogue in [*CHAPTERS, messages.COMMON]:
        name = catalogue if isinstance(catalogue, str) else catalogue.assignment
        english = set() if isinstance(catalogue, str) else {text for _, text in figures.texts(catalogue)}
        for entry in i18n.load(catalogue, lang):
            if entry.obsolete or not entry.msgstr:
                continue
            if entry.msgid in english:
                found.setdefault(entry.msgstr, f"{name} figure")
            elif entry.msgid in toolkit.get(name, ()):
                found.setdefault(entry.msgstr, f"{name} toolkit message «{entry.msgid[:40]}»")
            elif entry.comment.startswith("code:"):
                for text in _strings_outside_print(entry.msgstr):
                    found.setdefault(text, f"{name} {entry.comment}")
    return found


def characters(lang: str) -> set[str]:
    return ALWAYS | {ch for text in figure_texts(lang) for ch in text if ch.isprintable() and not ch.isspace()}


def _cmap(path: Path) -> set[str]:
    with TTFont(path, lazy=True) as font:
        return {chr(code) for code in font.getBestCmap()}


def missing(lang: str) -> dict[str, str]:
    """Character -> the text that uses it, for each character neither the shipped subset nor
    matplotlib's DejaVu Sans has (it would be drawn as a box, with a "Glyph missing" warning)."""
    import matplotlib  # lazy: only here

    have = _cmap(figures.font_path(lang)) if figures.font_path(lang).exists() else set()  # Bold: the same
    have |= _cmap(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")
    found = {}
    for text, where in figure_texts(lang).items():
        for ch in text:
            if ch.isprintable() and not ch.isspace() and ch not in have:
                found.setdefault(ch, f"{where}: «{text[:40]}»")
    return found


def _system_face(weight: str) -> TTFont:
    path = SYSTEM_FONTS / f"NotoSansCJK-{weight}.ttc"
    for font in TTCollection(path).fonts:
        if font["name"].getDebugName(1) == SYSTEM_FAMILY:
            return font
    raise ValueError(f"{path} has no face {SYSTEM_FAMILY!r}")


def _licence(copyright_line: str) -> str:
    """The OFL's text from Debian's copyright file, with the font's copyright line above it."""
    lines = LICENCE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines[:-1]) if line == "License: SIL-1.1" and lines[i + 1].startswith(" "))
    text = []
    for line in lines[start + 1:]:
        if not line.startswith(" "):
            break
        text.append("" if line.strip() == "." else line[1:])
    names = " and ".join(figures.font_path("zh", w).name for w in figures.WEIGHTS)
    return (f"{names}: subsets of {SYSTEM_FAMILY} (https://github.com/notofonts/noto-cjk),\n"
            f"renamed {figures.FONT_FAMILY!r}, made by `python -m grader.authoring.fonts --write`.\n"
            f"{copyright_line}\n\n" + "\n".join(text).strip() + "\n")


def _subset(lang: str, weight: str) -> TTFont:
    font = _system_face(weight)
    options = subset.Options()
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6, 13, 14]
    options.hinting = False
    options.desubroutinize = True
    options.layout_features = ["kern", "vert", "locl"]
    subsetter = subset.Subsetter(options)
    subsetter.populate(text="".join(sorted(characters(lang))))
    subsetter.subset(font)
    family = figures.FONT_FAMILY
    postscript = f"{family.replace(' ', '')}-{weight}"
    name = font["name"]
    for name_id, value in ((1, family), (2, weight), (3, postscript), (4, f"{family} {weight}"), (6, postscript)):
        name.setName(value, name_id, 3, 1, 0x409)
        name.setName(value, name_id, 1, 0, 0)
    name.names = [n for n in name.names if n.nameID not in (16, 17)]
    cff = font["CFF "].cff
    cff.fontNames = [postscript]
    cff.topDictIndex[0].FamilyName = family
    cff.topDictIndex[0].FullName = f"{family} {weight}"
    font.recalcTimestamp = False  # the same characters give the same bytes
    return font


def write(lang: str) -> Path:
    """Make the subsets (each weight) and their licence file under i18n/<lang>/fonts/."""
    for weight in figures.WEIGHTS:
        font = _subset(lang, weight)
        path = figures.font_path(lang, weight)
        path.parent.mkdir(parents=True, exist_ok=True)
        font.save(path)
    (path.parent / "OFL.txt").write_text(_licence(font["name"].getDebugName(0) or ""))
    return path.parent


def main(argv: list[str]) -> int:
    bad = 0
    for lang in LANGUAGES:
        if "--write" in argv:
            folder = write(lang)
            sizes = ", ".join(f"{p.name} {p.stat().st_size // 1024} KB" for p in sorted(folder.glob("*.otf")))
            print(f"{folder}: {len(characters(lang))} characters; {sizes}")
        for ch, where in sorted(missing(lang).items()):
            print(f"{lang}: {ch!r} (U+{ord(ch):04X}) not in {figures.font_path(lang).name}, used by {where}")
            bad += 1
    if bad:
        print("run `python -m grader.authoring.fonts --write` (needs fonts-noto-cjk)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

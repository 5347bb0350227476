"""The conceptual figures in each edition: what images/<name>_figures.py draws, translated.

A figure script wraps every text it draws in `_()`, English being the key (gettext's msgid), and
draws each edition in turn (`Figures.editions`): the English PNGs into chapters/NN_<name>/images/,
a translation's into i18n/<lang>/figures/NN_<name>/ under the same names, with the texts from the
chapter's catalogue (units of kind `figure`, grader.authoring.i18n) in the font the course ships
(i18n/<lang>/fonts/, grader.authoring.fonts), never a system font. The build puts a translation's
PNG in place of the English one in that edition's folder, so the markdown links stay the same.

A translated PNG carries a stamp (a PNG text chunk): the hash of its script, the chapter's figure
translations and the font. `stale` lists the PNGs whose stamp is not the current one.
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
from pathlib import Path

import polib

from grader.chapters import CHAPTERS, LANGUAGES, REPO, Chapter

SCRIPTS = REPO / "images"
STAMP_KEY = "Course-Figure-Stamp"
FONT_FAMILY = "Course Sans SC"  # a subset of Noto Sans CJK SC (grader.authoring.fonts)
WEIGHTS = ("Regular", "Bold")
# The shipped font first: a text mixing $math$ and Chinese draws its plain part in the first family
# alone; DejaVu Sans (matplotlib's own) for the symbols the subset lacks.
FONT_ORDER = [FONT_FAMILY, "DejaVu Sans"]


def script(chapter: Chapter) -> Path:
    return SCRIPTS / f"{chapter.name}_figures.py"


def font_path(lang: str, weight: str = "Regular") -> Path:
    return REPO / "i18n" / lang / "fonts" / f"{FONT_FAMILY.replace(' ', '')}-{weight}.otf"


def font_files(lang: str) -> dict[str, Path]:
    """What a translated folder carries in course/toolkit/fontfiles/ (course/toolkit/fonts.py)."""
    folder = REPO / "i18n" / lang / "fonts"
    return {f"course/toolkit/fontfiles/{p.name}": p for p in sorted(folder.glob("*")) if p.is_file()}


def figure_dir(chapter: Chapter, lang: str) -> Path:
    """Where a script draws the chapter's figures in `lang`."""
    if lang == "en":
        return chapter.chapter_dir / "images"
    return REPO / "i18n" / lang / "figures" / chapter.assignment


def texts(chapter: Chapter) -> list[tuple[str, str]]:
    """(the function drawing it, English text) of every `_("...")` in the chapter's figure script."""
    path = script(chapter)
    if not path.is_file():
        return []
    found = []
    for top in ast.parse(path.read_text()).body:
        for node in ast.walk(top):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_"):
                if len(node.args) != 1 or not isinstance(node.args[0], ast.Constant) \
                        or not isinstance(node.args[0].value, str):
                    raise ValueError(f"{path.name} line {node.lineno}: _() takes one string literal "
                                     "(a template: _('{n} heads').format(n=...))")
                found.append((getattr(top, "name", "module"), node.args[0].value))
    return found


def table(chapter: Chapter, lang: str, catalogues: Path = REPO / "i18n") -> dict[str, str]:
    """English figure text -> its translation, from the chapter's catalogue (translated, not fuzzy)."""
    path = catalogues / lang / f"{chapter.assignment}.po"
    if not path.exists():
        return {}
    wanted = {text for _, text in texts(chapter)}
    return {e.msgid: e.msgstr for e in polib.pofile(str(path), wrapwidth=0)
            if e.msgid in wanted and e.msgstr and "fuzzy" not in e.flags and not e.obsolete}


def stamp(chapter: Chapter, lang: str) -> str:
    digest = hashlib.sha256(script(chapter).read_bytes())
    for english, translated in sorted(table(chapter, lang).items()):
        digest.update(f"\0{english}\0{translated}".encode())
    for weight in WEIGHTS:
        font = font_path(lang, weight)
        digest.update(font.read_bytes() if font.exists() else b"no font")
    return digest.hexdigest()[:20]


def stamp_of(png: Path) -> str | None:
    from PIL import Image

    with Image.open(png) as image:
        return image.info.get(STAMP_KEY)


def stale(chapter: Chapter, lang: str) -> list[str]:
    """The chapter's translated figures that are missing or older than their script, texts or font."""
    english = sorted(p.name for p in figure_dir(chapter, "en").glob("*.png"))
    folder, wanted = figure_dir(chapter, lang), stamp(chapter, lang)
    found = [f"{folder / name}: missing" for name in english if not (folder / name).is_file()]
    found += [f"{folder / name}: out of date (run python images/make_figures.py)" for name in english
              if (folder / name).is_file() and stamp_of(folder / name) != wanted]
    found += [f"{png}: no English figure of that name" for png in sorted(folder.glob("*.png"))
              if png.name not in english]
    return found


def edition_images(chapter: Chapter) -> tuple[dict[str, bytes], list[str]]:
    """The edition's figures under the English names (images/<name>.png), and the ones missing."""
    folder, files, missing = figure_dir(chapter, chapter.lang), {}, []
    for png in sorted(figure_dir(chapter, "en").glob("*.png")):
        if (folder / png.name).is_file():
            files[f"images/{png.name}"] = (folder / png.name).read_bytes()
        else:
            missing.append(f"{chapter.assignment} ({chapter.lang}) figure images/{png.name}: not drawn "
                           f"(python images/make_figures.py)")
    return files, missing


class Figures:
    """What a figure script draws with: `_` translates, `out()` is the edition's folder."""

    def __init__(self, name: str):
        self.chapter = next(c for c in CHAPTERS if c.name == name)
        self.lang, self.translations = "en", {}

    def _(self, english: str) -> str:
        return self.translations.get(english, english)

    def editions(self, langs: tuple[str, ...] | None = None):
        """Each edition in turn (English and every translation): texts and font set, folder made."""
        from matplotlib import font_manager, rc_context

        for lang in langs or ("en", *LANGUAGES):
            self.lang = lang
            self.translations = table(self.chapter, lang) if lang != "en" else {}
            figure_dir(self.chapter, lang).mkdir(parents=True, exist_ok=True)
            settings = contextlib.nullcontext()
            if lang != "en":
                for weight in WEIGHTS:
                    font_manager.fontManager.addfont(str(font_path(lang, weight)))
                settings = rc_context({"font.family": FONT_ORDER})
            with settings:
                yield lang
        self.lang, self.translations = "en", {}

    def out(self) -> Path:
        """The folder of the edition being drawn."""
        return figure_dir(self.chapter, self.lang)

    def savefig(self, fig, path, **kwargs) -> None:
        """fig.savefig, with a translated figure's stamp."""
        if self.lang != "en":
            kwargs["metadata"] = {STAMP_KEY: stamp(self.chapter, self.lang)}
        fig.savefig(path, **kwargs)

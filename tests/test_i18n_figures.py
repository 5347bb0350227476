"""Text in the figures of the Chinese edition (grader.authoring.figures, grader.authoring.fonts):
every figure drawn in Chinese and fresh, the shipped subset font holding every character a translated
figure or plot text uses (read from the shipped file, never from a system font), and a Chinese
chapter's plots drawn without a word on stderr (nbgrader zeroes a test cell that writes there)."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from grader.authoring import figures, fonts, i18n, samples
from grader.chapters import CHAPTERS, LANGUAGES, find_chapter


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_figure_is_drawn_in_the_translation_and_fresh(lang):
    stale = [line for chapter in CHAPTERS for line in figures.stale(chapter, lang)]
    assert stale == [], "\n".join(stale) + "\n(python -m grader.authoring.fonts --write; python images/make_figures.py)"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_built_folder_shows_the_translated_figures(lang):
    for chapter in CHAPTERS:
        edition = chapter.edition(lang)
        for png in sorted(figures.figure_dir(chapter, lang).glob("*.png")):
            built = edition.source_dir / "images" / png.name
            assert built.read_bytes() == png.read_bytes(), f"{built}: not the {lang} figure (grader build)"
        for rel, path in figures.font_files(lang).items():
            assert (edition.course_dir / rel).read_bytes() == path.read_bytes(), f"{edition.course_dir / rel}"
        assert not (chapter.course_dir / "course" / "toolkit" / "fontfiles").exists(), "English folders carry no font"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_shipped_font_has_every_character_of_the_figure_and_plot_texts(lang):
    lacking = fonts.missing(lang)
    assert lacking == {}, "\n".join(f"{ch!r} (U+{ord(ch):04X}) used by {where}" for ch, where in lacking.items()) + \
        "\n(python -m grader.authoring.fonts --write)"
    size = sum(figures.font_path(lang, w).stat().st_size for w in figures.WEIGHTS)
    assert size < 1_000_000, f"the shipped fonts take {size} bytes"


def test_a_character_the_subset_lacks_is_named(monkeypatch):
    texts = {**fonts.figure_texts("zh"), "龘的标题": "01_attention_intuition code: cell 6"}
    monkeypatch.setattr(fonts, "figure_texts", lambda lang: texts)
    lacking = fonts.missing("zh")
    assert list(lacking) == ["龘"] and "cell 6" in lacking["龘"]


def test_a_figure_translation_keeps_its_placeholders(tmp_path, monkeypatch):
    shutil.copytree(i18n.CATALOGUES, tmp_path / "i18n")
    monkeypatch.setattr(i18n, "CATALOGUES", tmp_path / "i18n")
    chapter = find_chapter("04")
    catalogue = i18n.load(chapter, "zh")
    entry = next(e for e in catalogue if e.msgid == "head {h}")
    entry.msgstr = "头 {n}"
    i18n.save(catalogue, i18n.catalogue_path(chapter, "zh"))
    from grader.authoring.build import build_source_notebook

    found = i18n.problems(chapter, "zh", build_source_notebook(chapter))
    # one entry, two units: the figure's text, and the title show_heads draws (a toolkit message)
    assert sorted(line.split(") ", 1)[1].split()[0] for line in found) == ["figure", "message"], found
    for line in found:
        assert "«head {h}»" in line and "the translation has the fields {n}" in line


RUN_CELLS = '''
import json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
shown = []
def show():
    for number in plt.get_fignums():
        path = os.path.join(sys.argv[1], f"plot{len(shown)}.png")
        plt.figure(number).savefig(path, dpi=60)
        shown.append(path)
    plt.close("all")
plt.show = show
import course
assert os.path.dirname(os.path.dirname(course.__file__)) == os.getcwd(), course.__file__
for source in json.load(open(sys.argv[2])):
    exec(compile(source, "<cell>", "exec"), globals())
'''


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_translated_chapters_plots_write_nothing_to_stderr(lang, tmp_path):
    """Chapter 01 up to its bandwidth sweep, in a copy of its folder: its own `course` registers the font."""
    chapter = find_chapter("01").edition(lang)
    folder = tmp_path / chapter.assignment
    shutil.copytree(chapter.course_dir, folder, ignore=shutil.ignore_patterns("__pycache__"))
    cells = []
    for cell in samples.reference(chapter).cells:
        if cell.cell_type == "code":
            cells.append("\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("%")))
            if "带宽 h" in cell.source:
                break
    assert re.search(r"[\u4e00-\u9fff]", cells[-1]), "the last cell run draws Chinese labels"
    (tmp_path / "cells.json").write_text(json.dumps(cells))
    out = tmp_path / "plots"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MPLBACKEND")}
    # -c: the folder (the working directory) comes first on sys.path, so its own `course` is imported
    proc = subprocess.run([sys.executable, "-c", RUN_CELLS, str(out), str(tmp_path / "cells.json")],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == "", proc.stderr[-3000:]
    assert len(list(out.glob("*.png"))) >= 3

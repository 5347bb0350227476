"""Labels a translated chapter quotes (grader.authoring.labels): a question that asks about "the
“scaled” curve" must name a curve the plot of its edition draws (issue 39)."""
import shutil

import pytest

from grader.authoring import i18n, labels
from grader.authoring.build import build_source_notebook
from grader.chapters import CHAPTERS, LANGUAGES, find_chapter


def _cases():
    for lang in LANGUAGES:
        for chapter in CHAPTERS:
            yield pytest.param(chapter, lang, id=f"{lang}-{chapter.assignment}")


@pytest.mark.parametrize("chapter, lang", _cases())
def test_every_quoted_label_is_one_the_edition_shows(chapter, lang):
    found = labels.problems(chapter, lang, build_source_notebook(chapter))
    assert found == [], "\n".join(found)


def test_a_label_left_in_english_is_named(tmp_path, monkeypatch):
    # 02's written question 1 as it was: the Chinese asked about the "scaled" curve of a plot whose
    # legend says 缩放 / 不缩放
    shutil.copytree(i18n.CATALOGUES, tmp_path / "i18n")
    monkeypatch.setattr(i18n, "CATALOGUES", tmp_path / "i18n")
    chapter = find_chapter("02")
    path = i18n.catalogue_path(chapter, "zh")
    text = path.read_text(encoding="utf-8")
    assert text.count("中间那幅图中的“缩放”曲线") == 1
    path.write_text(text.replace("中间那幅图中的“缩放”曲线", "中间那幅图中的“scaled”曲线"), encoding="utf-8")
    (line,) = labels.problems(chapter, "zh", build_source_notebook(chapter))
    assert line.startswith("02_self_attention (zh) markdown cell") and "['scaled']" in line
    assert "does not show" in line


def test_what_an_edition_shows_spells_out_conditional_fstrings():
    # 05 names its runs f"{'Pre' if norm_first else 'Post'}-LN, {'with' if warmup else 'no'} warm-up"
    chapter = find_chapter("05")
    english = build_source_notebook(chapter)
    ours = labels.shown(chapter, english)
    theirs = labels.shown(chapter.edition("zh"), i18n.translate(english, chapter.edition("zh"), "zh"))
    assert ours.has("Post-LN, no warm-up") and ours.has("Pre-LN, with warm-up")
    assert theirs.has("Post-LN，无预热") and not theirs.has("Post-LN, no warm-up")
    assert not ours.has("Post-LN, some warm-up")


def test_code_is_not_a_label():
    text = ('`mask` and `dim=-1, keepdim=True` are code; `head 0` is a label, so are “缩放” and "Post-LN, '
            "no\nwarm-up\", and 'scaled'; Luong's \"general\" score\n- **4 kv heads**: a row")
    assert labels.quotes(text) == ["head 0", "缩放", "Post-LN, no warm-up", "scaled", "general"]
    assert labels.named(text) == ["4 kv heads"]

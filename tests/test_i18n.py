"""The Chinese edition (grader.authoring.i18n): every unit of every chapter translated and up to
date, an edited English unit going out of date by name, translations that cannot change code, and
the Chinese release graded by the same hidden tests as the English one."""

import nbformat
import polib
import pytest

from grader.authoring import i18n, samples
from grader.authoring.build import build_source_notebook
from grader.chapters import CHAPTERS, LANGUAGES, find_chapter
from grader.classroom.grading.batch import grade_paths

CHAPTER = find_chapter("05")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_unit_of_every_chapter_is_translated(lang):
    problems = [line for chapter in CHAPTERS for line in i18n.problems(chapter, lang, build_source_notebook(chapter))]
    problems += i18n.problems(i18n.COMMON, lang, None)  # the messages the chapters share
    for catalogue in i18n.feedback_catalogues(list(CHAPTERS)):  # the graded feedback's texts
        problems += i18n.problems(catalogue, lang, None)
    assert problems == [], "\n".join(problems[:20]) + \
        "\n(edit the catalogues; guides/maintaining.md: The Chinese edition)"


def test_an_edited_english_unit_goes_out_of_date_by_name(scratch_catalogues):
    nb = build_source_notebook(CHAPTER)
    at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## 2."))
    old = nb.cells[at].source
    nb.cells[at].source = old.replace("Deep networks", "Very deep networks", 1)
    assert nb.cells[at].source != old
    catalogue, counts = i18n.update(CHAPTER, "zh", nb)
    assert counts["fuzzy"] == 1 and counts["new"] == 0
    (entry,) = [e for e in catalogue if "fuzzy" in e.flags]
    assert entry.previous_msgid == old and entry.msgid == nb.cells[at].source and entry.msgstr
    i18n.save(catalogue, i18n.catalogue_path(CHAPTER, "zh"))
    (line,) = i18n.problems(CHAPTER, "zh", nb)
    assert line.startswith(f"05_add_and_norm (zh) markdown cell {at} «## 2.") and "out of date" in line
    with pytest.raises(i18n.IncompleteTranslation, match="out of date"):
        i18n.translate(nb, CHAPTER, "zh")


def test_a_new_unit_is_missing_and_blank_lines_do_not_count(scratch_catalogues):
    nb = build_source_notebook(CHAPTER)
    nb.cells[0].source = "\n\n" + nb.cells[0].source + "\n"  # only blank lines: still translated
    nb.cells.insert(2, nbformat.v4.new_markdown_cell("A paragraph nobody has translated yet."))
    (line,) = i18n.problems(CHAPTER, "zh", nb)
    assert "markdown cell 2 «A paragraph nobody" in line and "not in i18n/zh/05_add_and_norm.po" in line


def test_a_code_translation_may_change_strings_and_comments_only(scratch_catalogues):
    nb = build_source_notebook(CHAPTER)
    path = i18n.catalogue_path(CHAPTER, "zh")
    catalogue = polib.pofile(str(path), wrapwidth=0)
    entry = next(e for e in catalogue if e.comment.startswith("code:") and "print(" in e.msgstr)
    entry.msgstr = entry.msgstr.replace("print(", "len(", 1)
    catalogue.save(str(path))
    (line,) = i18n.problems(CHAPTER, "zh", nb)
    assert "changes the code" in line


def test_a_translated_notebook_keeps_code_grade_ids_and_tests():
    english = build_source_notebook(CHAPTER)
    chinese = i18n.translate(english, CHAPTER, "zh")
    assert chinese.metadata["course_edition"] == "zh"
    assert len(chinese.cells) == len(english.cells)
    changed = 0
    for en, zh in zip(english.cells, chinese.cells):
        assert (en.cell_type, en.metadata) == (zh.cell_type, zh.metadata)
        changed += en.source != zh.source
        if en.cell_type == "code" and en.metadata.get("nbgrader", {}).get("solution"):
            # only the docstrings differ: the code between them is the reference's, byte for byte
            assert i18n._strings_blanked(en.source) == i18n._strings_blanked(zh.source)
            assert "### BEGIN SOLUTION" in zh.source
        if en.cell_type == "code" and en.metadata.get("nbgrader", {}).get("grade"):
            assert "run_checks(" in zh.source and "隐藏测试" in zh.source
    assert changed > len(english.cells) // 2


def test_every_chinese_release_grades_like_the_english_one(tmp_path):
    # The same hidden tests: the reference filled into the Chinese release gets full marks, the
    # untouched Chinese release 0, and neither needs a repair (its cells match its own edition).
    paths = []
    for chapter in CHAPTERS:
        edition = chapter.edition("zh")
        for kind, nb in (("reference", samples.reference(edition)), ("release", samples.released(edition))):
            folder = tmp_path / kind / chapter.assignment
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / chapter.notebook_name)
            paths.append(str(folder / chapter.notebook_name))
    results = grade_paths(paths, jobs=2, timeout=300)
    for result in results:
        assert not result.get("error") and not result.get("repairs"), result
    by_kind = {}
    for path, result in zip(paths, results):
        by_kind.setdefault("reference" if "/reference/" in path else "release", []).append(result)
    short = [(r["notebook"].rsplit("/", 1)[-1], r["score"],
              {gid: t["error"] for gid, t in r["tests"].items() if t["score"] < t["max_score"]})
             for r in by_kind["reference"]]
    assert all(r["score"] == sum(t["max_score"] for t in r["tests"].values()) > 0  # written answers: pending
               for r in by_kind["reference"]), [entry for entry in short if entry[2]]
    assert all(r["score"] == 0 for r in by_kind["release"]), by_kind["release"]


def test_a_class_mixing_editions_is_graded_with_feedback_in_each(tmp_path):
    # One assignment, two editions: each learner's cells are checked against their own edition's
    # release (no repairs), the gradebook holds both, and each feedback is in the learner's language.
    from nbgrader.api import Gradebook

    from grader.classroom.grading.batch import autograde_class

    inbox = tmp_path / "inbox"
    for student, edition in (("ada", CHAPTER.edition("zh")), ("ben", CHAPTER)):
        folder = inbox / student / CHAPTER.assignment
        folder.mkdir(parents=True)
        nbformat.write(samples.reference(edition), folder / CHAPTER.notebook_name)
    course = tmp_path / "course"
    autograde_class(inbox, course, jobs=2, timeout=120, chapters=[CHAPTER], progress=False)
    notes = (course / "grading-notes.json").read_text()
    assert "restored" not in notes and "repaired" not in notes
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in ("ada", "ben"):
            sub = gradebook.find_submission(CHAPTER.assignment, student)
            assert sub.score == 15, (student, sub.score)  # the automatic part: 21 less 6 to grade by hand
    feedback = {s: (course / "feedback" / s / CHAPTER.assignment / "add_and_norm.html").read_text()
                for s in ("ada", "ben")}
    assert "层归一化" in feedback["ada"] and "层归一化" not in feedback["ben"]

"""Graded feedback in the learner's language (grader.classroom.phrasebook): the hidden checks' names and
messages and the report's words translated on the trusted side, messages composed of a shared helper's
template and a check's label translated as a whole, the learner's own text left alone, an edited check
going out of date by name, and none of it in a release folder."""
import shutil

import nbformat
import polib
import pytest

from grader.authoring import i18n, samples
from grader.boundary.specs import exercises
from grader.chapters import CHAPTERS, find_chapter
from grader.classroom import phrasebook
from grader.classroom.phrasebook import Phrasebook, Template
from tests.helpers import english_left

CHAPTER = find_chapter("02")
CJK = ("\u4e00", "\u9fff")


def has_chinese(text: str) -> bool:
    return any(CJK[0] <= ch <= CJK[1] for ch in text)


BOOK = Phrasebook({
    "{what} has shape {1}, expected {2}": "{what} 的形状是 {1}，应为 {2}",
    "the attention weights": "注意力权重",
    "the gradient of {name}": "{name} 的梯度",
    "{1}: {err} (line {line})": "{1}: {err}（第 {line} 行）",
    "  FAIL  {check}: {why}": "  未通过  {check}：{why}",
    "[{size:.1f} MB dropped]": "[已丢弃 {size:.1f} MB]",
})


def test_a_message_and_the_label_inside_it_are_translated_together():
    said = BOOK.text("the attention weights has shape (2, 3), expected (3, 2)")
    assert said == "注意力权重的形状是 (2, 3)，应为 (3, 2)"
    assert BOOK.text("the gradient of W_q has shape (4,), expected (5,)") == "W_q 的梯度的形状是 (4,)，应为 (5,)"


def test_the_outer_template_wins():
    # a shared helper's message holding the detail of another: the one with the label is the outer one
    book = Phrasebook({"{what} has wrong values: {1}": "{what} 的值不对：{1}",
                       "{1} of {2} values differ": "{2} 个值中有 {1} 个不同",
                       "apply_rope(x, offset={offset})": "apply_rope(x, offset={offset})",
                       "the output of {name}": "{name} 的输出"})
    said = book.text("the output of f has wrong values: 3 of 6 values differ")
    assert said == "f 的输出的值不对：6 个值中有 3 个不同"
    said = book.text("apply_rope(x, offset=6) has wrong values: 1 of 2 values differ")
    assert said == "apply_rope(x, offset=6) 的值不对：2 个值中有 1 个不同"
    book.table["{name} {what}"] = "{what}{name}"
    assert Phrasebook(book.table).text("the output of f has wrong values: 3 of 6 values differ") == (
        "f 的输出的值不对：6 个值中有 3 个不同")  # a template of fields alone never matches


def test_what_no_template_matches_stays_as_it_is():
    # the learner's exception text inside a matched template, and a message no template knows
    said = BOOK.text("ValueError: shapes {a} and {b} (4 vs 5) (line 7)")
    assert said == "ValueError: shapes {a} and {b} (4 vs 5)（第 7 行）"
    assert BOOK.text("an unknown message") == "an unknown message"
    assert Phrasebook({}).text("the attention weights") == "the attention weights"


def test_a_template_matches_only_its_whole_text():
    template = Template.of("{what} has shape {1}, expected {2}", "")
    assert template.match("x has shape (2,), expected (3,)") == {"what": "x", "1": "(2,)", "2": "(3,)"}
    assert template.match("x has shape (2,), expected (3,) and more words") is not None  # the last field takes the rest
    assert template.match("x has shape , expected (3,)") == {"what": "x", "1": "", "2": "(3,)"}  # an empty message
    assert template.match("has shape (2,), expected (3,)") is None
    assert Template.of("{1}{2} apart", "").match("ab apart") is None  # two fields side by side: not matched


def test_say_fills_a_marked_template_and_keeps_a_format():
    said = BOOK.say("  FAIL  {check}: {why}", check="a check", why="the attention weights")
    assert said == "  未通过  a check：注意力权重"
    assert BOOK.say("[{size:.1f} MB dropped]", size=3.14159) == "[已丢弃 3.1 MB]"
    assert phrasebook.phrasebook("en").say("[{size:.1f} MB dropped]", size=3.14159) == "[3.1 MB dropped]"


def test_a_translation_must_keep_the_fields():
    assert phrasebook.field_problem("{what} has shape {1}", "{what} 的形状") is not None
    assert phrasebook.field_problem("{what} has shape {1}", "形状 {1}：{what}") is None
    assert phrasebook.field_problem("[{size:.1f} MB]", "[{size:.1f} 兆字节]") is None


def test_every_check_name_and_hidden_message_is_a_unit():
    # the names of every chapter's checks; messages of the checks and of their shared helpers
    for chapter in CHAPTERS:
        texts = {text for _, _, text in phrasebook.units(chapter.assignment)}
        names = {check.description.replace("{", "{{").replace("}", "}}")
                 for spec in exercises(chapter.name).values() for check in spec.checks}
        assert names <= texts, (chapter.assignment, sorted(names - texts)[:3])
    common = {text for _, _, text in phrasebook.units(phrasebook.COMMON)}
    assert {"{what} has shape {1}, expected {2}", "  FAIL  {check}: {why}", "not implemented yet",
            "[not re-run while grading: no score depends on this cell; {what}]\n"} <= common
    softmax = {text for _, _, text in phrasebook.units(CHAPTER.assignment)}
    assert "inputs around 1e4 gave inf or nan: exp overflows unless you subtract the max" in softmax
    assert not any("Args:" in text for text in softmax)  # docstrings are not feedback


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    shutil.copytree(i18n.CATALOGUES, tmp_path / "i18n")
    monkeypatch.setattr(i18n, "CATALOGUES", tmp_path / "i18n")
    specs = tmp_path / "specs"
    shutil.copytree(phrasebook.SPECS, specs)
    monkeypatch.setattr(phrasebook, "SPECS", specs)
    monkeypatch.setattr(phrasebook, "REPO", tmp_path)
    phrasebook._found.cache_clear()
    yield specs
    phrasebook._found.cache_clear()


def test_an_edited_check_goes_out_of_date_by_name(scratch):
    catalogue = i18n.Feedback(CHAPTER.assignment)
    old = "matches torch.softmax along the last axis by default"
    po = polib.pofile(str(i18n.catalogue_path(catalogue, "zh")), wrapwidth=0)
    po.find(old).msgstr = "默认沿最后一个轴与 torch.softmax 一致"
    po.save()
    path = scratch / "self_attention.py"
    path.write_text(path.read_text().replace(old, "matches torch.softmax along the last axis when dim is not given"))
    updated, counts = i18n.update(catalogue, "zh", None)
    assert counts["fuzzy"] == 1 and counts["new"] == 0, counts
    i18n.save(updated, i18n.catalogue_path(catalogue, "zh"))
    (line,) = [line for line in i18n.problems(catalogue, "zh", None) if "out of date" in line]
    assert line.startswith("feedback/02_self_attention (zh) check specs/self_attention.py:")
    assert "«matches torch.softmax along the last axis when" in line


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.assignment for c in CHAPTERS])
def test_no_release_folder_carries_the_hidden_checks_words(chapter):
    # what a learner downloads holds neither the feedback catalogues nor the checks' names
    names = [c.description for spec in exercises(chapter.name).values() for c in spec.checks
             if len(c.description) > 40]
    assert names
    for edition in (chapter, chapter.edition("zh")):
        for folder in (edition.course_dir, edition.source_dir):
            for path in folder.rglob("*"):
                if path.is_file() and path.suffix in (".json", ".py", ".ipynb", ".po", ".mo", ".txt"):
                    text = path.read_text(encoding="utf-8", errors="replace")
                    assert not any(name in text for name in names), path
                    assert "feedback/" not in path.as_posix()


def test_a_chinese_notebook_gets_its_feedback_in_chinese(tmp_path):
    # Two mistakes in a Chinese chapter 02 notebook, graded as a class: every line of every test cell's
    # report is Chinese, and the English notebook beside it keeps English feedback.
    from grader.classroom.grading.batch import autograde_class

    inbox = tmp_path / "inbox"
    for student, edition in (("ada", CHAPTER.edition("zh")), ("ben", CHAPTER)):
        folder = inbox / student / CHAPTER.assignment
        folder.mkdir(parents=True)
        nbformat.write(samples.partly_wrong(edition, mistakes=2), folder / CHAPTER.notebook_name)
    course = tmp_path / "course"
    autograde_class(inbox, course, jobs=2, timeout=120, chapters=[CHAPTER], progress=False)
    reports = {}
    for student in ("ada", "ben"):
        graded = nbformat.read(course / "autograded" / student / CHAPTER.assignment / CHAPTER.notebook_name, 4)
        reports[student] = "".join(out.get("text", "") for cell in graded.cells
                                   if cell.metadata.get("nbgrader", {}).get("grade") and cell.cell_type == "code"
                                   for out in cell.outputs if out.get("output_type") == "stream")
    lines = [ln for ln in reports["ada"].splitlines() if ln.strip()]
    assert any("未通过" in ln for ln in lines) and any("通过" in ln for ln in lines)
    assert all(has_chinese(ln) for ln in lines), [ln for ln in lines if not has_chinese(ln)]
    assert english_left(reports["ada"], CHAPTER.assignment) == []
    assert "FAIL" in reports["ben"] and not has_chinese(reports["ben"])
    assert len(english_left(reports["ben"], CHAPTER.assignment)) > 10
    # the page around the report, the test cells' line and the release's stubs: Chinese as well
    feedback = (course / "feedback" / "ada" / CHAPTER.assignment / "self_attention.html").read_text()
    assert "未通过" in feedback and "隐藏测试在这里运行" in feedback and "在此写下你的回答" in feedback
    for english in ("Student's answer", "Grade cell:", "(Score:", "Hidden tests for", "YOUR ANSWER HERE",
                    "YOUR CODE HERE", "not re-run while grading"):
        assert english not in feedback, english
    assert "Student's answer" in (course / "feedback" / "ben" / CHAPTER.assignment / "self_attention.html").read_text()
    # a written answer left as released is unanswered (0 points) in both editions, never pending
    from nbgrader.api import Gradebook

    from grader.classroom.grades.total import UNANSWERED, chapter_total

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in ("ada", "ben"):
            total = chapter_total(gb, student, CHAPTER.assignment)
            states = {p.name: p.state for p in total.parts if p.name.startswith("written_")}
            assert states and set(states.values()) == {UNANSWERED}, (student, states)
            assert total.complete


def test_the_grade_table_of_a_chinese_notebook_is_chinese(tmp_path):
    # `grader grade` on a Chinese notebook saved under another name, two written answers (one pending, one
    # left blank) and a check off by its tolerance: the table's own words in Chinese, none of them English.
    from grader.classroom.grading.batch import _cell_error, format_table
    from grader.classroom.grading.recording import checks_of, test_outputs
    from grader.classroom.submissions import identify_with_rule, repair

    path = tmp_path / "homework.ipynb"
    nb = samples.reference(CHAPTER.edition("zh"))
    nbformat.write(nb, path)
    _, recognised = identify_with_rule(path)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "softmax"]
    _, repairs = repair(nb, samples.released(CHAPTER.edition("zh")))
    checks = [c.description for c in exercises(CHAPTER.name)["softmax"].checks]
    off = "the output has wrong values: 3 of 12 values differ, the most by 0.5 at index (0, 1) " \
          "(allowed: 0 + 0 * |expected|)"
    error = _cell_error(test_outputs(checks_of(CHAPTER)["softmax"], "softmax", 2.0,
                                     {"passed": checks[1:], "failed": [[checks[0], off]]}, None,
                                     phrasebook.phrasebook("zh", CHAPTER.assignment)))
    result = {"notebook": str(path), "score": 1.6, "max_score": 14.0, "complete": False, "lang": "zh",
              "repairs": [recognised, *repairs], "tests": {"test_softmax": {"score": 1.6, "max_score": 2.0,
                                                                             "error": error}},
              "written": {"written_p": {"score": None, "max_score": 2.0, "state": "pending"},
                          "written_q": {"score": 0.0, "max_score": 2.0, "state": "unanswered"}}}
    table = format_table([result])
    assert repairs and "homework.ipynb" in table and "|期望值|" in table, table
    assert english_left(table, CHAPTER.assignment) == [], table
    for english in ("so far", "pending", "written answer", "repaired", "recognised", "restored", "|expected|"):
        assert english not in table, (english, table)
    assert all(has_chinese(line) for line in table.splitlines()), table
    assert "so far (written answers pending)" in format_table([{**result, "lang": "en"}])

"""The public checks' and helpers' messages in a translated chapter folder (course.tr, grader.authoring.messages):
a Chinese folder's check speaks Chinese, an English folder's exactly the English of the repository's,
a missing or broken messages file means English, and a translation must keep its template's fields."""
import ast
import json
import re
import shutil
import subprocess
import sys

import polib
import pytest

import course
from course.checks import CheckFailed
from grader.authoring import i18n, messages
from grader.chapters import CHAPTERS, find_chapter

CHAPTER = find_chapter("02")
# Run one public check the way a learner's kernel does: in the chapter folder, whose `course` comes first.
RUN_CHECK = """
import importlib, linecache, sys
folder, name, exercise = sys.argv[1:4]
source = sys.stdin.read()
sys.path.insert(0, folder)
linecache.cache["<cell>"] = (len(source), None, source.splitlines(True), "<cell>")
namespace = {"__name__": "submission"}
exec(compile(source, "<cell>", "exec"), namespace)
import course
assert course.__file__.startswith(folder), course.__file__
try:
    getattr(importlib.import_module(f"course.checks.{name}"), f"check_{exercise}")(namespace[exercise])
except AssertionError as err:
    print(f"{type(err).__name__}: {err}")
"""
PRELUDE = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def catalogued(chapter, label):
    catalogue = __import__(f"tests.catalogue.{chapter.name}", fromlist=["WRONG"])
    (entry,) = [v for v in catalogue.WRONG if v.label == label]
    return entry


def run_check(folder, chapter, exercise, source):
    """What the public check prints (or the error it ends with), run in `folder` on `source`."""
    done = subprocess.run([sys.executable, "-c", RUN_CHECK, str(folder), chapter.name, exercise],
                          input=PRELUDE + source, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def in_process(chapter, exercise, source):
    """The same check with the repository's `course` (no messages file: English)."""
    namespace = {"__name__": "submission"}
    exec(compile(PRELUDE + source, "<cell>", "exec"), namespace)
    check = getattr(__import__(f"course.checks.{chapter.name}", fromlist=["x"]), f"check_{exercise}")
    try:
        check(namespace[exercise])
    except CheckFailed as err:
        return f"{type(err).__name__}: {err}"
    return "passed"


@pytest.fixture
def folder(tmp_path):
    """A copy of chapter 02's Chinese folder, which a test may break."""
    return shutil.copytree(CHAPTER.edition("zh").course_dir, tmp_path / CHAPTER.assignment,
                           ignore=shutil.ignore_patterns("__pycache__"))


MISTAKE = ("softmax", "sums over the last axis whatever dim is")
SKELETON = "def softmax(x, dim=-1):\n    raise NotImplementedError\n"


def test_a_chinese_folder_names_the_mistake_in_chinese_and_passes_in_chinese(folder):
    exercise, label = MISTAKE
    wrong = run_check(folder, CHAPTER, exercise, catalogued(CHAPTER, label).source)
    assert wrong.startswith("CheckFailed: softmax(x, dim=0) 的每一列之和都应为 1，但各列之和为 ["), wrong
    right = run_check(folder, CHAPTER, exercise, CHAPTER.solutions_file.read_text())
    assert right == "✅ softmax：公开检查通过。隐藏测试会检查更多情况。"
    unwritten = run_check(folder, CHAPTER, exercise, SKELETON)
    assert unwritten == "NotWrittenYet: 尚未实现：请先在上方写好 `softmax`，运行它所在的单元格，再重新运行这个检查"


def test_an_english_folder_prints_exactly_the_english(tmp_path):
    folder = shutil.copytree(CHAPTER.course_dir, tmp_path / "en", ignore=shutil.ignore_patterns("__pycache__"))
    assert not (folder / messages.MESSAGES_FILE).exists()
    exercise, label = MISTAKE
    source = catalogued(CHAPTER, label).source
    english = in_process(CHAPTER, exercise, source)
    assert "should sum to 1 down each column" in english
    assert run_check(folder, CHAPTER, exercise, source) == english
    right = run_check(folder, CHAPTER, exercise, CHAPTER.solutions_file.read_text())
    assert right == "✅ softmax: the public checks pass. The hidden tests check more cases."


@pytest.mark.parametrize("damage", ["missing", "not json", "no messages", "wrong fields"])
def test_a_missing_or_broken_messages_file_means_english(folder, damage):
    path = folder / messages.MESSAGES_FILE
    if damage == "missing":
        path.unlink()
    elif damage == "not json":
        path.write_text('{"lang": "zh", "messages": {"✅ {name}', encoding="utf-8")
    elif damage == "no messages":
        path.write_text('{"lang": "zh", "messages": ["not", "a", "table"]}', encoding="utf-8")
    else:
        content = json.loads(path.read_text(encoding="utf-8"))
        content["messages"] = {k: v.replace("{name}", "{nom}") for k, v in content["messages"].items()}
        path.write_text(json.dumps(content, ensure_ascii=False), encoding="utf-8")
    right = run_check(folder, CHAPTER, "softmax", CHAPTER.solutions_file.read_text())
    assert right == "✅ softmax: the public checks pass. The hidden tests check more cases."


@pytest.fixture
def messages_here(tmp_path, monkeypatch):
    """course.tr reading a messages file written by the test (the repository has none)."""
    monkeypatch.setattr(course, "__file__", str(tmp_path / "__init__.py"))
    monkeypatch.setattr(course, "_messages", None)

    def write(table):
        (tmp_path / course.MESSAGES_FILE).write_text(json.dumps({"lang": "zh", "messages": table}), encoding="utf-8")
    return write


def test_tr_formats_the_translation_and_joins_chinese_values(messages_here):
    messages_here({"the output": "输出", "{what} has shape {shape}; expected {expected}":
                   "{what} 的形状是 {shape}，应为 {expected}"})
    shape = "{what} has shape {shape}; expected {expected}"
    chinese = course.tr(shape, what=course.tr("the output"), shape=(2, 3), expected=(3,))
    assert chinese == "输出的形状是 (2, 3)，应为 (3,)"
    assert course.tr(shape, what="f(x)", shape=(2, 3), expected=(3,)) == "f(x) 的形状是 (2, 3)，应为 (3,)"
    assert course.tr("not in the table: {x!r}", x="a") == "not in the table: 'a'"


def test_tr_is_english_without_a_messages_file(tmp_path, monkeypatch):
    monkeypatch.setattr(course, "__file__", str(tmp_path / "__init__.py"))
    monkeypatch.setattr(course, "_messages", None)
    assert course.tr("{what} has shape {shape}", what="x", shape=(1,)) == "x has shape (1,)"


def test_the_repository_has_no_messages_file():
    assert not (messages.COURSE / course.MESSAGES_FILE).exists()
    assert messages.MESSAGES_FILE == f"course/{course.MESSAGES_FILE}"


def test_a_translation_with_other_fields_is_refused(scratch_catalogues):
    path = i18n.catalogue_path(i18n.COMMON, "zh")
    catalogue = polib.pofile(str(path), wrapwidth=0)
    entry = next(e for e in catalogue if e.msgid == "{what} has shape {shape}; expected {expected}")
    entry.msgstr = "{what} 的形状是 {shape}，应为 {expect}"
    passed = next(e for e in catalogue if e.msgid.startswith("✅ {name}"))
    passed.msgstr = "✅ {name}：公开检查通过 {"
    catalogue.save(str(path))
    found = i18n.problems(i18n.COMMON, "zh", None)
    assert len(found) == 2, found
    assert any("«{what} has shape" in line and "the fields {expect}, {shape}, {what}; the English has {expected}, "
               "{shape}, {what}" in line for line in found), found
    assert any("«✅ {name}" in line and "not a format string" in line for line in found), found
    with pytest.raises(i18n.IncompleteTranslation, match="has shape"):
        i18n.messages_file(["course/checks/__init__.py"], "zh")


def test_a_new_message_is_missing_until_translated(scratch_catalogues, monkeypatch):
    real = messages.templates
    monkeypatch.setattr(messages, "templates", lambda module: real(module) + (
        [(f"{module}: fail", "a message nobody has translated, {x}")] if module == "course/checks/__init__.py" else []))
    (line,) = i18n.problems(i18n.COMMON, "zh", None)
    assert "common (zh) message course/checks/__init__.py: fail «a message nobody" in line and "not in" in line
    catalogue, counts = i18n.update(i18n.COMMON, "zh", None)
    assert counts["new"] == 1 and counts["fuzzy"] == 0


@pytest.mark.parametrize("call,why", [
    ('tr(f"got {x}")', "one string literal"),
    ("tr(hint)", "one string literal"),
    ('tr("got {x}")', "differ from the keywords"),
    ('tr("got {x}", x=1, y=2)', "differ from the keywords"),
    ('tr("got {x.shape}", x=1)', "each field is a keyword"),
    ('tr("got {0}", 1)', "one string literal"),
    ('tr("got {x", x=1)', "not a format string"),
])
def test_a_template_must_be_a_literal_whose_fields_are_its_keywords(call, why):
    with pytest.raises(ValueError, match=why):
        messages._template(ast.parse(call).body[0].value, "here")


def test_each_message_belongs_to_its_chapter_or_to_common():
    assert messages.owner("course/checks/self_attention.py") == "02_self_attention"
    assert messages.owner("course/toolkit/decoder_masking.py") == "06_decoder_masking"
    assert messages.owner("course/checks/__init__.py") == messages.owner("course/toolkit/addition.py") == "common"
    every = [m for c in [*(c.assignment for c in CHAPTERS), "common"] for m in messages.owned(c)]
    assert len(every) == sum(len(messages.templates(m)) for m in messages.course_modules())


# What a learner reads must go through tr: every prose literal of the public checks, and whatever the
# helpers print or raise. Left in English on purpose: data and an author's error.
PROSE = re.compile(r"[A-Za-z]{2,} [A-Za-z]+|[A-Za-z]+ [A-Za-z]{2,}")
NOT_MESSAGES = {
    "@public_check goes on a function named check_<exercise>, not {}",  # the author's mistake, at import
    "cdab cdab",  # a BPE check's training text
    "a word appears twice in the vocabulary",  # the toolkit's own consistency check
    "unknown sentence kind {}",  # internal: the corpus generator's kinds
}


def _literal_text(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _untranslated(path, everything: bool):
    """Prose literals of a module outside tr(): all of them (everything) or what print() and raise carry."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip, shown = set(), set()  # skip: docstrings, tr()'s templates, an f-string's parts (it is judged whole)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            skip.add(id(node.body[0].value))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tr":
            skip |= {id(n) for arg in node.args for n in ast.walk(arg)}
        elif isinstance(node, ast.JoinedStr):
            skip |= {id(n) for value in node.values for n in ast.walk(value)}
        if isinstance(node, ast.Raise) or isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
            shown |= {id(n) for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        text = _literal_text(node)
        if text is None or id(node) in skip or text in NOT_MESSAGES:
            continue
        if (everything or id(node) in shown) and PROSE.search(text):
            found.append(f"{path.relative_to(messages.REPO)}:{node.lineno}: {text[:80]!r}")
    return found


def test_what_a_learner_reads_goes_through_tr():
    course_dir = messages.COURSE
    found = [line for path in sorted((course_dir / "checks").glob("*.py")) for line in _untranslated(path, True)]
    found += [line for path in [course_dir / "__init__.py", *sorted((course_dir / "toolkit").glob("*.py"))]
              for line in _untranslated(path, False)]
    assert found == [], "write these as tr(\"template\", field=value) " \
        "(guides/maintaining.md: The Chinese edition):\n" + \
        "\n".join(found)

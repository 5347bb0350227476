"""The nbgrader source folders are generated, not committed (grader.sources): which are stale, built
where a command reads them, and written into a class's course directory by `grader build --course-dir`."""
import json
import shutil

import pytest

from grader import cli, sources
from grader.authoring import build
from grader.chapters import CHAPTERS, REPO, Chapter
from grader.cli.common import ready_sources
from grader.coursedir import CourseDir

CHAPTER = CHAPTERS[0]


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """Source folders under tmp_path instead of grader/ (the repository's stay as the build left them)."""
    real = Chapter.source_dir
    folders = tmp_path / "grader"
    monkeypatch.setattr(Chapter, "source_dir",
                        property(lambda self: folders / real.fget(self).parent.name / self.assignment))
    return folders


def test_the_digest_follows_the_inputs_and_nothing_generated(tmp_path):
    for rel in ("chapters/01_x/x.md", "course/checks/x.py", "grader/authoring/x.py",
                f"course/{CHAPTER.assignment}/course/checks/x.py", "course/zh/01_x/x.ipynb",
                "grader/source/01_x/x.ipynb", "grader/source-zh/01_x/x.ipynb"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("one")
    first = sources.inputs_digest(tmp_path)
    for generated in (f"course/{CHAPTER.assignment}/course/checks/x.py", "course/zh/01_x/x.ipynb",
                      "grader/source/01_x/x.ipynb", "grader/source-zh/01_x/x.ipynb",
                      "grader/authoring/__pycache__/x.cpython-311.pyc"):
        (tmp_path / generated).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / generated).write_text("two")
    assert sources.inputs_digest(tmp_path) == first
    for authored in ("chapters/01_x/x.md", "course/checks/x.py", "grader/authoring/x.py"):
        (tmp_path / authored).write_text("changed")
        assert sources.inputs_digest(tmp_path) != first, authored
        (tmp_path / authored).write_text("one")
    assert sources.inputs_digest(tmp_path) == first


def test_a_folder_is_stale_until_built_from_these_inputs(elsewhere):
    english, chinese = sources.editions([CHAPTER])
    assert sources.stale([english, chinese], "d1") == [english, chinese]  # missing
    for edition in (english, chinese):
        edition.source_dir.mkdir(parents=True)
        edition.source_notebook.write_text("{}")
    assert sources.stale([english, chinese], "d1") == [english, chinese]  # there, but no stamp
    sources.record(english, "d1")
    assert sources.stale([english, chinese], "d1") == [chinese]
    assert sources.stale([english, chinese], "d2") == [english, chinese]  # an input changed since
    assert json.loads((elsewhere / "source" / sources.STAMP).read_text()) == {CHAPTER.assignment: "d1"}


def test_a_command_builds_a_missing_folder_once_and_says_so(elsewhere, capsys):
    real = (REPO / "grader" / "source" / CHAPTER.assignment / CHAPTER.notebook_name).read_text()  # make test built it
    ready_sources([CHAPTER])
    assert "grader: building 2 nbgrader source folder(s)" in capsys.readouterr().err
    assert CHAPTER.source_notebook.read_text() == real
    assert CHAPTER.edition("zh").source_notebook.is_file()
    ready_sources([CHAPTER])
    assert capsys.readouterr().err == ""  # fresh now: nothing built, nothing said
    shutil.rmtree(CHAPTER.edition("zh").source_dir)
    build.ensure([CHAPTER])
    assert "building 1 nbgrader source folder(s)" in capsys.readouterr().err


def test_a_course_directory_without_a_built_source_says_what_to_run(elsewhere, tmp_path):
    with pytest.raises(ValueError, match="run `grader build`"):
        CourseDir(tmp_path / "course", [CHAPTER])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_build_writes_the_source_folders_into_a_course_directory(tmp_path, lang, capsys):
    assert cli.main(["build", CHAPTER.number, "--course-dir", str(tmp_path), "--lang", lang]) == 0
    edition = CHAPTER.edition(lang)
    written = tmp_path / "source" / CHAPTER.assignment
    assert (written / CHAPTER.notebook_name).read_bytes() == edition.source_notebook.read_bytes()
    assert sorted(p.relative_to(written) for p in written.rglob("*") if p.is_file()) == \
        sorted(p.relative_to(edition.source_dir) for p in edition.source_dir.rglob("*") if p.is_file())
    assert "### BEGIN SOLUTION" in (written / CHAPTER.notebook_name).read_text()  # the source, not the release
    assert (tmp_path / "nbgrader_config.py").is_file()
    assert f"wrote: {written}" in capsys.readouterr().out


def test_build_check_fails_on_a_learner_folder_that_is_not_the_release(tmp_path, monkeypatch, capsys):
    copies = tmp_path / "course"
    for edition in sources.editions([CHAPTER]):
        shutil.copytree(edition.course_dir, copies / edition.lang / edition.assignment)
    monkeypatch.setattr(Chapter, "course_dir", property(lambda self: copies / self.lang / self.assignment))
    tampered = CHAPTER.edition("zh").course_notebook
    tampered.write_text(tampered.read_text().replace("raise NotImplementedError", "pass", 1))
    assert cli.main(["build", "--check", CHAPTER.number]) == 1
    assert f"differs from the nbgrader release: {tampered}" in capsys.readouterr().out


def test_releasing_every_chapter_at_once_refuses_a_course_holding_others(tmp_path):
    # CourseDir.release_every releases all of source/ in one nbgrader run (its glob): in a course directory
    # holding another chapter too, that would release what was not asked for.
    course = CourseDir(tmp_path / "course", CHAPTERS[:2])
    with pytest.raises(ValueError, match=r"it holds \['01_attention_intuition', '02_self_attention'\]"):
        course.release_every(CHAPTERS[:1])
    assert not (tmp_path / "course" / "release").exists()

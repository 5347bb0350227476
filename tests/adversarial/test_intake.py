"""Attacks on the batch route as a learner would make them (issue 35, sections 2 and 3): what a learner
writes reaches an LMS download, nbgrader's submitted/ folder, a timestamp.txt and the CSVs. Each test
failed on the code before grader.classroom.intake.safecopy / lms keyed by user id / csvsafe everywhere.
No sandbox run: these stop before grading (a staging with the release, as tests/test_batch_fuzz.py)."""
import csv
import os
import threading
import zipfile
from datetime import datetime, timezone
from types import SimpleNamespace

import nbformat
import pytest

from grader.authoring import samples
from grader.chapters import find_chapter
from grader.classroom.grades.export import Export, write, write_course_csv
from grader.classroom.grading.batch import stage
from grader.classroom.intake import lms
from grader.classroom.intake.collect import gather, keep_originals
from grader.classroom.intake.csvsafe import write_rows
from grader.classroom.submissions import submission_time

CHAPTER = find_chapter("02")


@pytest.fixture(scope="module")
def release():
    return samples.released(CHAPTER)


def zipped(path, files: dict) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        for name, nb in files.items():
            archive.writestr(name, nbformat.writes(nb))
    return path


# ---------------------------------------------------------------- LMS downloads: identity
def test_a_learner_who_takes_a_classmates_display_name_does_not_replace_their_work(tmp_path):
    # Canvas user 202 renames themselves "ada" and uploads a blank notebook later (a higher attachment
    # id): keyed by name, it replaced the real ada's (user 101) finished work.
    download = zipped(tmp_path / "d.zip", {
        "ada_101_5001_self_attention.ipynb": samples.reference(CHAPTER),
        "ada_202_5999_self_attention.ipynb": samples.released(CHAPTER)})
    found, notes = gather(download, tmp_path / "course")
    assert sorted(s.student for s in found) == ["101", "202"], notes
    assert any("shared name: 'ada'" in n for n in notes), notes
    real = next(s for s in found if s.student == "101")
    assert nbformat.read(real.path, as_version=4) == samples.reference(CHAPTER)


def test_two_learners_with_one_full_name_never_stop_the_batch(tmp_path):
    # Moodle gives no attachment id: two "Sam Lee"s of the same chapter stopped the whole download.
    flat = tmp_path / "moodle"
    flat.mkdir()
    nbformat.write(samples.reference(CHAPTER), flat / f"Sam Lee_31_assignsubmission_file_{CHAPTER.notebook_name}")
    nbformat.write(samples.released(CHAPTER), flat / f"Sam Lee_32_assignsubmission_file_{CHAPTER.notebook_name}")
    nbformat.write(samples.reference(CHAPTER), flat / f"Kim Ode_33_assignsubmission_file_{CHAPTER.notebook_name}")
    found, notes = gather(flat, tmp_path / "course")
    assert sorted(s.student for s in found) == ["31", "32", "33"], notes


def test_one_learners_two_indistinguishable_files_do_not_stop_the_class(tmp_path):
    # A learner uploads the same chapter twice under names that leave nothing to order them by:
    # that learner's files wait for the instructor; classmates are graded.
    download = zipped(tmp_path / "d.zip", {
        "eve_7_70_self_attention.ipynb": samples.released(CHAPTER),
        "eve_7_70_02_self_attention.ipynb": samples.released(CHAPTER),
        "ann_8_80_self_attention.ipynb": samples.reference(CHAPTER)})
    found, notes = gather(download, tmp_path / "course")
    assert [s.student for s in found] == ["8"]
    assert any("eve (user 7)" in n and "check by hand" in n for n in notes), notes


def test_a_display_name_that_is_a_path_or_a_formula_is_never_a_folder(tmp_path):
    # The name part of a file name is the learner's: it names no folder and reaches CSVs neutralised.
    download = zipped(tmp_path / "d.zip", {"=HYPERLINK(x)_9_90_self_attention.ipynb": samples.reference(CHAPTER)})
    found, notes = gather(download, tmp_path / "course")
    assert [s.student for s in found] == ["9"]
    rows = list(csv.reader((tmp_path / "course" / lms.LEARNERS).open()))
    assert rows[1] == ["9", "'=HYPERLINK(x)"]


# ---------------------------------------------------------------- the batch route: links, non-regular files, copies
def submitted_folder(course, student):
    folder = course / "submitted" / student / CHAPTER.assignment
    folder.mkdir(parents=True)
    return folder


def source_notebook(tmp_path):
    """The instructor's source notebook: solutions and hidden tests in place."""
    path = tmp_path / "source" / CHAPTER.notebook_name
    path.parent.mkdir(parents=True)
    path.write_text(CHAPTER.source_notebook.read_text())
    return path


def test_a_link_in_submitted_to_the_source_notebook_is_not_read(tmp_path, release):
    # After `nbgrader collect` the teaching guide's route grades ~/course/submitted: a link there to the
    # source notebook was copied as its content into originals/ and graded full marks.
    course = tmp_path / "course"
    submitted_folder(course, "mallory").joinpath(CHAPTER.notebook_name).symlink_to(source_notebook(tmp_path))
    found, _ = gather(course / "submitted", course)
    [sub] = found
    assert sub.error and "link" in sub.error
    assert not any(p.is_file() for p in (course / "originals").rglob("*.ipynb"))


def test_a_learner_folder_that_is_a_link_is_not_followed(tmp_path):
    # submitted/<student> itself a link to the instructor's source folder.
    course = tmp_path / "course"
    (course / "submitted").mkdir(parents=True)
    source_dir = source_notebook(tmp_path).parent.parent / "src"
    (source_dir / CHAPTER.assignment).mkdir(parents=True)
    (source_dir / CHAPTER.assignment / CHAPTER.notebook_name).write_text(CHAPTER.source_notebook.read_text())
    (course / "submitted" / "mallory").symlink_to(source_dir)
    found, _ = keep_originals(course.resolve())
    [sub] = found
    assert sub.error and "link" in sub.error


def test_a_named_pipe_in_submitted_does_not_stall_the_batch(tmp_path):
    course = tmp_path / "course"
    os.mkfifo(submitted_folder(course, "mallory") / CHAPTER.notebook_name)
    nbformat.write(samples.reference(CHAPTER), submitted_folder(course, "ben") / CHAPTER.notebook_name)
    result = {}
    worker = threading.Thread(target=lambda: result.update(found=keep_originals(course.resolve())[0]), daemon=True)
    worker.start()
    worker.join(30)
    if worker.is_alive():  # unblock the stalled copy so the test process can end
        with open(course / "submitted" / "mallory" / CHAPTER.assignment / CHAPTER.notebook_name, "wb"):
            pass
        pytest.fail("the copy of a named pipe stalled the batch")
    assert "found" in result, "the named pipe stopped the batch"
    mallory, ben = sorted(result["found"], key=lambda s: s.student)[::-1]
    assert "named pipe" in (mallory.error or "") and ben.error is None


def test_a_copy_of_the_source_notebook_is_an_alarm_not_a_score(tmp_path, release):
    # nbgrader collect itself follows a link in the exchange: submitted/ then holds a plain copy of the
    # source notebook. Its hidden-test markers give it away: reported, never scored.
    course = tmp_path / "course"
    copy = submitted_folder(course, "mallory") / CHAPTER.notebook_name
    copy.write_text(CHAPTER.source_notebook.read_text())
    [sub], _ = gather(course / "submitted", course)
    stage(SimpleNamespace(root=course), sub, {CHAPTER.assignment: release})
    assert sub.error and sub.error.startswith("ALARM") and "not scored" in sub.error


# ---------------------------------------------------------------- times a learner wrote
def test_a_timestamp_later_than_its_own_file_is_bounded(tmp_path):
    # timestamp.txt comes with the learner's submission: a time after the file was even written
    # (to look like a resubmission, or to order LMS files) is held to when the file appeared.
    folder = tmp_path / "ada" / CHAPTER.assignment
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text("2099-12-31 23:59:59.000000 UTC")
    when = submission_time(folder / CHAPTER.notebook_name, tmp_path / "ada")
    assert when <= datetime.now(timezone.utc)


@pytest.mark.parametrize("stamp", ["0001-01-01 00:00:00.000000 UTC", "1970-01-01 00:00:00.000000 UTC"])
def test_an_implausible_timestamp_is_unknown_not_on_time(tmp_path, stamp):
    # A year-1 or 1970 claim put every late submission on time; it is now refused, with the reason.
    folder = tmp_path / "ada" / CHAPTER.assignment
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text(stamp)
    with pytest.raises(ValueError, match="not a plausible submission time"):
        submission_time(folder / CHAPTER.notebook_name, tmp_path / "ada")


# ---------------------------------------------------------------- CSVs
@pytest.mark.parametrize("cell", [" =HYPERLINK(\"http://x\")", "\n=1+1", "\uff1dSUM(A1)", "\u3000@SUM(A1)"])
def test_formulas_behind_spaces_line_breaks_or_full_width_signs_are_neutralised(tmp_path, cell):
    write_rows(tmp_path / "x.csv", ["name"], [{"name": cell}])
    [row] = list(csv.DictReader((tmp_path / "x.csv").open(newline="")))
    assert row["name"] == "'" + cell


def test_grades_csv_and_the_lms_export_neutralise_learner_cells(tmp_path):
    student = SimpleNamespace(id="=cmd|'/c calc'!A1", last_name="+1", first_name="@x", email="-2")
    gb = SimpleNamespace(students=[student], assignments=[SimpleNamespace(name=CHAPTER.assignment, duedate=None,
                                                                          max_score=8.0, submissions=[])])
    write_course_csv(gb, tmp_path / "grades.csv")
    [row] = list(csv.DictReader((tmp_path / "grades.csv").open(newline="")))
    assert [row[k][0] for k in ("student_id", "last_name", "first_name", "email")] == ["'"] * 4
    write(Export(rows=[{"Student": "=1+1", "ID": "5"}], columns=["Student", "ID"]), tmp_path / "canvas.csv")
    assert (tmp_path / "canvas.csv").read_text().splitlines()[1].startswith("'=1+1")


def test_grader_collect_refuses_links_and_writes_its_own_time(tmp_path):
    # `grader collect` in place of `nbgrader collect`: the exchange's inbound folder as the learner left
    # it (a link to the source notebook, a forged timestamp) never reaches submitted/ as fact.
    from grader.classroom.intake.collect import collect
    from grader.coursedir import COURSE_ID

    inbound = tmp_path / "exchange" / COURSE_ID / "inbound"
    forged = "2000-01-01 00:00:00.000000 UTC"
    for student in ("mallory", "ben"):
        folder = inbound / f"{student}+{CHAPTER.assignment}+{forged}+x"
        folder.mkdir(parents=True)
        (folder / "timestamp.txt").write_text(forged)
        nbformat.write(samples.reference(CHAPTER), folder / CHAPTER.notebook_name)
    linked = inbound / f"mallory+{CHAPTER.assignment}+{forged}+x" / CHAPTER.notebook_name
    linked.unlink()
    linked.symlink_to(source_notebook(tmp_path))
    notes = collect(tmp_path / "exchange", tmp_path / "course", check_owner=False)  # owners: test_identity.py
    assert any(n.startswith("refused: mallory") and "link" in n for n in notes), notes
    assert not (tmp_path / "course" / "submitted" / "mallory").exists()
    ben = tmp_path / "course" / "submitted" / "ben" / CHAPTER.assignment
    assert submission_time(ben / CHAPTER.notebook_name, ben.parent) > datetime(2026, 1, 1, tzinfo=timezone.utc)

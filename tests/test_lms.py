"""The LMS path: `grader autograde` on a Canvas zip (a misnamed file, a file of no chapter, a late file
and one chapter sent twice), graded with real nbgrader; the Moodle and --pattern names; bad input."""
import csv
import zipfile

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.authoring import samples
from grader.boundary.specs import exercises
from grader.chapters import find_chapter
from grader.classroom.grading.batch import autograde_class
from grader.classroom.intake import lms
from grader.classroom.intake.collect import gather

ATTENTION, NORM = find_chapter("02"), find_chapter("05")


def total(chapter):
    return sum(ex.points for ex in exercises(chapter.name).values())


def canvas_download(path):
    """What Canvas's "Download Submissions" gives: `<login>[_LATE]_<user id>_<attachment id>_<file>`."""
    files = {
        "ada_101_5001_self_attention.ipynb": samples.reference(ATTENTION),
        "ada_101_5002_add_and_norm.ipynb": samples.released(NORM),  # then sent again, finished:
        "ada_101_5107_add_and_norm-1.ipynb": samples.reference(NORM),
        "ben_LATE_102_5003_self_attention.ipynb": samples.partly_wrong(ATTENTION, mistakes=1),
        "self_attention.ipynb": samples.reference(ATTENTION),  # no LMS prefix: whose is it?
        "cy_103_5004_my_homework.ipynb": samples.reference(NORM),  # renamed: told by its graded cells
        "dee_104_5005_notes.ipynb": nbformat.v4.new_notebook(),  # a learner, but which chapter?
    }
    with zipfile.ZipFile(path, "w") as archive:
        for name, nb in files.items():
            archive.writestr(name, nbformat.writes(nb))
    return path


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("lms")
    download = canvas_download(root / "submissions.zip")
    summary = autograde_class(download, root / "course", jobs=2, timeout=60, progress=False)
    return root, summary


def test_canvas_zip_is_graded_per_learner_and_chapter(graded):
    root, summary = graded
    with Gradebook(f"sqlite:///{root / 'course' / 'gradebook.db'}") as gb:
        scores = {(s.student.id, s.assignment.name): s.score for a in gb.assignments for s in a.submissions}
    # Each learner is their Canvas user id (ada is 101), never the name in the file name.
    assert set(scores) == {("101", ATTENTION.assignment), ("101", NORM.assignment), ("102", ATTENTION.assignment),
                           ("103", NORM.assignment)}, summary
    assert scores[("101", ATTENTION.assignment)] == pytest.approx(total(ATTENTION))
    # The later of ada's two add_and_norm files counts (the skeleton would score 0), and the summary says why.
    assert scores[("101", NORM.assignment)] == pytest.approx(total(NORM)), summary
    assert ("resubmitted: ada (user 101) 05_add_and_norm: ada_101_5107_add_and_norm-1.ipynb counts, resubmission "
            "number 1; ada_101_5002_add_and_norm.ipynb is not graded") in summary
    assert 0 < scores[("102", ATTENTION.assignment)] < total(ATTENTION)
    # Canvas's mark gives no time: the summary says the file is graded as on time and what a penalty needs.
    assert f"late: ben_LATE_102_5003_self_attention.ipynb: {lms.LATE_WITHOUT_TIME}" in summary
    assert "graded as on time" in lms.LATE_WITHOUT_TIME and "(?P<timestamp>" in lms.LATE_WITHOUT_TIME
    # Nothing is dropped silently: each file that is no one's chapter is named, with the reason.
    assert "unmatched: self_attention.ipynb: the name carries no learner" in summary
    assert "unmatched: dee_104_5005_notes.ipynb: learner 'dee', but notes.ipynb: cannot tell which chapter" in summary
    assert scores[("103", NORM.assignment)] == pytest.approx(total(NORM))
    assert ("recognised: cy_103_5004_my_homework.ipynb: my_homework.ipynb: recognised as chapter 05_add_and_norm "
            "by its graded cells") in summary
    rows = list(csv.DictReader((root / "course" / "grades.csv").open()))
    assert {(r["student_id"], r["assignment"]) for r in rows} >= set(scores)
    # Unpacked into one folder per learner in the course directory, under the chapter's notebook name.
    assert (root / "course" / "lms" / "101" / NORM.assignment / NORM.notebook_name).is_file()
    rows = csv.DictReader((root / "course" / lms.LEARNERS).open())
    assert {r["student_id"]: r["names in the download"] for r in rows} == {"101": "ada", "102": "ben", "103": "cy"}


def test_moodle_names_and_a_pattern(tmp_path):
    flat = tmp_path / "moodle"
    (flat / "Ada Lovelace_77_assignsubmission_file").mkdir(parents=True)
    nbformat.write(samples.reference(ATTENTION), flat / "Ada Lovelace_77_assignsubmission_file"
                   / ATTENTION.notebook_name)
    nbformat.write(samples.reference(NORM), flat / f"Ben Bit_78_assignsubmission_file_{NORM.notebook_name}")
    found, notes = gather(flat, tmp_path / "course")
    assert [(s.student, s.path.parent.name) for s in found] == [("77", ATTENTION.assignment),
                                                               ("78", NORM.assignment)], notes
    # A regex as nbgrader's zip_collect takes it; a timestamp in the name becomes the submission time.
    other = tmp_path / "other"
    other.mkdir()
    nbformat.write(samples.reference(ATTENTION), other / f"ada--2026-11-20T10:00:00--{ATTENTION.notebook_name}")
    nbformat.write(samples.released(ATTENTION), other / f"ada--2026-11-21T09:00:00--{ATTENTION.notebook_name}")
    found, notes = gather(other, tmp_path / "course",
                          r"(?P<student>[a-z]+)--(?P<timestamp>[^-]+-[^-]+-[^-]+)--(?P<file>.+)")
    assert [(s.student, s.submitted_at.isoformat()) for s in found] == [("ada", "2026-11-21T09:00:00+00:00")], notes
    assert any("counts, submitted later (2026-11-21 09:00:00 UTC)" in note for note in notes), notes


def test_bad_downloads_are_refused(tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    for name in ("ada_1_2_self_attention.ipynb", "ada_1_2_02_self_attention.ipynb"):
        nbformat.write(samples.reference(ATTENTION), flat / name)
    found, notes = gather(flat, tmp_path / "course")  # one learner's two files, nothing tells which: neither
    assert found == [] and any("nothing says which is later; check by hand" in n for n in notes), notes
    with pytest.raises(ValueError, match=r"needs a named group \(\?P<student>"):
        gather(flat, tmp_path / "course", r"(?P<learner>\w+)_.*")
    with pytest.raises(ValueError, match="neither a folder of submissions nor a zip file"):
        gather(tmp_path / "missing.zip", tmp_path / "course")

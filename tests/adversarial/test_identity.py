"""Attacks on who a submission belongs to (issue 44, identity; DESIGN.md invariant 10): a learner chooses the
name of every folder they write into the exchange, so a name is a claim until grader.classroom.intake.identity
admits it. Each attack is tried where the harm happens: the gradebook after a real batch (nbgrader's
autograde through `grader autograde`), the folders `grader collect` fills, the grading service's ledger.
Each test failed on the code before the one gate (names checked in two places only, owners off by default,
no class membership anywhere)."""
import os
import pwd
from types import SimpleNamespace

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.authoring import samples
from grader.boundary.confine import Limits
from grader.chapters import find_chapter
from grader.classroom.grading.batch import autograde_class
from grader.classroom.grading.regrade import regrade
from grader.classroom.intake.collect import collect, gather
from grader.classroom.ledger import REFUSED
from grader.classroom.onsubmit.service import Service
from grader.classroom.similarity.pairs import similarity
from grader.coursedir import COURSE_ID

CHAPTER = find_chapter("02")
XSS = "<img src=x onerror=alert(document.cookie)>"  # the name from the review: Formgrader printed it unescaped
STAMP = "2026-11-20 10:00:00.000000 UTC"


def handed_in(folder, nb) -> None:
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / CHAPTER.notebook_name)
    (folder / "timestamp.txt").write_text(STAMP)


def students_graded(course) -> dict[str, float]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.find_assignment(CHAPTER.assignment).submissions}


def test_folder_names_a_learner_chose_reach_no_gradebook(tmp_path, monkeypatch):
    # `nbgrader collect` names submitted/<student>/ after the inbound folder, checking nothing; then the
    # guide's `grader autograde ~/course/submitted`, and `grader regrade`, which reads submitted/ too.
    # Three learner-chosen names, one batch: markup (Formgrader's grading page printed it as HTML in the
    # instructor's server), a classmate's name with a Cyrillic "е" (a second "ben" in the export), and a
    # safe name that is no learner of the class.
    monkeypatch.setenv("COURSE_LEARNERS", "ada,ben")  # the hub gives the instructor's server its allow-list
    course = tmp_path / "course"
    for student in ("ada", XSS, "bеn", "mallory"):
        handed_in(course / "submitted" / student / CHAPTER.assignment, samples.reference(CHAPTER))
    summary = autograde_class(course / "submitted", course, jobs=2, timeout=60, chapters=[CHAPTER], progress=False,
                              limits=Limits(memory_mb=1024))
    assert set(students_graded(course)) == {"ada"}, summary
    assert "not a learner name the grader accepts" in summary and "mallory is not a learner of this class" in summary
    assert not (course / "originals" / XSS).exists() and not (course / "feedback" / "mallory").exists()
    regrade(course, CHAPTER, jobs=2, timeout=60, limits=Limits(memory_mb=1024))  # reads submitted/ again
    assert set(students_graded(course)) == {"ada"}


def test_the_similarity_report_names_no_one_the_gate_refused(tmp_path, monkeypatch):
    # The report (a page and the instructor's terminal) lists learners by their submitted/ folders.
    monkeypatch.setenv("COURSE_LEARNERS", "ada,ben")
    course = tmp_path / "course"
    for student in ("ada", "ben", XSS, "mallory"):
        handed_in(course / "submitted" / student / CHAPTER.assignment, samples.reference(CHAPTER))
    result = similarity(course, CHAPTER)
    assert set(result.learners) == {"ada", "ben"} and {p.a for p in result.pairs} | {p.b for p in result.pairs} == \
        {"ada", "ben"}, result.notes
    assert sum("graded for nobody" in note for note in result.notes) == 2, result.notes


def test_an_lms_download_whose_names_are_markup_or_strangers_is_refused(tmp_path, monkeypatch):
    # --pattern takes the learner from the file name: whatever the name says becomes a folder and a student id.
    download = tmp_path / "download"
    download.mkdir()
    for who in ("ada", "<svg onload=alert(1)>", "bеn", "Ada Lovelace"):  # a Cyrillic е: a second "ben"
        nbformat.write(samples.reference(CHAPTER), download / f"{who}__{CHAPTER.notebook_name}")
    found, notes = gather(download, tmp_path / "course", r"(?P<student>.+)__(?P<file>.+)")
    assert [s.student for s in found] == ["ada"], notes
    assert sum(n.startswith("refused:") and "graded for nobody" in n for n in notes) == 3, notes
    assert sorted(p.name for p in (tmp_path / "course" / "lms").iterdir()) == ["ada"]
    monkeypatch.setenv("COURSE_LEARNERS", "ben")  # the class known: ada is a stranger to it
    found, notes = gather(download, tmp_path / "course", r"(?P<student>.+)__(?P<file>.+)")
    assert found == [] and any("ada is not a learner of this class" in n for n in notes), notes


def test_the_grading_service_admits_only_the_class(tmp_path, monkeypatch):
    # The service reads the exchange itself: a stranger's submission and a markup name are refused before
    # anything is copied, so neither reaches the queue, the gradebook or the class page's totals.
    monkeypatch.setenv("COURSE_LEARNERS", "ada")
    course, inbound = tmp_path / "course", tmp_path / "exchange" / COURSE_ID / "inbound"
    course.mkdir()
    (course / "term.toml").write_text('[on_submit]\nchapters = ["02"]\n')
    for student in ("ada", "mallory", XSS):
        handed_in(inbound / f"{student}+{CHAPTER.assignment}+{STAMP}+r", samples.reference(CHAPTER))
    service = Service(course, tmp_path / "exchange", SimpleNamespace(limits=Limits()))
    service.scan()
    status = {e.student: (e.status, e.reason) for e in service.ledger.of()}
    assert status["ada"][0] == "queued", status
    assert status["mallory"] == (REFUSED, "not graded: mallory is not a learner of this class")
    assert status[XSS] == (REFUSED, "not graded: not a learner name the grader accepts")
    assert len(list((course / "on-submit" / "received").iterdir())) == 1  # ada's copy alone


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="gives folders to other unix users (CI runs as root)")


@needs_root
def test_grader_collect_refuses_a_folder_a_classmate_wrote_in_their_name(tmp_path, monkeypatch):
    # Each learner a unix user, the inbound folder writable by all (mode 2733). "daemon" (the attacker)
    # writes a newer folder named after "bin" holding full marks; bin handed in the skeleton. Owners are
    # checked by default: bin is graded on bin's own notebook, and daemon's folder is graded for nobody.
    victim, attacker = pwd.getpwnam("bin"), pwd.getpwnam("daemon")
    monkeypatch.setenv("COURSE_LEARNERS", "bin,daemon")
    inbound = tmp_path / "exchange" / COURSE_ID / "inbound"
    own = inbound / f"bin+{CHAPTER.assignment}+{STAMP}+a"
    handed_in(own, samples.released(CHAPTER))
    forged = inbound / f"bin+{CHAPTER.assignment}+2026-11-21 10:00:00.000000 UTC+b"
    handed_in(forged, samples.reference(CHAPTER))
    for folder, user in ((own, victim), (forged, attacker)):
        for path in (folder, *folder.iterdir()):
            os.chown(path, user.pw_uid, user.pw_gid)
    # the forged folder is the newer by the kernel's clock too (its ctime: changed last)
    course = tmp_path / "course"
    notes = collect(tmp_path / "exchange", course)
    assert any(n.startswith(f"refused: '{forged.name}'") and "the unix user daemon wrote it" in n for n in notes), notes
    kept = course / "submitted" / "bin" / CHAPTER.assignment / CHAPTER.notebook_name
    assert kept.read_bytes() == (own / CHAPTER.notebook_name).read_bytes(), notes
    summary = autograde_class(course / "submitted", course, jobs=2, timeout=60, chapters=[CHAPTER], progress=False,
                              limits=Limits(memory_mb=1024))
    assert students_graded(course) == {"bin": 0.0}, summary

"""Fuzzing a learner's notebook JSON: whatever a field holds, one submission never stops the batch.

Hundreds of chapter-02 notebooks (the release with the reference answers), each with a few fields
given the wrong type, removed, made huge or broken (seeded, so a failure replays), are staged one
by one: staging never raises, and what it leaves is a notebook of the release's shape with a reason
for what was set right or refused. A smaller class of them is then autograded as one batch with
honest classmates, whose rows must stay exact; every fuzzed learner gets a row and a note (one of
them with a forged timestamp.txt: graded, its time unknown).
"""
from __future__ import annotations

import base64
import copy
import json
import random
from types import SimpleNamespace

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.authoring import samples
from grader.boundary.confine import Limits
from grader.chapters import find_chapter
from grader.classroom.grading.batch import SAVED_BYTES, autograde_class, stage
from grader.classroom.submissions import Submission, grade_ids, read_learner_notebook, repair

CHAPTER = find_chapter("02")
SEED = 29
VARIANTS = 300
FULL = 8.0
BAD_VALUES = [["softmax"], {"grade_id": "softmax"}, 7, None, "softmax " * 30_000, "", 1.5, True, [[[[]]]],
              "a\u0000b", "../../x", -1, 1e308, {"": None}]
FIELDS = [("metadata", "nbgrader", "grade_id"), ("metadata", "nbgrader", "points"), ("metadata", "nbgrader", "grade"),
          ("metadata", "nbgrader", "solution"), ("metadata", "nbgrader", "locked"),
          ("metadata", "nbgrader", "schema_version"), ("metadata", "nbgrader", "checksum"), ("metadata", "nbgrader"),
          ("metadata",), ("cell_type",), ("source",), ("outputs",), ("execution_count",), ("id",), ("attachments",)]
TOP_FIELDS = [("nbformat",), ("nbformat_minor",), ("metadata",), ("metadata", "kernelspec"), ("cells",)]


def learner() -> dict:
    return json.loads(nbformat.writes(samples.reference(CHAPTER)))


def set_path(obj, path, value, delete=False) -> None:
    for key in path[:-1]:
        if not isinstance(obj.get(key), dict):
            obj[key] = {}
        obj = obj[key]
    if delete:
        obj.pop(path[-1], None)
    else:
        obj[path[-1]] = copy.deepcopy(value)


def some_cell(rng: random.Random, nb: dict) -> dict:
    """A cell to break (a fresh one where earlier mutations left no list of cells)."""
    cells = nb.get("cells") if isinstance(nb.get("cells"), list) else []
    return rng.choice([c for c in cells if isinstance(c, dict)] or [{}])


def mutate_field(rng: random.Random, nb: dict) -> None:
    if rng.random() < 0.2:
        set_path(nb, rng.choice(TOP_FIELDS), rng.choice(BAD_VALUES), delete=rng.random() < 0.3)
        return
    cell = some_cell(rng, nb)
    set_path(cell, rng.choice(FIELDS), rng.choice(BAD_VALUES), delete=rng.random() < 0.25)


def mutate_cells(rng: random.Random, nb: dict) -> None:
    """Non-dict cells, outputs of the wrong shape, sources that are lists of non-strings."""
    cell = some_cell(rng, nb)
    choice = rng.randrange(4)
    if choice == 0 and isinstance(nb.get("cells"), list):
        nb["cells"].insert(rng.randrange(len(nb["cells"]) + 1),
                           rng.choice([1, "cell", [], None, [{"cell_type": "code"}]]))
    elif choice == 1:
        cell["outputs"] = rng.choice([[1, 2], [{"output_type": "nope"}], [{"output_type": "stream"}], "out", {"a": 1}])
    elif choice == 2:
        cell["source"] = rng.choice([[1, 2], [None], [["x"]], {"code": "x"}])
    else:
        cell["execution_count"] = rng.choice(["3", 1.5, [1], -7])


def to_text(nb) -> str:
    return json.dumps(nb)


def mutate_text(rng: random.Random, text: str) -> bytes:
    """What cannot be said as a JSON value: broken bytes, deep nesting, a cut file, another top level."""
    choice = rng.randrange(5)
    if choice == 0:
        at = max(0, text.find('"source"'))
        return text[:at].encode() + b"\xff\xfe\xc3" + text[at:].encode()
    if choice == 1:
        depth = rng.choice([100, 5_000, 200_000])
        return text.replace('"metadata": {', '"metadata": {"deep": ' + "[" * depth + "]" * depth + ", ", 1).encode()
    if choice == 2:
        return text[: rng.randrange(len(text))].encode()
    if choice == 3:
        return rng.choice(["[" + text + "]", '"a notebook"', "42", "null", "{}"]).encode()
    return text.replace('"cells": [', '"cells": [' + "1e999999, " * 3, 1).encode()


def variant(rng: random.Random) -> bytes:
    nb = learner()
    for _ in range(rng.randint(1, 3)):
        (mutate_field if rng.random() < 0.7 else mutate_cells)(rng, nb)
    text = to_text(nb)
    return mutate_text(rng, text) if rng.random() < 0.25 else text.encode()


def with_saved_images(megabytes: int) -> bytes:
    """The reference with about `megabytes` of image outputs saved on the course's own code cells."""
    nb = samples.reference(CHAPTER)
    code = [c for c in nb.cells if c.cell_type == "code" and not c.metadata.get("nbgrader")]
    rng = random.Random(SEED)
    for cell in code:
        image = base64.b64encode(rng.randbytes(megabytes * 2 ** 20 * 3 // 4 // len(code))).decode()
        cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": image})]
    return nbformat.writes(nb).encode()


@pytest.fixture(scope="module")
def release():
    return samples.released(CHAPTER)


def check_staged(tmp_path, sub: Submission, release) -> None:
    """Staged as a notebook of the release's shape, with job cells for each of its cells."""
    staged = tmp_path / "submitted" / sub.student / CHAPTER.assignment / CHAPTER.notebook_name
    nb, notes = read_learner_notebook(staged)
    assert not notes, notes
    assert not repair(nb, release)[1]  # every graded cell of the release, once, as released
    assert {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells} - {None} == grade_ids(CHAPTER)
    assert len(sub.cells) == len(nb.cells)


def test_staging_survives_every_mutation(tmp_path, release):
    rng = random.Random(SEED)
    course = SimpleNamespace(root=tmp_path)
    silent = []
    for number in range(VARIANTS):
        path = tmp_path / "inbox" / f"s{number:03d}" / CHAPTER.notebook_name
        path.parent.mkdir(parents=True)
        content = variant(rng)
        path.write_bytes(content)
        sub = Submission(path, f"s{number:03d}")
        stage(course, sub, {CHAPTER.assignment: release}, rerun_all=False)
        assert sub.chapter == CHAPTER, sub.error
        check_staged(tmp_path, sub, release)
        if not (sub.error or sub.notes):
            silent.append(content)
    # a mutation that leaves a readable notebook of the right types needs no reason (a huge or odd
    # source text, an output of a valid type); most do not
    assert len(silent) < VARIANTS // 4


def test_oversized_file_is_refused_before_parsing(tmp_path, release):
    path = tmp_path / "big" / CHAPTER.notebook_name
    path.parent.mkdir()
    with path.open("wb") as handle:  # not JSON at all: a parser would fail, the size check comes first
        handle.truncate(21 * 2 ** 20)
    sub = Submission(path, "big")
    stage(SimpleNamespace(root=tmp_path), sub, {CHAPTER.assignment: release})
    assert sub.error == f"{CHAPTER.notebook_name}: the notebook is 21.0 MB, over the limit of 20 MB"


def test_saved_outputs_are_bounded(tmp_path, release):
    path = tmp_path / "images" / CHAPTER.notebook_name
    path.parent.mkdir()
    path.write_bytes(with_saved_images(16))
    sub = Submission(path, "images")
    stage(SimpleNamespace(root=tmp_path), sub, {CHAPTER.assignment: release})
    staged = tmp_path / "submitted" / "images" / CHAPTER.assignment / CHAPTER.notebook_name
    assert staged.stat().st_size < SAVED_BYTES + 2 ** 20
    assert sum(len(json.dumps(c.get("saved", []))) for c in sub.cells) <= SAVED_BYTES
    assert any("saved outputs dropped" in note for note in sub.notes), sub.notes


CLASS = {  # a fuzzed learner -> how their notebook was broken
    "list-grade-id": lambda nb: set_path(nb["cells"][solution_index(nb)], FIELDS[0], ["softmax"]),
    "nbgrader-a-list": lambda nb: set_path(nb["cells"][solution_index(nb) + 1], FIELDS[7], [1, 2]),
    "schema-99-ordinary": lambda nb: set_path(nb["cells"][0], FIELDS[7], {"grade_id": "x", "schema_version": 99}),
    "non-dict-cell": lambda nb: nb["cells"].insert(3, 7),
    "string-execution-count": lambda nb: set_path(nb["cells"][solution_index(nb)], ("execution_count",), "3"),
}


def solution_index(nb: dict) -> int:
    return next(i for i, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("grade_id") == "softmax")


def test_a_fuzzed_class_is_graded_as_one_batch(tmp_path):
    inbox = tmp_path / "inbox"
    files = {"honest-reference": nbformat.writes(samples.reference(CHAPTER)).encode(),
             "honest-skeleton": nbformat.writes(samples.released(CHAPTER)).encode(),
             "top-level-array": ("[" + nbformat.writes(samples.reference(CHAPTER)) + "]").encode(),
             "invalid-utf8": b'{"cells": [\xff\xfe], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}',
             "saved-images": with_saved_images(16)}
    for name, change in CLASS.items():
        nb = learner()
        change(nb)
        files[name] = to_text(nb).encode()
    files["bad-timestamp"] = files["honest-reference"]
    for name, content in files.items():
        (inbox / name).mkdir(parents=True)
        (inbox / name / CHAPTER.notebook_name).write_bytes(content)
    (inbox / "bad-timestamp" / "timestamp.txt").write_bytes(b"\xff yesterday, honest")  # the exchange's file, forged
    summary = autograde_class(inbox, tmp_path / "course", jobs=2, timeout=20, chapters=[CHAPTER], progress=False,
                              limits=Limits(memory_mb=1024))
    with Gradebook(f"sqlite:///{tmp_path / 'course' / 'gradebook.db'}") as gb:
        rows = {s.student.id: s.score for s in gb.find_assignment(CHAPTER.assignment).submissions}
    assert rows.pop("honest-reference") == FULL, summary
    assert rows.pop("honest-skeleton") == 0.0, summary
    assert set(rows) == set(files) - {"honest-reference", "honest-skeleton"}, summary
    for name, score in rows.items():
        assert 0.0 <= score <= FULL
        assert any(line.startswith("note:") and f"/{name}/" in line for line in summary.splitlines()), (name, summary)
    assert rows["list-grade-id"] == rows["nbgrader-a-list"] == rows["schema-99-ordinary"] == FULL, summary
    assert rows["bad-timestamp"] == FULL and "not an nbgrader timestamp" in summary, summary
    feedback = tmp_path / "course" / "feedback" / "saved-images" / CHAPTER.assignment
    assert sum(f.stat().st_size for f in feedback.glob("*.html")) < SAVED_BYTES * 1.4 + 2 ** 20


def test_a_huge_cell_is_not_parsed_by_the_grader(tmp_path, release, monkeypatch):
    """An 8 MB code cell (under the file limit) took 54 s and 4.7 GB to parse in the grading process
    when staging looked for cells to leave out; a cell that long always runs, unparsed."""
    import ast

    from grader.classroom.grading import skipping

    parsed, parse = [], ast.parse
    monkeypatch.setattr(ast, "parse", lambda source, *a, **k: parsed.append(len(source)) or parse(source, *a, **k))
    skipping._analysed.cache_clear()  # the course cells parse again here (each text once per process)
    nb = samples.reference(CHAPTER)
    nb.cells.append(nbformat.v4.new_code_cell("x = 1\n" * 1_000_000))
    path = tmp_path / "long" / CHAPTER.notebook_name
    path.parent.mkdir()
    nbformat.write(nb, path)
    sub = Submission(path, "long")
    stage(SimpleNamespace(root=tmp_path), sub, {CHAPTER.assignment: release})
    assert sub.error is None and sub.cells[-1]["kind"] == "code"
    assert parsed and max(parsed) <= 100_000


def test_an_lms_download_is_read_file_by_file(tmp_path, release):
    """A zip member over the size limit is never inflated (staging refuses it by its size), and a
    file whose name gives no readable time is one unmatched file, not a stopped run."""
    import zipfile

    from grader.classroom.intake import lms
    from grader.classroom.intake.collect import find_submissions

    download = tmp_path / "download.zip"
    with zipfile.ZipFile(download, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("ann_2026-11-20T10:00:00_self_attention.ipynb", b" " * (30 * 2 ** 20))
        archive.writestr("bob_yesterday_self_attention.ipynb", nbformat.writes(samples.reference(CHAPTER)))
    pattern = r"(?P<student>[a-z]+)_(?P<timestamp>[^_]+)_(?P<file>.+)"
    notes = lms.unpack(download, tmp_path / "lms", pattern)
    found, _ = find_submissions(tmp_path / "lms")
    assert any(note.startswith("unmatched: bob_yesterday") for note in notes), notes
    (ann,) = found
    assert ann.path.stat().st_size == 30 * 2 ** 20 and ann.path.stat().st_blocks * 512 < 2 ** 20
    stage(SimpleNamespace(root=tmp_path), ann, {CHAPTER.assignment: release})
    assert ann.error.endswith("the notebook is 30.0 MB, over the limit of 20 MB")


def test_a_notebook_that_is_a_link_is_not_read(tmp_path):
    # In any submissions folder: a link named like the chapter's notebook, pointing at a file the
    # grader can read (a class's source notebook, solutions in place), is refused, not followed.
    from grader.classroom.submissions import BadSubmission

    target = tmp_path / "solutions.ipynb"
    nbformat.write(samples.reference(CHAPTER), target)
    link = tmp_path / CHAPTER.notebook_name
    link.symlink_to(target)
    with pytest.raises(BadSubmission, match="is a link to another file"):
        read_learner_notebook(link)

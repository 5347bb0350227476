"""What a batch saves of nbgrader's work (grader.classroom.grading.nbgrader_costs,
.recording._clean_outputs) changes nothing nbgrader decides: the same metadata refused with the same error,
the same outputs kept."""

import jsonschema
import nbformat
import pytest
from nbgrader.nbgraderformat import MetadataValidator

from grader.chapters import find_chapter, is_test_cell
from grader.classroom.grading import nbgrader_costs
from grader.classroom.grading.recording import _clean_outputs


def test_the_metadata_schema_is_checked_once_and_a_bad_cell_refused_as_before(monkeypatch):
    nb = nbformat.read(find_chapter("02").course_notebook, as_version=4)
    graded = [c for c in nb.cells if is_test_cell(c)]
    checked = []
    original = jsonschema.Draft4Validator.check_schema.__func__
    monkeypatch.setattr(jsonschema.Draft4Validator, "check_schema",
                        classmethod(lambda cls, schema, **kw: (checked.append(1), original(cls, schema, **kw))))
    nbgrader_costs.schema_checked_once()
    MetadataValidator().validate_nb(nb)
    MetadataValidator().validate_nb(nb)
    assert len(graded) > 2 and len(checked) <= 1  # jsonschema.validate checked it once per cell
    bad = graded[0].metadata.nbgrader
    bad["points"] = "ten"
    with pytest.raises(jsonschema.ValidationError) as ours:
        MetadataValidator().validate_cell(graded[0])
    with pytest.raises(jsonschema.ValidationError) as stock:
        jsonschema.validate(bad, MetadataValidator().schema)
    assert ours.value.message == stock.value.message and "'ten'" in ours.value.message


def test_outputs_are_kept_or_dropped_each_on_its_own_merits():
    good = [{"output_type": "stream", "name": "stdout", "text": "hi\n"},
            {"output_type": "display_data", "data": {"text/plain": "x"}, "metadata": {}},
            {"output_type": "execute_result", "data": {"text/plain": "3"}, "metadata": {"x": 1}, "execution_count": 7}]
    bad = [{"output_type": "stream", "name": "stdout", "text": 3},
           {"output_type": "error", "ename": "E"}, "not a dict", {"output_type": "unknown"}]
    kept = _clean_outputs([bad[0], good[0], bad[1], good[1], bad[2], good[2], bad[3]])
    assert [o["output_type"] for o in kept] == ["stream", "display_data", "execute_result"]
    assert kept[2]["execution_count"] is None and kept[2]["metadata"] == {}
    assert _clean_outputs(good) == kept and _clean_outputs(bad) == [] and _clean_outputs("junk") == []


def test_a_gradebook_asks_for_its_tables_once_and_still_creates_a_missing_one(tmp_path, monkeypatch):
    import os
    import sqlite3
    import sys

    from nbgrader.api import Gradebook
    from sqlalchemy import event

    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))  # alembic
    nbgrader_costs.shared_engines()
    nbgrader_costs.tables_asked_once()
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gb:  # a new file: every table created, as nbgrader does
        gb.add_student("ada")
        statements = []
        event.listen(gb.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    with Gradebook(url) as gb:
        assert gb.find_student("ada").id == "ada"
    assert not [s for s in statements if "table_info" in s.lower()], statements  # no PRAGMA per table
    tables = {row[0] for row in sqlite3.connect(tmp_path / "gradebook.db").execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"student", "assignment", "grade", "comment"} <= tables
    with sqlite3.connect(tmp_path / "gradebook.db") as db:
        db.execute("DROP TABLE comment")
    with Gradebook(url):
        pass
    assert ("comment",) in sqlite3.connect(tmp_path / "gradebook.db").execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()

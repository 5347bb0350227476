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


def test_a_batch_keeps_one_connection_and_its_tables_then_lets_them_go(tmp_path, monkeypatch):
    # nbgrader opens a Gradebook about ten times per notebook: within a batch (kept_open) they share one
    # SQLite connection and the tables the first found; after it, the connection is closed, and a gradebook
    # replaced between batches is the one the next opens (its missing table created again)
    import os
    import sqlite3
    import sys

    from nbgrader.api import Gradebook
    from sqlalchemy import event

    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))  # alembic
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with nbgrader_costs.kept_open():
        with Gradebook(url) as gb:
            gb.add_student("ada")
            engine = gb.engine
        connects, statements = [], []
        event.listen(engine, "connect", lambda *args: connects.append(1))
        event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
        for _ in range(5):
            with Gradebook(url) as gb:
                assert gb.find_student("ada").id == "ada"
    assert connects == [] and len([s for s in statements if "sqlite_master" in s]) == 1, statements  # of 10
    assert engine.pool.checkedin() == 0  # closed when the batch ended
    (tmp_path / "gradebook.db").unlink()
    with sqlite3.connect(tmp_path / "gradebook.db") as db:  # another gradebook in its place, without students
        db.execute("CREATE TABLE unrelated (x)")
    with nbgrader_costs.kept_open(), Gradebook(url) as gb:
        assert [s.id for s in gb.students] == []
    assert ("student",) in sqlite3.connect(tmp_path / "gradebook.db").execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()


def test_a_chapter_total_asks_the_gradebook_a_few_questions_not_a_few_per_grade(tmp_path, monkeypatch):
    # each grade's cell name and maximum come with one query per notebook (they were up to three queries a
    # grade: its lazy cell, its name through it, its deferred maximum); the parts are the grades' own
    import os
    import sys

    from nbgrader.api import Gradebook
    from sqlalchemy import event

    from grader.classroom.grades.total import chapter_total

    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))  # alembic
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    scores = {f"test_{i}": (float(i % 3), None) for i in range(7)}
    scores |= {f"written_{i}": (None, 0.25 * i) for i in range(6)}
    with Gradebook(url) as gb:
        gb.add_assignment("ch")
        gb.add_notebook("nb", "ch")
        for name in scores:
            code = name.startswith("test")
            gb.add_grade_cell(name, "nb", "ch", max_score=2 + len(name) % 3, cell_type="code" if code else "markdown")
        gb.add_student("ada")
        gb.add_submission("ch", "ada")
        for name, (auto, hand) in scores.items():
            grade = gb.find_grade(name, "nb", "ch", "ada")
            grade.auto_score, grade.manual_score, grade.needs_manual_grade = auto, hand, False
        gb.db.commit()
    with Gradebook(url) as gb:
        statements = []
        event.listen(gb.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
        total = chapter_total(gb, "ada", "ch")
        asked = len(statements)
        grades = gb.find_submission("ch", "ada").notebooks[0].grades
        expected = {g.name: (float(g.max_score), g.cell.cell_type) for g in grades}  # the grades' own, lazily
    assert asked <= 6, statements
    assert {p.name: p.max_score for p in total.parts} == {name: m for name, (m, _) in expected.items()}
    assert total.auto == sum(a for a, _ in scores.values() if a is not None)
    assert total.hand == sum(h for _, h in scores.values() if h is not None)


def test_the_nbgrader_helper_records_a_verdict_without_importing_torch(tmp_path):
    # the helper's imports (grader.classroom.grading.nbgrader_helper.main) and a verdict filled in from the file
    # the grading process writes: the checks' descriptions and weights travel in it, so no spec module loads
    import json
    import subprocess
    import sys

    from grader.authoring import samples
    from grader.boundary.unit import Verdict
    from grader.chapters import exercise_of, find_chapter
    from grader.classroom.grading.recording import checks_of, write_verdict

    chapter = find_chapter("02")
    nb = samples.released(chapter)
    index, cell = next((i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and exercise_of(c))
    checks = checks_of(chapter)[exercise_of(cell)]
    path = tmp_path / "verdict.json"
    verdict = Verdict(cells={index: {"passed": [checks[0][0]], "failed": [[checks[1][0], "off by one"]]}})
    write_verdict(path, chapter, [{"kind": c.cell_type} for c in nb.cells], verdict)
    assert json.loads(path.read_text())["checks"][exercise_of(cell)] == [list(c) for c in checks]
    code = f"""
import sys
from pathlib import Path
from grader.authoring import samples
from grader.chapters import find_chapter
from grader.classroom.grading import nbgrader_helper
from grader.classroom.grading.nbgrader_costs import kept_open
from grader.classroom.grading.recording import generate_feedback, nbgrader_api, read_verdict, fill
from grader.classroom.policy.term import LatePolicy, Term
nb = samples.released(find_chapter("02"))
chapter, cells, verdict, checks = read_verdict(Path(sys.argv[1]))
fill(nb, chapter, cells, verdict, checks)
print("torch" in sys.modules)
print(nb.cells[{index}].outputs[0]["text"])
"""
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True).stdout
    assert out.startswith("False\n") and checks[0][0] in out and "off by one" in out, out


def test_a_batch_finds_a_notebooks_grades_comments_and_cells_together_and_the_same(tmp_path, monkeypatch):
    # within kept_open the first find_grade (find_comment, find_source_cell, find_graded_cell) of a notebook loads
    # all of them in one query; each answer is the row nbgrader's own query finds (a grade cell before a task cell
    # of the same name), and a name that is not there is still a MissingEntry
    import os
    import sys

    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy import event

    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))  # alembic
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    names = [f"cell_{i}" for i in range(6)]
    with Gradebook(url) as gb:
        gb.add_assignment("ch")
        gb.add_notebook("nb", "ch")
        for i, name in enumerate(names):
            gb.add_grade_cell(name, "nb", "ch", max_score=1 + i, cell_type="code")
            gb.add_solution_cell(name, "nb", "ch")
            gb.add_source_cell(name, "nb", "ch", cell_type="code", source=f"x = {i}")
        gb.add_task_cell("cell_0", "nb", "ch", max_score=9, cell_type="markdown")  # a task cell named as a grade cell
        for student in ("ada", "ben"):
            gb.add_student(student)
            gb.add_submission("ch", student)
            for i, name in enumerate(names):
                gb.find_grade(name, "nb", "ch", student).auto_score = float(i)
                gb.find_comment(name, "nb", "ch", student).auto_comment = f"{student} {i}"
        gb.db.commit()

    def answers(gb):
        found = []
        for name in names:
            grade, comment = gb.find_grade(name, "nb", "ch", "ben"), gb.find_comment(name, "nb", "ch", "ben")
            found.append((grade.id, grade.auto_score, grade.max_score, grade.cell.type, comment.id, comment.comment,
                          gb.find_source_cell(name, "nb", "ch").source, gb.find_graded_cell(name, "nb", "ch").id))
        return found

    with Gradebook(url) as gb:
        stock = answers(gb)
    nbgrader_costs.found_together()
    with nbgrader_costs.kept_open():
        with Gradebook(url) as gb:
            statements = []
            event.listen(gb.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
            ours = answers(gb)
            asked = len(statements)
            for find, args in ((gb.find_grade, ("nb", "ch", "ben")), (gb.find_source_cell, ("nb", "ch"))):
                with pytest.raises(MissingEntry):
                    find("no_such_cell", *args)
    assert ours == stock and stock[0][3] == "GradeCell" and stock[2][2] == 3.0
    assert asked <= 6, statements  # 48 questions and 6 deferred maxima, one at a time

"""What nbgrader's autograde spends on work a batch need not repeat, cut without changing what it records
(grader.classroom.grading.recording sets these up before it calls nbgrader):

- `shared_engines`: one SQLAlchemy engine per database URL in this process, not one per Gradebook;
- `tables_asked_once`: a Gradebook that opens asks the database for its table names once, not about each of
  its thirteen tables in turn (it opens about nine times per notebook autograded);
- `schema_checked_once`: nbgrader checks its cell-metadata schema itself, with jsonschema, before each
  cell's metadata is validated against it (twice per cell per autograde: two thirds of that step);
- `OneCommit`: nbgrader's SaveAutoGrades, whose scores and comments go in as one transaction per notebook
  instead of one commit (a disk sync) per graded cell;
- `kept_open`: while a batch runs, a Gradebook that closes leaves its database connection to the next one, and
  one that opens trusts the tables a Gradebook of the batch found (nbgrader opens about ten per notebook);
- `found_together`: while a batch runs, a Gradebook's first `find_grade` (`find_comment`, `find_source_cell`,
  `find_graded_cell`) of a notebook loads all of its grades (comments, cells) in one query, and answers the rest
  from them.
"""
from __future__ import annotations

import contextlib
import functools
import json
import threading
from typing import NamedTuple

from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor, SaveAutoGrades


def shared_engines() -> None:
    """nbgrader opens the gradebook, each time with a new SQLAlchemy engine, about nine times for every
    notebook it autogrades; one engine per database URL in this process keeps SQLAlchemy's cache of
    compiled statements between them (a fifth of the time nbgrader takes per notebook)."""
    import nbgrader.api

    if getattr(nbgrader.api.create_engine, "shared", False):
        return
    original, lock = nbgrader.api.create_engine, threading.Lock()

    def create_engine(url, **kwargs):
        key = (str(url), tuple(sorted(kwargs.items())))
        with lock:
            if key not in _ENGINES:
                engine = _ENGINES[key] = original(url, **kwargs)
                engine.dispose = functools.partial(_dispose, engine.dispose)
            return _ENGINES[key]

    create_engine.shared = True
    nbgrader.api.create_engine = create_engine


_ENGINES: dict = {}
_BATCHES = [0]  # batches running in this process (`kept_open`)
_TABLES: dict = {}  # engine -> its table names, found by a Gradebook of a running batch


def _dispose(dispose, close: bool = True) -> None:
    """Gradebook.close's engine.dispose: closes the engine's connections, unless a batch keeps them."""
    if not _BATCHES[0]:
        dispose(close)


@contextlib.contextmanager
def kept_open():
    """While the block runs, nbgrader's Gradebooks in this process share their database connections and
    the table names one of them found (SQLite: opening a connection and reading its schema cost more than
    most of nbgrader's queries); after it, they are closed and forgotten, so a gradebook replaced between
    batches is the one the next batch opens."""
    shared_engines()
    tables_asked_once()
    found_together()
    with _LOCK:
        _BATCHES[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _BATCHES[0] -= 1
            if not _BATCHES[0]:
                _TABLES.clear()
                for engine in _ENGINES.values():
                    engine.dispose()


_LOCK = threading.Lock()


def found_together() -> None:
    """nbgrader's autograde and feedback ask for each graded cell's grade and comment by name, a join of six
    tables each, then the grade's deferred maximum, one query more, and for each cell of the release by name
    (about a hundred and twenty questions per notebook). While a batch runs (`kept_open`), the first question
    about a notebook loads all of its grades with their maxima (its comments, its cells) into the Gradebook's
    session, one query; the rest are found among them: the same objects the session would return. Anything
    not found there (a row made since, a name that is no cell's) is asked as before, so MissingEntry is
    raised as before."""
    import nbgrader.api as api
    from sqlalchemy import inspect
    from sqlalchemy.orm import undefer

    if getattr(api.Gradebook.find_grade, "together", False):
        return
    find_grade, find_comment = api.Gradebook.find_grade, api.Gradebook.find_comment

    def submitted(query, model, notebook, assignment, student):
        return query.join(api.SubmittedNotebook, api.SubmittedNotebook.id == model.notebook_id) \
            .join(api.Notebook, api.Notebook.id == api.SubmittedNotebook.notebook_id) \
            .join(api.SubmittedAssignment, api.SubmittedAssignment.id == api.SubmittedNotebook.assignment_id) \
            .join(api.Assignment, api.Assignment.id == api.SubmittedAssignment.assignment_id) \
            .filter(api.Notebook.name == notebook, api.Assignment.name == assignment,
                    api.SubmittedAssignment.student_id == student)

    def grades(gb, notebook, assignment, student) -> dict:
        rows = submitted(gb.db.query(api.Grade, api.BaseCell.name, api.BaseCell.type)
                         .join(api.BaseCell, api.BaseCell.id == api.Grade.cell_id)
                         .options(undefer(api.Grade.max_score)), api.Grade, notebook, assignment, student)
        # a grade cell before a task cell of the same name, as find_grade looks
        return {name: grade for grade, name, _ in sorted(rows, key=lambda row: row[2] == "GradeCell")}

    def comments(gb, notebook, assignment, student) -> dict:
        rows = submitted(gb.db.query(api.Comment, api.SolutionCell.name)
                         .join(api.SolutionCell, api.SolutionCell.id == api.Comment.cell_id),
                         api.Comment, notebook, assignment, student)
        return {name: comment for comment, name in rows}

    def cells(model):
        def load(gb, notebook, assignment) -> dict:
            rows = gb.db.query(model).join(api.Notebook, api.Notebook.id == model.notebook_id) \
                .join(api.Assignment, api.Assignment.id == api.Notebook.assignment_id) \
                .filter(api.Notebook.name == notebook, api.Assignment.name == assignment)
            return {cell.name: cell for cell in rows}
        return load

    def graded_cells(gb, notebook, assignment) -> dict:  # a grade cell before a task cell, as find_graded_cell
        return {**cells(api.TaskCell)(gb, notebook, assignment), **cells(api.GradeCell)(gb, notebook, assignment)}

    def together(find, load, kind):
        def found(self, name, *where, **named):
            if named or not _BATCHES[0]:  # (nbgrader passes them by position)
                return find(self, name, *where, **named)
            loaded = self.__dict__.setdefault("_grader_found", {})
            key = (kind, *where)
            if key not in loaded:
                loaded[key] = load(self, *where)
            hit = loaded[key].get(name)
            if hit is None or not inspect(hit).persistent or inspect(hit).session is not self.db():
                return find(self, name, *where)
            return hit

        found.together = True
        return found

    api.Gradebook.find_grade = together(find_grade, grades, "grade")
    api.Gradebook.find_comment = together(find_comment, comments, "comment")
    api.Gradebook.find_source_cell = together(api.Gradebook.find_source_cell, cells(api.SourceCell), "source")
    api.Gradebook.find_graded_cell = together(api.Gradebook.find_graded_cell, graded_cells, "graded")


def tables_asked_once() -> None:
    """nbgrader's Gradebook creates its tables whenever it opens: SQLAlchemy asks the database about each one
    (a PRAGMA on SQLite) before creating the missing. One query for the table names tells that none is missing,
    the usual case; else SQLAlchemy's own create_all runs as before."""
    import nbgrader.api
    from sqlalchemy import inspect

    metadata = nbgrader.api.Base.metadata
    if getattr(metadata.create_all, "asks_once", False):
        return
    original = metadata.create_all

    def create_all(bind=None, tables=None, checkfirst=True):
        if bind is None or tables is not None or not checkfirst \
                or not set(metadata.tables) <= set(table_names(bind)):
            original(bind=bind, tables=tables, checkfirst=checkfirst)

    def table_names(bind) -> list[str]:
        known = _TABLES.get(bind) if _BATCHES[0] else None
        if known is None:
            known = inspect(bind).get_table_names()
            if _BATCHES[0] and set(metadata.tables) <= set(known):
                _TABLES[bind] = known
        return known

    create_all.asks_once = True
    metadata.create_all = create_all
    nbgrader.api.inspect = _Known(table_names, inspect)  # the Gradebook's own look, before its create_all


class _Known:
    """Stands in for sqlalchemy.inspect in nbgrader.api, whose Gradebook asks an engine's table names when it
    opens: those of `table_names` (a running batch's, when known); anything else, SQLAlchemy's."""

    def __init__(self, table_names, inspect):
        self.table_names, self.inspect = table_names, inspect

    def __call__(self, subject, *args, **kwargs):
        if args or kwargs or subject not in _ENGINES.values():
            return self.inspect(subject, *args, **kwargs)
        return _Names(self.table_names(subject))


class _Names(NamedTuple):
    names: list

    def get_table_names(self) -> list[str]:
        return list(self.names)


@functools.lru_cache(maxsize=8)
def _validator(schema_text: str):
    """A validator of one schema, the schema itself checked once (jsonschema.validate checks it each call)."""
    import jsonschema

    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


class _CheckedOnce:
    """Stands in for the jsonschema module where nbgrader's metadata validator uses it: `validate` as
    jsonschema's (the same error, its best match), the schema checked once per process."""

    def __init__(self, jsonschema):
        self.jsonschema = jsonschema

    def __getattr__(self, name):
        return getattr(self.jsonschema, name)

    def validate(self, instance, schema, *args, **kwargs):
        if args or kwargs:  # a call nbgrader does not make: jsonschema's own
            return self.jsonschema.validate(instance, schema, *args, **kwargs)
        error = self.jsonschema.exceptions.best_match(
            _validator(json.dumps(schema, sort_keys=True)).iter_errors(instance))
        if error is not None:
            raise error


def schema_checked_once() -> None:
    from nbgrader.nbgraderformat import common

    if not isinstance(common.jsonschema, _CheckedOnce):
        common.jsonschema = _CheckedOnce(common.jsonschema)


class OneCommit(SaveAutoGrades):
    """nbgrader's SaveAutoGrades with its per-cell commits made flushes (its own queries still see each
    change) and the notebook's scores and comments committed together at the end: nothing when it fails."""

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.student_id = resources["nbgrader"]["student"]
        self.db_url = resources["nbgrader"]["db_url"]
        self.gradebook = Gradebook(self.db_url)
        with self.gradebook:
            session = self.gradebook.db
            commit, session.commit = session.commit, session.flush
            try:
                nb, resources = NbGraderPreprocessor.preprocess(self, nb, resources)
            finally:
                del session.commit  # the session's own again
            commit()
        return nb, resources

"""What nbgrader's autograde spends on work a batch need not repeat, cut without changing what it records
(grader.classroom.grading.recording sets these up before it calls nbgrader):

- `shared_engines`: one SQLAlchemy engine per database URL in this process, not one per Gradebook;
- `tables_asked_once`: a Gradebook that opens asks the database for its table names once, not about each of
  its thirteen tables in turn (it opens about nine times per notebook autograded);
- `schema_checked_once`: nbgrader checks its cell-metadata schema itself, with jsonschema, before each
  cell's metadata is validated against it (twice per cell per autograde: two thirds of that step);
- `OneCommit`: nbgrader's SaveAutoGrades, whose scores and comments go in as one transaction per notebook
  instead of one commit (a disk sync) per graded cell.
"""
from __future__ import annotations

import functools
import json
import threading

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
                _ENGINES[key] = original(url, **kwargs)
            return _ENGINES[key]

    create_engine.shared = True
    nbgrader.api.create_engine = create_engine


_ENGINES: dict = {}


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
                or not set(metadata.tables) <= set(inspect(bind).get_table_names()):
            original(bind=bind, tables=tables, checkfirst=checkfirst)

    create_all.asks_once = True
    metadata.create_all = create_all


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

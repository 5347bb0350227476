"""The translated editions run the same code as the English ones (test_notebooks.py): they must run too, top
to bottom and standalone. Their printed labels are translated, so the stated results are read from the
English run; and since the build lets a translation change only a code cell's strings and comments, the
English run's full trainings stand for theirs: they run shortened, as in grading (course.toolkit.grading_run).
A file of its own so that `make test`'s two workers (one file each, `--dist loadfile`) share the notebook runs
instead of one worker running them all."""
import pytest

from grader.chapters import CHAPTERS, LANGUAGES
from tests.test_notebooks import run_edition

EDITIONS = [c.edition(lang) for lang in LANGUAGES for c in CHAPTERS]


@pytest.mark.parametrize("chapter", EDITIONS, ids=[f"{c.lang}-{c.assignment}" for c in EDITIONS])
def test_chapter_runs_with_solutions(chapter, standalone, tmp_path):
    run_edition(chapter, standalone, tmp_path)

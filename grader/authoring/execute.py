"""Execute a chapter's source notebook (solutions filled in): the timings of `make bench`."""
from __future__ import annotations

import os
import time

import nbformat
from nbclient import NotebookClient

from course.toolkit import GRADING_ENV
from grader.chapters import Chapter


def execute_source(chapter: Chapter, timeout: int = 300) -> tuple[nbformat.NotebookNode, float]:
    """Run the source notebook top to bottom in its chapter folder; return it and the seconds taken."""
    nb = nbformat.read(chapter.source_notebook, as_version=4)
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    os.environ.pop(GRADING_ENV, None)  # the full run: training cells train as a learner sees them
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(chapter.course_dir)}})
    start = time.perf_counter()
    client.execute()
    return nb, time.perf_counter() - start


"""Data, plotting and training helpers the chapter notebooks import (no reference code)."""
import os

GRADING_ENV = "TRANSFORMERS_COURSE_GRADING"


def grading_run() -> bool:
    """True while the grader re-runs a notebook to score it.

    Hidden tests never look at training results, so a long training cell may then take a
    few steps only; a learner running the notebook always gets the full run.
    """
    return os.environ.get(GRADING_ENV) == "1"

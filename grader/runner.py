"""Kernel side: `from grader.runner import run_checks`, the line in every hidden-test cell.

Kept at this name because every nbgrader source notebook, every gradebook of a released chapter (nbgrader
restores the hidden-test cells from it) and the feedback a learner reads hold that line; the code is
grader.boundary.runner.
"""
from grader.boundary.runner import run_checks

__all__ = ["run_checks"]

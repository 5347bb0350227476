"""Steps of the trusted side that do not depend on each other (each chapter's feedback pages), shared with a
process forked from this one, so that a batch's last step uses both cores instead of one. Trusted code only:
the fork is of the grading process, after every learner's child has ended, never of a sandbox."""
from __future__ import annotations

import os
import sys

from grader.classroom.grading.nbgrader_costs import forget_connections


def split_run(parts: list, work) -> None:
    """`work(part)` for every part: the first half in a process forked from this one, the rest here, side by
    side. Should the forked process not finish its half, this one does it again after its own (each part
    rewrites what it makes). One after another here where there is one core, one part or no fork."""
    if len(parts) < 2 or (os.cpu_count() or 1) < 2 or not hasattr(os, "fork"):
        for part in parts:
            work(part)
        return
    forked, here = parts[:len(parts) // 2], parts[len(parts) // 2:]
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the forked half, then out, never back into the caller's code
        code = 1
        try:
            forget_connections()
            for part in forked:
                work(part)
            sys.stdout.flush()
            sys.stderr.flush()
            code = 0
        finally:
            os._exit(code)
    try:
        for part in here:
            work(part)
    finally:
        _, status = os.waitpid(pid, 0)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        for part in forked:
            work(part)

"""Child side, imported by the fork server only (grader.boundary.forkserver.PRELOAD), never by the trusted
process: imports the child's modules (torch, IPython, matplotlib) with the collector's full passes held off
(grader.boundary.heap), then builds the IPython shell every pool child inherits (grader.boundary.child.
prebuild_shell) and freezes the heap the children share. Should the shell fail, each child builds its own,
as before."""
import contextlib

from grader.boundary import heap

heap.defer()

from grader.boundary.child import prebuild_shell  # noqa: E402 - after defer: the imports are what it is for

with contextlib.suppress(Exception):  # an exception here would stop the fork server itself
    prebuild_shell()
heap.settle()

"""Child side, imported by the fork server only (grader.boundary.forkserver.PRELOAD), never by the trusted
process: builds the IPython shell every pool child inherits (grader.boundary.child.prebuild_shell). Should
that fail, each child builds its own, as before."""
import contextlib

from grader.boundary.child import prebuild_shell

with contextlib.suppress(Exception):  # an exception here would stop the fork server itself
    prebuild_shell()

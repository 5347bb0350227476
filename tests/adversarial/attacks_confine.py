"""Issue 29, sections 3 and 4: a sandbox that sees or signals the host, and limits that do not limit.

Each attack is run from a learner cell. The probes keep the correct softmax only if the attack
worked (8 where it does, 6 where it fails); the cells that kill put their attack after the softmax
test cell, so the row is exact only if nothing else was harmed. The classmates in the batch are
the other cases: a kill that reaches one of them shows in that classmate's row.

The signalling cases need the sandbox's own PID namespace (`needs_namespaces`): on a machine
without one they would really kill the grading process.
"""
from __future__ import annotations

import nbformat

from tests.adversarial.cases import Case, Paths, notebook, probe

GIB = 1024 ** 3
# the grading process: the parent of the fork server, itself this child's parent
GRADER_PID = "int(open('/proc/%d/stat' % os.getppid()).read().rsplit(')', 1)[1].split()[1])"
# the adversarial batch runs with `memory_mb=1024`: hold more than that where RLIMIT_AS does not look
HOARD = 1.5 * GIB
SLEEPY_CELLS = 30  # each sleeps just under the test's per-cell limit (10 s)


def slow_cells(paths: Paths) -> nbformat.NotebookNode:
    """30 cells after the softmax test cell, each sleeping just under the per-cell limit."""
    nb = notebook()
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax")
    for _ in range(SLEEPY_CELLS):
        nb.cells.insert(index + 1, nbformat.v4.new_code_cell("import time\ntime.sleep(9.5)"))
    return nb


def _hoard(code: str) -> str:
    return code.replace("HOARD", str(int(HOARD)))


CASES = [
    # section 3: seeing the host
    Case("probe-proc-other-processes", probe("""
        assert [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]"""), 6.0),
    Case("probe-grader-command-line", probe("""
        assert b'python' in open('/proc/%d/cmdline' % GRADER_PID, 'rb').read()"""
        .replace("GRADER_PID", GRADER_PID)), 6.0),
    Case("probe-grader-environment", probe("""
        seen = repr(dict(os.environ)).encode() + open('/proc/self/environ', 'rb').read()
        try:
            seen += open('/proc/%d/environ' % GRADER_PID, 'rb').read()
        except Exception:
            pass
        assert b'PYTEST_CURRENT_TEST' in seen  # pytest's, so the grading process's environment""".replace(
        "GRADER_PID", GRADER_PID)), 6.0),
    # section 3: signalling the host (the kills come after the softmax test cell: 8 if nothing else happens)
    Case("kill-the-grading-process", lambda p: notebook(after={"test_softmax": (
        "import os, signal\nos.kill(" + GRADER_PID + ", signal.SIGKILL)")}), 8.0, needs_namespaces=True),
    Case("kill-my-process-group", lambda p: notebook(after={"test_softmax": (
        "import os, signal, time\nos.killpg(0, signal.SIGKILL)\ntime.sleep(1)")}), 8.0),
    Case("probe-kill-classmates", probe("""
        import signal, time
        def parent_of(pid):
            return int(open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()[1])
        killed = 0
        for _ in range(100):  # a classmate is being graded beside this one (jobs=2)
            for pid in [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:
                try:
                    if parent_of(pid) == os.getppid():
                        os.kill(pid, signal.SIGKILL)
                        killed += 1
                except OSError:
                    pass
            if killed:
                break
            time.sleep(0.05)
        assert killed"""), 6.0, needs_namespaces=True),
    # section 4: memory RLIMIT_AS does not count, and no limit on a whole submission's time
    Case("probe-hoard-memfd", probe(_hoard("""
        held, chunk = [], 60 * 1024 ** 2  # one file stays under RLIMIT_FSIZE (64 MB)
        while len(held) * chunk < HOARD:
            fd = os.memfd_create('hoard')
            os.posix_fallocate(fd, 0, chunk)  # real pages, and quick: no copy from the cell
            held.append(fd)""")), 6.0),
    Case("probe-hoard-files", probe(_hoard("""
        chunk, held = 60 * 1024 ** 2, 0
        for i in range(HOARD // chunk + 1):  # in the job folder, once on the host's disk
            with open('hoard-%d.bin' % i, 'wb') as f:
                os.posix_fallocate(f.fileno(), 0, chunk)
                held += chunk
        assert held >= HOARD""")), 6.0),
    Case("sleepy-cells", slow_cells, 2.0, reason="limit for a whole submission"),
]

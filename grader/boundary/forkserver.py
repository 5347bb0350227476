"""Trusted side: the fork server the pool's children are forked from, started, kept and stopped here.

The fork server imports the child's modules once (`PRELOAD`: torch, IPython and matplotlib, never the
hidden specs, the answers or the course package), builds the IPython shell before any learner's code
runs and freezes its heap (grader.boundary.heap), so a child starts in milliseconds and nothing of one
learner's run is in the next one's. It starts with only `server_environment` of the grader's environment,
so no child inherits a secret (a database URL, a token), and never implicitly: every path that may fork
calls `start` first. A command that has finished grading calls `stop`. Each child runs `run_child`, the
child's entry point (grader.boundary.child.run).
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
from multiprocessing import forkserver
from pathlib import Path

CHILD = "grader.boundary.child"  # the child's side: confine, run the cells, serve the checks' calls
# what the fork server imports once: the child's modules and the IPython shell every child inherits (the
# child's module again, should the shell's fail)
PRELOAD = ["grader.boundary.shell_preload", CHILD]
# then the first calls on the meta device, which chapter 09's checks make (1.3 s of imports), unless the command
# grades none of META_CHAPTERS (`grader grade` of another chapter's notebooks: start(meta=False))
META_WARMUP = "grader.boundary.meta_warmup"
META_CHAPTERS = ("llama_modern",)

# what the fork server's environment keeps of the grader's: no password, token or database URL
SERVER_ENV = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "USER", "LOGNAME", "MPLCONFIGDIR",
              "XDG_CACHE_HOME", "XDG_CONFIG_HOME")
SERVER_ENV_PREFIXES = ("LC_", "PYTHON", "OMP_", "MKL_", "OPENBLAS_")
_starting = threading.Lock()


def context(meta: bool = True):
    """The multiprocessing context whose processes are forked from this fork server."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD + [META_WARMUP] if meta else PRELOAD)
    return ctx


def needs_meta(paths, unknown: bool = True) -> bool:
    """Whether notebooks are of a chapter whose checks run on the meta device, as far as their file names say;
    a name that is no chapter's counts as `unknown` (a class's folders hold strays: checkpoints, Untitled)."""
    from grader.chapters import find_chapter  # lazy: the command's start-up

    for path in paths:
        try:
            if find_chapter(Path(path).name).name in META_CHAPTERS:
                return True
        except ValueError:
            if unknown:
                return True
    return False


def server_environment(environ) -> dict:
    return {k: v for k, v in environ.items() if k in SERVER_ENV or k.startswith(SERVER_ENV_PREFIXES)}


def _running(pid: int) -> bool:
    """Whether a child process still runs, without reaping it (multiprocessing reaps its own)."""
    if not hasattr(os, "waitid"):
        return True
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return False


def start(meta: bool = True) -> None:
    """Start the fork server now (idempotent): it imports PRELOAD (and META_WARMUP with `meta`), seconds of
    work, while the caller goes on (a CLI command starts it before importing nbgrader). It starts with only
    `server_environment` of this process's environment, so no child inherits a secret."""
    context(meta)
    with _starting:
        server = forkserver._forkserver
        pid = getattr(server, "_forkserver_pid", None)
        if pid is not None and _running(pid):
            forkserver.ensure_running()
            return
        if pid is not None:  # it died: forget it, so that it is not restarted with this environment
            server._stop()
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(server_environment(saved))
        try:
            forkserver.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(saved)


def stop() -> None:
    """Stop the fork server at once, for a command that has finished grading: left to exit by itself
    it spends a second or more tearing torch down, holding the caller's stdout and stderr open. A
    grading service that stops mid-grading: the children it forked, which outlive it, are killed too
    (each one's sandbox dies with it, grader.boundary.confine)."""
    server = forkserver._forkserver
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGSTOP)  # it forks no child between the listing and the kill
        for child in _children(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server._stop()  # closes its pipe, reaps it and forgets it: a later pool starts a fresh one


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def run_child(*args) -> None:
    """A pool child's entry point: grader.boundary.child.run(*args) (confine, then run the cells)."""
    # lazy: the fork server preloaded the child's module, so this import is free in the child, while
    # the trusted process names this function without importing IPython and matplotlib itself
    from grader.boundary.child import run

    run(*args)

"""One grading service per class, and a service that ends with the process that started it (the hub).

A hub killed and restarted used to leave its `grader serve` running and start a second one: two services
on one course directory, and a submission graded twice. `hold(course_dir)` takes a lock in the course
directory for the life of this process; a second service on the same directory refuses with the pid of
the first. It is a POSIX record lock (`lockf`): the kernel drops it when the process ends, however it
ends, and a process forked from the service (the sandbox's workers) does not inherit it, so an orphaned
worker never keeps a class without its service.

`end_with_parent(pid)` makes the kernel send SIGTERM to this process when its parent dies (Linux's
PR_SET_PDEATHSIG), and gives a check that the parent is still `pid` (the hub's, which the hub's config
knows): a hub that died before the call, or a system without the signal, is caught by that check.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import signal
from pathlib import Path

LOCK = Path("on-submit") / "service.lock"  # in the course directory, beside the ledger
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class ServiceRunning(RuntimeError):
    """Another grading service holds this course directory's lock."""


def hold(course_dir: Path | str) -> int:
    """Lock the course directory for this process (until it ends); the lock's file descriptor.
    Raises ServiceRunning, naming the holder's pid, when another service holds it."""
    path = Path(course_dir) / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)  # a POSIX lock: closing this descriptor releases nothing of the holder's
        if err.errno not in (errno.EACCES, errno.EAGAIN):
            raise
        raise ServiceRunning(f"another grading service (pid {holder}) already serves {Path(course_dir)} "
                             f"(it holds {path}): one service per class. Stop it first, or give this one "
                             "another --course-dir") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def end_with_parent(parent: int, sig: int = signal.SIGTERM):
    """Have `sig` sent to this process when its parent dies; a function that says whether its parent is
    still `parent` (False once this process was re-parented, or if it already was)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the caller's polling alone ends the service
        pass
    return lambda: os.getppid() == parent

"""Copying a folder a learner handed in, on the trusted side (the grading service's inbound folder,
`grader collect`, `grader autograde` of nbgrader's submitted/): one function, `copy_tree`.

The grading user can read files the learner cannot (the class's source notebooks, other learners'
work), so nothing in the folder is followed: every entry is opened with O_NOFOLLOW relative to its
already-opened parent (a link swapped in between a check and the open is still refused), only
directories and regular files are accepted (a named pipe is opened non-blocking and refused, never
read), a file with a second hard link is refused (it is another file too), and sizes are taken from
the open file and bounded while reading (a 2 GB sparse file is refused by its size, never written out).
The copy goes to a fresh folder next to the target and is renamed into place whole, so a refused
submission leaves nothing behind. What it returns includes the kernel's time of the newest change to
anything copied (ctime, which a learner cannot set back): a time the learner did not write.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.boundary.score import shown
from grader.classroom.submissions import MAX_NOTEBOOK_MB

MAX_FILES = 64  # a submission is a notebook, its timestamp and secret, perhaps a few images
MAX_FILE_BYTES = MAX_NOTEBOOK_MB * 2 ** 20
MAX_TOTAL_BYTES = 3 * MAX_FILE_BYTES
MAX_DEPTH = 4
SKIPPED = (".ipynb_checkpoints",)  # JupyterLab's own copies: never graded
LINK = "a link (links are never followed)"
KINDS = {stat.S_IFIFO: "a named pipe", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device",
         stat.S_IFSOCK: "a socket", stat.S_IFLNK: LINK}


class UnsafeSubmission(ValueError):
    """A folder the trusted side will not copy; the text says which entry and why."""


@dataclass
class Copied:
    files: int
    bytes: int
    changed_at: float  # the newest ctime of the folder and everything copied (the kernel's clock)


@dataclass
class _Budget:
    files: int
    bytes: int
    file_bytes: int
    changed_at: float = 0.0


def copy_tree(source: Path, target: Path, max_files: int = MAX_FILES, max_file_bytes: int = MAX_FILE_BYTES,
              max_total_bytes: int = MAX_TOTAL_BYTES) -> Copied:
    """Copy the folder `source` to `target` (replaced whole), or raise UnsafeSubmission and copy nothing."""
    source, target = Path(source), Path(target)
    budget = _Budget(max_files, max_total_bytes, max_file_bytes)
    try:
        top = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as err:
        raise UnsafeSubmission(shown(f"{source.name}: not a folder the grader copies ({_why(err)})")) from None
    made = not target.parent.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".copying-", dir=target.parent))
    try:
        with _Closing(top):
            _copy_dir(top, staging, source.name, budget, 0)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if made:  # a refused learner leaves no folder either (submitted/<student>/)
            with contextlib.suppress(OSError):
                target.parent.rmdir()
        raise
    return Copied(max_files - budget.files, max_total_bytes - budget.bytes, budget.changed_at)


class _Closing:
    def __init__(self, fd: int):
        self.fd = fd

    def __enter__(self):
        return self.fd

    def __exit__(self, *exc):
        os.close(self.fd)


def _why(err: OSError) -> str:
    import errno

    if err.errno == errno.ELOOP:
        return LINK
    if err.errno == errno.ENOTDIR:
        return "it is not a folder"
    return os.strerror(err.errno or 0)


def _copy_dir(fd: int, into: Path, where: str, budget: _Budget, depth: int) -> None:
    info = os.fstat(fd)
    budget.changed_at = max(budget.changed_at, info.st_ctime)
    if depth > MAX_DEPTH:
        raise UnsafeSubmission(shown(f"{where}: folders nested deeper than {MAX_DEPTH}"))
    for name in sorted(os.listdir(fd)):
        if name in SKIPPED:
            continue
        path = f"{where}/{name}"
        try:
            child = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError as err:
            kind = KINDS.get(stat.S_IFMT(os.lstat(name, dir_fd=fd).st_mode)) if _exists(name, fd) else None
            raise UnsafeSubmission(shown(f"{path}: not copied: {kind or _why(err)}")) from None
        with _Closing(child):
            info = os.fstat(child)
            if stat.S_ISDIR(info.st_mode):
                (into / name).mkdir()
                _copy_dir(child, into / name, path, budget, depth + 1)
                continue
            if not stat.S_ISREG(info.st_mode):
                kind = KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
                raise UnsafeSubmission(shown(f"{path}: not copied: {kind}"))
            if info.st_nlink > 1:
                raise UnsafeSubmission(shown(f"{path}: not copied: a hard link (another file has it too)"))
            budget.files -= 1
            if budget.files < 0:
                raise UnsafeSubmission(shown(f"{path}: not copied: the submission holds too many files"))
            _copy_file(child, info.st_size, into / name, path, budget)
            budget.changed_at = max(budget.changed_at, os.fstat(child).st_ctime)  # after the read: any later write


def _exists(name: str, fd: int) -> bool:
    try:
        os.lstat(name, dir_fd=fd)
        return True
    except OSError:
        return False


def _copy_file(fd: int, size: int, target: Path, where: str, budget: _Budget) -> None:
    limit = min(budget.file_bytes, budget.bytes)
    if size > limit:
        raise UnsafeSubmission(shown(f"{where}: not copied: {size / 2 ** 20:.1f} MB, over the limit of "
                                     f"{limit / 2 ** 20:.1f} MB"))
    os.set_blocking(fd, True)
    written = 0
    with target.open("xb") as out:
        while chunk := os.read(fd, 1 << 20):
            written += len(chunk)
            if written > limit:  # the file grew while it was read
                raise UnsafeSubmission(shown(f"{where}: not copied: it grew past the limit while being copied"))
            out.write(chunk)
    budget.bytes -= written

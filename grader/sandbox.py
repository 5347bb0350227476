"""Confine the process that runs learner code (called in a freshly forked child, before any of it runs).

What a confined process gets, each part on its own so that a machine without one still gets the rest:

- resource limits: address space, CPU seconds, size of any file it writes, open files, no core dumps;
- Linux namespaces (a user namespace, so no privileges are needed): no network at all, and a
  filesystem of its own: a small tmpfs root holding read-only views of the system libraries and the
  Python installation, its job folder (the release folder and the submission), and nothing else,
  so no hidden specs, answers, gradebook or other submission;
- a seccomp filter: no new processes (fork, vfork, clone without CLONE_THREAD: a fork bomb or a
  shell command fails with PermissionError, threads still work) and no sockets but Unix ones.

`confine` returns the parts that could not be had, for the caller to say once.
"""
from __future__ import annotations

import ctypes
import os
import platform
import resource
import signal
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

LIBC = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
MNT_DETACH = 2
# statvfs f_flag bit -> the mount flag to keep when remounting a bind read-only (the kernel refuses
# to drop a flag a user namespace inherited locked).
KEPT_FLAGS = {os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC,
              os.ST_NOATIME: MS_NOATIME, os.ST_NODIRATIME: MS_NODIRATIME, os.ST_RELATIME: MS_RELATIME}

# Per architecture: audit arch, pivot_root, clone, clone3, socket, and fork/vfork where they exist.
SYSCALLS = {
    "x86_64": dict(arch=0xC000003E, pivot_root=155, clone=56, clone3=435, socket=41, fork=57, vfork=58),
    "aarch64": dict(arch=0xC00000B7, pivot_root=41, clone=220, clone3=435, socket=198),
}
CLONE_THREAD = 0x00010000
AF_UNIX = 1


@dataclass(frozen=True)
class Limits:
    memory_mb: int = 4096  # address space beyond what the preloaded libraries map
    cpu_seconds: int = 900  # the whole submission, a backstop behind the per-cell timeout
    file_mb: int = 64  # any one file written, stdout redirected to a file included
    open_files: int = 256


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: None if s is None else s.encode())
    _check(LIBC.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source} on {target}")


def set_limits(limits: Limits) -> None:
    mb = 1024 * 1024
    try:  # what the preloaded libraries already map does not count
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * resource.getpagesize()
    except OSError:
        mapped = 2048 * mb
    for which, value in ((resource.RLIMIT_AS, mapped + limits.memory_mb * mb), (resource.RLIMIT_CPU, limits.cpu_seconds),
                         (resource.RLIMIT_FSIZE, limits.file_mb * mb), (resource.RLIMIT_CORE, 0),
                         (resource.RLIMIT_NOFILE, limits.open_files)):
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead of killing


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _bind(source: str, target: str, writable: bool = False) -> None:
    _mount(source, target, None, MS_BIND | MS_REC)
    if not writable:
        kept = sum(flag for bit, flag in KEPT_FLAGS.items() if os.statvfs(source).f_flag & bit)
        _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | kept)


def _place(root: str, path: str, writable: bool = False) -> None:
    """Make `path` of the real filesystem appear at the same place under `root`."""
    target = root + path
    if os.path.islink(path) and not writable:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.symlink(os.readlink(path), target)
        path = os.path.realpath(path)
        target = root + path
    if os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
    elif os.path.exists(path):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    else:
        return
    if not os.path.ismount(target) or writable:
        _bind(path, target, writable)


def python_paths() -> list[str]:
    """The Python installation: interpreter prefixes and every sys.path folder outside the job."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    paths |= {p for p in sys.path if p and os.path.isdir(p) and "site-packages" in p}
    return sorted(paths)


SYSTEM = ("/usr", "/bin", "/lib", "/lib64", "/lib32", "/etc", "/sys", "/opt")


def private_root(job_dir: str, new_root: str) -> None:
    """unshare user, mount and network namespaces; pivot into a tmpfs root with read-only system and
    Python folders and the writable job folder. `new_root` is an empty folder beside the job."""
    uid, gid = os.getuid(), os.getgid()
    _check(LIBC.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", new_root, "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=0755")
    for path in SYSTEM:
        _place(new_root, path)
    for path in python_paths():
        _place(new_root, os.path.realpath(path))
        if os.path.realpath(path) != os.path.abspath(path):
            _place(new_root, os.path.abspath(path))
    os.makedirs(new_root + "/dev", exist_ok=True)
    for device in ("null", "zero", "random", "urandom"):
        _place(new_root, f"/dev/{device}", writable=True)
    os.makedirs(new_root + "/proc", exist_ok=True)
    _mount("/proc", new_root + "/proc", None, MS_BIND | MS_REC)
    os.makedirs(new_root + "/tmp", mode=0o1777, exist_ok=True)
    _place(new_root, job_dir, writable=True)
    old = new_root + "/.old-root"
    os.makedirs(old, exist_ok=True)
    nr = SYSCALLS[platform.machine()]["pivot_root"]
    _check(LIBC.syscall(nr, new_root.encode(), old.encode()), "pivot_root")
    os.chdir("/")
    _check(LIBC.umount2(b"/.old-root", MNT_DETACH), "umount old root")
    os.rmdir("/.old-root")
    os.chdir(job_dir)


def _filter(numbers: dict) -> bytes:
    """A classic-BPF seccomp program: no new processes, no non-Unix sockets, clone3 reported missing
    (so the C library falls back to clone, whose flags the filter can read)."""
    LD_W_ABS, JEQ_K, JSET_K, RET_K = 0x20, 0x15, 0x45, 0x06
    ALLOW, ERRNO = 0x7FFF0000, 0x00050000
    eperm, enosys, eacces = ERRNO | 1, ERRNO | 38, ERRNO | 13
    prog: list[tuple[int, int, int, int]] = []

    def op(code, k, jt=0, jf=0):
        prog.append((code, jt, jf, k))

    op(LD_W_ABS, 4)  # arch
    op(JEQ_K, numbers["arch"], 1, 0)
    op(RET_K, eperm)  # a foreign-architecture call is refused
    op(LD_W_ABS, 0)  # syscall number
    op(JEQ_K, numbers["clone3"], 0, 1)
    op(RET_K, enosys)
    for name in ("fork", "vfork"):
        if name in numbers:
            op(JEQ_K, numbers[name], 0, 1)
            op(RET_K, eperm)
    op(JEQ_K, numbers["clone"], 0, 4)
    op(LD_W_ABS, 16)  # clone flags (low word of args[0])
    op(JSET_K, CLONE_THREAD, 1, 0)
    op(RET_K, eperm)
    op(RET_K, ALLOW)
    op(JEQ_K, numbers["socket"], 0, 4)
    op(LD_W_ABS, 16)  # socket domain
    op(JEQ_K, AF_UNIX, 0, 1)
    op(RET_K, ALLOW)
    op(RET_K, eacces)
    op(RET_K, ALLOW)
    return b"".join(struct.pack("HBBI", *ins) for ins in prog)


def no_new_processes() -> None:
    numbers = SYSCALLS.get(platform.machine())
    if numbers is None:
        raise OSError(f"no seccomp filter for {platform.machine()}")
    program = _filter(numbers)
    buffer = ctypes.create_string_buffer(program)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    _check(LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)")
    _check(LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def confine(job_dir: str, new_root: str, limits: Limits) -> list[str]:
    """Confine this (single-threaded, freshly forked) process; return what could not be done."""
    missing = []
    if sys.platform == "linux":
        try:
            private_root(job_dir, new_root)
        except OSError as err:
            missing.append(f"no private filesystem and network (namespaces: {err})")
            os.chdir(job_dir)
    else:
        missing.append("no private filesystem and network (namespaces need Linux)")
        os.chdir(job_dir)
    set_limits(limits)
    if sys.platform == "linux":
        try:
            no_new_processes()
        except OSError as err:
            missing.append(f"processes and sockets not filtered (seccomp: {err})")
    else:
        missing.append("processes and sockets not filtered (seccomp needs Linux)")
    return missing


PRELOAD = ["grader.worker"]  # what a pool's fork server imports once: torch, IPython, matplotlib (never the specs)


def start_fork_server() -> None:
    """Start the pool's fork server now (idempotent): it imports PRELOAD, seconds of work, while the
    caller goes on (a CLI command starts it before importing nbgrader)."""
    import multiprocessing
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    forkserver.ensure_running()


def stop_fork_server() -> None:
    """Stop the fork server at once, for a command that has finished grading: left to exit by itself
    it spends a second or more tearing torch down, holding the caller's stdout and stderr open."""
    from multiprocessing import forkserver

    server = forkserver._forkserver
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server._stop()  # closes its pipe, reaps it and forgets it: a later pool starts a fresh one


def run_confined(*args) -> None:
    """A pool child's entry point: grader.worker.run(*args) (confine, then run the cells). The fork
    server preloaded grader.worker, so this import is free in the child, and the trusted process can
    name this function without importing torch, IPython and the specs itself."""
    from grader.worker import run

    run(*args)

"""Child side: confine the process that runs learner code (in a freshly forked child, before any of it runs).

What a confined process gets, each part on its own so that a machine without one still gets the rest:

- an environment of a few harmless variables (the fork server was started with no more either,
  so no secret of the grader's environment is in its memory or in /proc/self/environ), its own
  session (a signal to "my process group" reaches nothing else), and, where the grader may make
  one, a memory cgroup of its own (grader.boundary.memcg);
- resource limits: address space, CPU seconds, size of any file it writes, open files, no core dumps,
  no POSIX message queues;
- Linux namespaces (a user namespace, so no privileges are needed): no network at all, no SysV IPC
  shared with the host; processes of
  its own (a PID namespace where it is PID 1, with a fresh read-only /proc: no other process can be
  seen or signalled); and a filesystem of its own: a tmpfs root of `Limits.disk_mb` holding
  read-only views of the system libraries and the Python installation and a copy of its job folder
  (the release folder), and nothing else, so no hidden specs, answers, gradebook or other
  submission, and all it writes (its folder, /tmp) is counted in that one capped tmpfs;
- a seccomp filter (grader.boundary.seccomp): no new processes (a fork bomb or a shell command fails with
  PermissionError, threads still work), no sockets but Unix ones, no memory that RLIMIT_AS does not
  see (memfd_create, SysV shared memory), no change to its mounts or namespaces once made.

A PID namespace only holds the caller's children, so the forked child forks once more: the
grandchild is confined and runs the cells; the child in between only waits and then ends the way
the grandchild ended (its exit status, or killed by the same signal), so the pool sees the
grandchild's end, and killing the child kills the grandchild (PR_SET_PDEATHSIG).

`confine` returns the parts that could not be had, for the caller to say once.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import resource
import select
import shutil
import signal
import sys
from dataclasses import dataclass

from grader.boundary import memcg
from grader.boundary.seccomp import no_new_processes

LIBC = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
CLONE_NEWIPC, CLONE_NEWPID = 0x08000000, 0x20000000
PR_SET_PDEATHSIG = 1
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
MNT_DETACH = 2
# statvfs f_flag bit -> the mount flag to keep when remounting a bind read-only (the kernel refuses
# to drop a flag a user namespace inherited locked).
KEPT_FLAGS = {os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC,
              os.ST_NOATIME: MS_NOATIME, os.ST_NODIRATIME: MS_NODIRATIME, os.ST_RELATIME: MS_RELATIME}

PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}  # the syscall number: Python has no pivot_root


@dataclass(frozen=True)
class Limits:
    memory_mb: int = 4096  # address space beyond what the preloaded libraries map
    cpu_seconds: int = 900  # the whole submission, a backstop behind the per-cell timeout
    file_mb: int = 64  # any one file written, stdout redirected to a file included
    open_files: int = 256
    disk_mb: int = 512  # all it writes (its folder, /tmp): one tmpfs, so memory too
    submission_seconds: int = 1800  # wall clock for the whole submission (the trusted side enforces it)

    def cgroup_bytes(self) -> int:
        """What a memory cgroup lets the child hold: its memory and its writable space."""
        return (self.memory_mb + self.disk_mb) * 1024 * 1024


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    _check(LIBC.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source} on {target}")


def set_limits(limits: Limits) -> None:
    mb = 1024 * 1024
    try:  # what the preloaded libraries already map does not count
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * resource.getpagesize()
    except OSError:
        mapped = 2048 * mb
    for which, value in ((resource.RLIMIT_AS, mapped + limits.memory_mb * mb),
                         (resource.RLIMIT_CPU, limits.cpu_seconds),
                         (resource.RLIMIT_FSIZE, limits.file_mb * mb), (resource.RLIMIT_CORE, 0),
                         (resource.RLIMIT_NOFILE, limits.open_files), (resource.RLIMIT_MSGQUEUE, 0)):
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


def private_root(job_dir: str, new_root: str, disk_mb: int = Limits.disk_mb, close=()) -> None:
    """unshare user, mount, network, PID and IPC namespaces, fork (the caller, in between, only waits:
    `_mirror`), and pivot the grandchild, PID 1 of its namespace, into a tmpfs root of `disk_mb` with
    read-only system and Python folders, a fresh read-only /proc and a copy of the job folder.
    `new_root` is an empty folder beside the job; `close`: what the process in between lets go of."""
    uid, gid = os.getuid(), os.getgid()
    _check(LIBC.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _fork_into_namespace(close)
    _mount("tmpfs", new_root, "tmpfs", MS_NOSUID | MS_NODEV, f"size={disk_mb}m,mode=0755")
    for path in SYSTEM:
        _place(new_root, path)
    for path in python_paths():
        _place(new_root, os.path.realpath(path))
        if os.path.realpath(path) != os.path.abspath(path):
            _place(new_root, os.path.abspath(path))
    os.makedirs(new_root + "/dev", exist_ok=True)
    for device in ("null", "zero", "random", "urandom"):  # no /dev/shm: shared memory is not counted
        _place(new_root, f"/dev/{device}", writable=True)
    os.makedirs(new_root + "/proc", exist_ok=True)
    # mounted before the host's /proc leaves the view: the kernel lets a user namespace mount a proc
    # only while a fully visible one is there
    _mount("proc", new_root + "/proc", "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.makedirs(new_root + "/tmp", mode=0o1777, exist_ok=True)
    shutil.copytree(job_dir, new_root + job_dir, symlinks=True)  # written in the capped tmpfs, not on disk
    old = new_root + "/.old-root"
    os.makedirs(old, exist_ok=True)
    _check(LIBC.syscall(PIVOT_ROOT[platform.machine()], new_root.encode(), old.encode()), "pivot_root")
    os.chdir("/")
    _check(LIBC.umount2(b"/.old-root", MNT_DETACH), "umount old root")
    os.rmdir("/.old-root")
    os.chdir(job_dir)


def _fork_into_namespace(close) -> None:
    """Fork after unshare(CLONE_NEWPID); return in the child (PID 1 of the new namespace, killed with
    its parent). The parent never returns: it ends as the child ended."""
    gone_r, gone_w = os.pipe()  # the child reads EOF here once its parent is gone
    pid = os.fork()
    if pid:
        os.close(gone_r)
        for item in close:
            item.close()
        _mirror(pid)
    os.close(gone_w)
    _check(LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(pdeathsig)")
    if select.select([gone_r], [], [], 0)[0]:  # the parent died before the line above
        os._exit(1)
    os.close(gone_r)
    os.setsid()  # its own process group: kill(0, ...) reaches only itself


def _mirror(pid: int) -> None:
    """Wait for `pid`, then end the same way: its exit status, or killed by the same signal (PID 1 of a
    namespace ignores signals it has no handler for when sent from inside, so the pool, and
    pool._exit_reason, read the grandchild's end from this process)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:  # noqa: BLE001 - killed or interrupted: the grandchild dies with this process
        os._exit(1)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [number])
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP cannot be caught anyway
            pass
        os.kill(os.getpid(), number)
        os._exit(128 + number)  # a signal whose default is not to end a process
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


CHILD_ENV = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ")  # all a child keeps of its environment


def clean_environment(keep=CHILD_ENV) -> None:
    """Keep only `keep` in os.environ, and blank the environment block the process was started with
    (what /proc/self/environ shows), whoever started the fork server."""
    kept = {name: os.environ[name] for name in keep if name in os.environ}
    os.environ.clear()
    os.environ.update(kept)
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end: fields 50 and 51 of stat(5)
        if 0 < start < end:
            ctypes.memset(start, 0, end - start)
    except (OSError, ValueError, IndexError):
        pass


def confine(job_dir: str, new_root: str, limits: Limits, cgroup: str | None = None, close=()) -> list[str]:
    """Confine this (single-threaded, freshly forked) process; return what could not be done. With
    namespaces this returns in a grandchild (`private_root`); `close` is what the process in
    between lets go of (the pipe to the trusted side), `cgroup` a memory cgroup to join."""
    missing = []
    with contextlib.suppress(OSError):
        os.setsid()  # a process group of its own, apart from the grader's
    clean_environment()
    if cgroup:
        try:
            memcg.join(cgroup)
        except OSError as err:
            missing.append(f"memory not counted by a cgroup ({err})")
    if sys.platform == "linux":
        try:
            private_root(job_dir, new_root, limits.disk_mb, close)
        except OSError as err:
            missing.append(f"no private filesystem, processes and network (namespaces: {err})")
            os.chdir(job_dir)
    else:
        missing.append("no private filesystem, processes and network (namespaces need Linux)")
        os.chdir(job_dir)
    set_limits(limits)
    if sys.platform == "linux":
        try:
            no_new_processes()
        except OSError as err:
            missing.append(f"processes, sockets and shared memory not filtered (seccomp: {err})")
    else:
        missing.append("processes, sockets and shared memory not filtered (seccomp needs Linux)")
    return missing

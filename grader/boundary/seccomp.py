"""Child side: its seccomp filter (grader.boundary.confine), what the kernel refuses it whatever it runs.

No new processes (fork, vfork, clone without CLONE_THREAD: a fork bomb or a shell command fails
with PermissionError, threads still work), no sockets but Unix ones, and no memory that RLIMIT_AS
does not see (memfd_create, SysV shared memory; /dev/shm is not in the sandbox either); nor can it
change its filesystem view or namespaces once made (mount, umount, pivot_root, unshare, setns: the
read-only /proc stays read-only), trace or signal another process (ptrace, process_vm_*, pidfds;
kill and its kin only to itself or its own process group). With a PID namespace no other process
is in sight anyway; without one (a machine with no user namespaces) this is what stops a learner's
`os.kill(-1, SIGKILL)` from reaching every process of the grader's user.
"""
from __future__ import annotations

import ctypes
import os
import platform
import struct

LIBC = ctypes.CDLL(None, use_errno=True)

# Per architecture: audit arch, clone, clone3, socket, and the calls refused outright.
SYSCALLS = {
    "x86_64": dict(arch=0xC000003E, clone=56, clone3=435, socket=41,
                   refused=dict(fork=57, vfork=58, memfd_create=319, shmget=29, mount=165, umount2=166,
                                pivot_root=155, unshare=272, setns=308, ptrace=101, process_vm_readv=310,
                                process_vm_writev=311, pidfd_open=434, pidfd_getfd=438, pidfd_send_signal=424),
                   to_self=dict(kill=62, tkill=200, tgkill=234, rt_sigqueueinfo=129, rt_tgsigqueueinfo=297)),
    "aarch64": dict(arch=0xC00000B7, clone=220, clone3=435, socket=198,
                    refused=dict(memfd_create=279, shmget=194, mount=40, umount2=39, pivot_root=41,
                                 unshare=97, setns=268, ptrace=117, process_vm_readv=270, process_vm_writev=271,
                                 pidfd_open=434, pidfd_getfd=438, pidfd_send_signal=424),
                    to_self=dict(kill=129, tkill=130, tgkill=131, rt_sigqueueinfo=138, rt_tgsigqueueinfo=240)),
}
CLONE_THREAD = 0x00010000
AF_UNIX = 1


def _filter(numbers: dict, pid: int) -> bytes:
    """A classic-BPF seccomp program: no new processes, no non-Unix sockets, no memfd or SysV shared
    memory, no tracing, signals only to process `pid` (itself) or its own group (0), clone3 reported
    missing (so the C library falls back to clone, whose flags it can read)."""
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
    for number in numbers["refused"].values():
        op(JEQ_K, number, 0, 1)
        op(RET_K, eperm)
    for number in numbers["to_self"].values():
        op(JEQ_K, number, 0, 5)
        op(LD_W_ABS, 16)  # the target: pid or thread group id (low word of args[0]; pid_t is 32 bits)
        op(JEQ_K, pid, 2, 0)
        op(JEQ_K, 0, 1, 0)
        op(RET_K, eperm)
        op(RET_K, ALLOW)
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
    program = _filter(numbers, os.getpid())
    buffer = ctypes.create_string_buffer(program)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    for args, what in (((PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)"),
                      ((PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")):
        if LIBC.prctl(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

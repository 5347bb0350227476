"""Both sides: a memory cgroup per submission (the trusted side makes it, the child joins it), where allowed.

RLIMIT_AS bounds the address space a child maps, not the memory it holds: pages of a tmpfs or a
memfd outlive their mapping. A memory cgroup is the kernel's own count of all of it (anonymous
memory, tmpfs, page cache, kernel buffers), and its limit ends the child with SIGKILL.

Who can make one: root, on cgroup v1 (a child of this process's memory cgroup) or v2; on v2 a user
the system delegated a subtree to (systemd's `Delegate=yes`, e.g. a `systemd-run --user --scope`),
where the subtree already enables the memory controller for its children. Elsewhere (a plain user
on v1, a container without a writable cgroupfs) `create` returns None and the sandbox's other
bounds hold: RLIMIT_AS, no memfd or SysV shared memory, and writable space on a size-capped tmpfs.
"""
from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

_names = itertools.count()


def _own_cgroups() -> dict[str, str]:
    """controller ('' for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    found = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, super options) of every cgroup mount."""
    mounts = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return mounts
    for line in lines:
        before, _, after = line.partition(" - ")
        fstype, _source, options = (after.split() + ["", ""])[:3]
        if fstype in ("cgroup", "cgroup2"):
            mounts.append((before.split()[4], fstype, set(options.split(","))))
    return mounts


def _parent() -> tuple[Path, str] | None:
    """The folder a child memory cgroup can be made in, and the cgroup version ('v1' or 'v2')."""
    own = _own_cgroups()
    for point, fstype, options in _mounts():
        if fstype == "cgroup2" and "" in own:
            base = Path(point + own[""])
            try:
                enabled = (base / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if "memory" in enabled and os.access(base, os.W_OK):
                return base, "v2"
        elif fstype == "cgroup" and "memory" in options and "memory" in own:
            base = Path(point + own["memory"])
            if os.access(base, os.W_OK) and (base / "memory.limit_in_bytes").exists():
                return base, "v1"
    return None


def create(limit_bytes: int) -> str | None:
    """A fresh memory cgroup holding at most `limit_bytes`, no swap; None where none can be made."""
    parent = _parent()
    if parent is None:
        return None
    base, version = parent
    path = base / f"grader-{os.getpid()}-{next(_names)}"
    try:
        path.mkdir()
        limit, swap = ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") if version == "v1" \
            else ("memory.max", "memory.swap.max")
        (path / limit).write_text(str(limit_bytes))
        try:  # no swap to spill into, where the kernel counts swap
            (path / swap).write_text(str(limit_bytes) if version == "v1" else "0")
        except OSError:
            pass
    except OSError:
        remove(str(path))
        return None
    return str(path)


def join(path: str) -> None:
    """Move this process (the sandboxed child, before it leaves the host's user namespace) in."""
    Path(path, "cgroup.procs").write_text("0")


def remove(path: str | None) -> None:
    """Remove a cgroup once its processes are gone (the kernel may take a moment to let go)."""
    for _ in range(50):
        try:
            os.rmdir(path) if path else None
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)

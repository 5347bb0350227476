"""One grading service per class (grader.classroom.onsubmit.servicelock), and a service that ends with its hub.

The processes are real: a service holding the course directory's lock, a second `grader serve` on the
same directory, a worker forked from the service outliving it, a "hub" killed with SIGKILL while its
`grader serve --hub-pid` runs. tests/test_hub.py does the same with a real JupyterHub.
"""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from grader.classroom.onsubmit import servicelock
from tests.test_browser import free_port, wait_for

BIN = Path(sys.executable).parent
HOLD = textwrap.dedent("""
    import os, sys, time
    from grader.classroom.onsubmit import servicelock
    servicelock.hold(sys.argv[1])
    if len(sys.argv) > 2 and os.fork() == 0:  # a worker forked from the service, as the sandbox's are
        time.sleep(600)
        os._exit(0)
    print("held", flush=True)
    time.sleep(600)
""")


def holder(course: Path, *extra: str) -> subprocess.Popen:
    """A process that holds the course directory's lock (and, with `extra`, has forked a child)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(course), *extra], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (killed, not yet reaped by its parent) is not running
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_second_service_on_one_course_directory_refuses_naming_the_first(tmp_path):
    first = holder(tmp_path)
    try:
        second = subprocess.run([str(BIN / "grader"), "serve", "--course-dir", str(tmp_path), "--exchange",
                                 str(tmp_path / "exchange")], capture_output=True, text=True, timeout=120,
                                env=dict(os.environ, JUPYTERHUB_API_TOKEN="x"))
        assert second.returncode == 1, second
        assert f"another grading service (pid {first.pid}) already serves {tmp_path}" in second.stderr, second.stderr
        assert "one service per class" in second.stderr
        with pytest.raises(servicelock.ServiceRunning, match=f"pid {first.pid}"):  # and in this process
            servicelock.hold(tmp_path)
    finally:
        stop(first)


def test_the_lock_ends_with_the_service_not_with_its_workers(tmp_path):
    """Killed with SIGKILL, the service leaves the lock free, though a child it forked still runs."""
    first = holder(tmp_path, "fork")
    children = [int(p) for p in Path(f"/proc/{first.pid}/task/{first.pid}/children").read_text().split()]
    first.kill()
    first.wait(timeout=30)
    try:
        assert children and all(alive(pid) for pid in children)
        fd = servicelock.hold(tmp_path)  # a new service starts
        assert (tmp_path / servicelock.LOCK).read_text() == f"{os.getpid()}\n"
        os.close(fd)
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)


def free(course: Path) -> int | None:
    """The course directory's lock, taken here, once no service holds it."""
    try:
        return servicelock.hold(course)
    except servicelock.ServiceRunning:
        return None


HUB = textwrap.dedent("""
    import os, subprocess, sys, time
    service = subprocess.Popen([*sys.argv[1:], "--hub-pid", str(os.getpid())])
    print(service.pid, flush=True)
    time.sleep(600)
""")


def test_the_service_ends_with_the_hub_that_started_it(tmp_path):
    """A stand-in hub starts `grader serve --hub-pid <its pid>` as JupyterHub starts a managed service and
    is killed; the service ends within seconds and leaves the lock free for the next hub's service."""
    course = tmp_path / "course"
    env = dict(os.environ, JUPYTERHUB_API_TOKEN=secrets.token_hex(8),
               JUPYTERHUB_SERVICE_URL=f"http://127.0.0.1:{free_port()}", JUPYTERHUB_SERVICE_PREFIX="/services/grading/")
    command = [str(BIN / "grader"), "serve", "--course-dir", str(course), "--exchange", str(tmp_path / "exchange")]
    hub = subprocess.Popen([sys.executable, "-c", HUB, *command], stdout=subprocess.PIPE, text=True, env=env)
    service = int(hub.stdout.readline())
    try:
        pid_file = course / "on-submit" / "service.pid"
        wait_for(lambda: pid_file.is_file() and pid_file.read_text().strip() == str(service), 120,
                 "the service to start")
        hub.kill()
        hub.wait(timeout=30)
        os.close(wait_for(lambda: free(course), 20, "the service to end with its hub (its lock freed)", 0.2))
        wait_for(lambda: not alive(service), 10, "the service's process to end")  # its lock goes first
    finally:
        stop(hub)
        if alive(service):
            os.kill(service, signal.SIGKILL)


def test_a_service_whose_hub_already_ended_does_not_start(tmp_path):
    """The hub died while it was starting the service: the service is an orphan from its first line and
    refuses, rather than grading beside the next hub's."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    started = subprocess.run([str(BIN / "grader"), "serve", "--course-dir", str(tmp_path), "--exchange",
                              str(tmp_path / "exchange"), "--hub-pid", str(gone.pid)], capture_output=True, text=True,
                             timeout=120, env=dict(os.environ, JUPYTERHUB_API_TOKEN="x"))
    assert started.returncode == 1 and f"the hub that started it (pid {gone.pid}) has ended" in started.stderr, started
    os.close(servicelock.hold(tmp_path))  # and it left the lock free


def family(pid: int) -> list[int]:
    """`pid`'s descendants, children first."""
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                children = [int(p) for p in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def sandboxes(service: int) -> list[int]:
    """The grading sandboxes running under a service: PID 1 of a namespace of their own (grader.boundary.confine)."""
    def in_a_namespace(pid: int) -> bool:
        status = Path(f"/proc/{pid}/status").read_text() if Path(f"/proc/{pid}/status").exists() else ""
        return any(line.startswith("NSpid:") and len(line.split()) > 2 for line in status.splitlines())
    return [pid for pid in family(service) if in_a_namespace(pid)]


def test_a_service_stopped_mid_grading_ends_at_once_and_the_next_service_grades_it(tmp_path):
    """The hub stops its service with SIGINT (and SIGTERM 10 s later): a service grading a notebook whose cell runs
    for minutes ends within seconds, quietly, its sandboxes with it; the entry stays at "grading", the next
    service queues it again and grades it."""
    from grader.authoring import samples
    from grader.boundary.confine import Limits
    from grader.boundary.pool import Pool
    from grader.classroom.ledger import GRADED, GRADING, QUEUED, Ledger
    from grader.classroom.onsubmit.service import SERVICE_RESTARTED, Service
    from tests.test_onsubmit import CHAPTER, TOTAL, course, submit

    root, exchange = course(tmp_path)
    env = dict(os.environ, JUPYTERHUB_API_TOKEN=secrets.token_hex(8), COURSE_LEARNERS="ada",
               JUPYTERHUB_SERVICE_URL=f"http://127.0.0.1:{free_port()}", JUPYTERHUB_SERVICE_PREFIX="/services/grading/")
    log = tmp_path / "service.log"
    service = subprocess.Popen([str(BIN / "grader"), "serve", "--course-dir", str(root), "--exchange", str(exchange),
                                "--no-check-owner", "--timeout", "600"], env=env,
                               stdout=log.open("w"), stderr=subprocess.STDOUT)
    slow = samples.reference(CHAPTER)
    slow.cells.insert(0, nbformat.v4.new_code_cell("import time\ntime.sleep(600)"))
    started: list[int] = []
    try:
        wait_for(lambda: (root / "on-submit" / "service.pid").is_file(), 300, "the service to start")
        submit(exchange, "ada", slow)
        wait_for(lambda: sandboxes(service.pid), 300, "the grading's sandbox")
        time.sleep(5)  # in its 600 s cell by now
        started = family(service.pid)
        stopped_at = time.monotonic()
        service.send_signal(signal.SIGINT)  # as JupyterHub stops a managed service
        service.wait(timeout=120)
        took = time.monotonic() - stopped_at
        wait_for(lambda: not [pid for pid in started if alive(pid)], 10, "the service's processes to end")
    finally:
        for pid in [service.pid, *started]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    output = log.read_text()
    print(f"the service stopped in {took:.1f} s")
    assert took < 15, f"the service took {took:.0f} s to stop:\n{output}"
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    assert "stopped while grading ada" in output, output
    assert [e.status for e in Ledger(root).of("ada")] == [GRADING]  # nothing recorded of the cut-short grading

    with Pool(jobs=1, timeout=5, limits=Limits()) as pool:  # the next service: the slow cell stopped at 5 s
        pool.start()
        restarted = Service(root, exchange, pool)
        [entry] = restarted.ledger.of("ada")
        assert entry.status == QUEUED and entry.reason == SERVICE_RESTARTED and entry.tries == 1, entry
        [entry] = restarted.step()
    assert entry.status == GRADED and entry.score == TOTAL, entry

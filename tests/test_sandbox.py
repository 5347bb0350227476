"""The sandboxed child's confinement (grader.boundary.confine, grader.boundary.memcg) and the pool's bounds on one
submission (grader.boundary.pool): what a learner cell can see, signal, hold and cost. Each test runs plain
code cells through the real pool: fork server, fork, namespaces, limits, seccomp."""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing import forkserver
from pathlib import Path

import nbformat
import pytest

from grader.authoring import samples
from grader.boundary import memcg
from grader.boundary.confine import Limits, clean_environment, no_new_processes
from grader.boundary.forkserver import META_CHAPTERS, needs_meta, server_environment
from grader.boundary.forkserver import start as start_fork_server
from grader.boundary.forkserver import stop as stop_fork_server
from grader.boundary.pool import Job, Pool, Verdict
from grader.chapters import CHAPTERS, REPO, find_chapter

CHAPTER = find_chapter("02")


def namespaces_work() -> bool:
    return subprocess.run(["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount", "--mount-proc",
                           "true"], capture_output=True).returncode == 0 if shutil.which("unshare") else False


needs_namespaces = pytest.mark.skipif(sys.platform != "linux" or not namespaces_work(),
                                      reason="no user and PID namespaces on this machine")


def run_cells(tmp_path, *sources: str, timeout: float = 10, **limits) -> Verdict:
    release = tmp_path / "release"
    release.mkdir(exist_ok=True)
    (release / "given.txt").write_text("from the release folder")
    with Pool(jobs=1, timeout=timeout, limits=Limits(**{"memory_mb": 1024, **limits})) as pool:
        return pool.judge(Job("someone/02", CHAPTER, [{"kind": "code", "source": s} for s in sources], release))


def printed(verdict: Verdict, index: int = 0) -> str:
    return "".join(o.get("text", "") + o.get("evalue", "") for o in verdict.cells[index]["outputs"])


@needs_namespaces
def test_the_child_sees_only_itself_in_a_fresh_read_only_proc(tmp_path):
    verdict = run_cells(tmp_path, """
import ctypes, os
print(sorted(p for p in os.listdir('/proc') if p.isdigit()), os.getpid(), os.getppid())
print([line for line in open('/proc/mounts') if ' /proc ' in line])
libc = ctypes.CDLL(None, use_errno=True)
print('remount', libc.mount(None, b'/proc', None, 32 | 2 | 4 | 8, None), ctypes.get_errno())  # MS_REMOUNT, rw
print(open('given.txt').read())""")
    text = printed(verdict)
    assert "['1'] 1 0" in text, text  # PID 1 of its own namespace; its parent is not in it
    assert "proc /proc proc ro,nosuid,nodev,noexec" in text and "remount -1 1" in text, text  # EPERM
    assert "from the release folder" in text
    assert verdict.error is None and verdict.missing == []


def test_the_shell_a_child_inherits_holds_nothing_of_the_learner_before(tmp_path):
    """The fork server builds the IPython shell once (grader.boundary.shell_preload), before any learner's code
    runs; what one learner's cells do to it (names, settings, an event hook, its key-value store) stays in that
    learner's child, and each child's profile folder is in its own sandbox. Both learners in one pool: the
    second child is forked from the server the first one was."""
    first = """
ip = get_ipython()
secret_answer = 42
ip.user_ns['planted'] = 1
ip.events.register('pre_run_cell', lambda *args: print('hooked'))
ip.autocall = 2
ip.db['planted'] = 'from the learner before'
print(ip.profile_dir.location)
"""
    second = """
ip = get_ipython()
print(sorted(n for n in ('secret_answer', 'planted') if n in ip.user_ns), ip.autocall, ip.profile_dir.location)
"""
    release = tmp_path / "release"
    release.mkdir()
    cells = [{"kind": "code", "source": s} for s in (second, "print(get_ipython().db.get('planted'))")]
    with Pool(jobs=1, timeout=10, limits=Limits(memory_mb=1024)) as pool:
        first = pool.judge(Job("ann/02", CHAPTER, [{"kind": "code", "source": first}], release))
        second = pool.judge(Job("ben/02", CHAPTER, cells, release))
    assert printed(first) == "/tmp/ipython/profile_default\n"
    assert printed(second) == "[] 0 /tmp/ipython/profile_default\n"
    assert printed(second, 1) == "None\n"


def test_a_child_inherits_a_frozen_heap_and_the_collector_as_usual(tmp_path):
    """The fork server imports torch, IPython and matplotlib with the collector's full passes held off, then
    freezes its heap (grader.boundary.heap): a full pass in a child scans the learner's objects, not the
    modules' million, and the thresholds are torch-free Python's again, so the learner's cycles are collected."""
    release = tmp_path / "release"
    release.mkdir()
    source = "import gc\nprint(gc.get_freeze_count() > 100_000, gc.get_threshold() == (700, 10, 10))"
    with Pool(jobs=1, timeout=10, limits=Limits(memory_mb=1024)) as pool:
        verdict = pool.judge(Job("ann/02", CHAPTER, [{"kind": "code", "source": source}], release))
    assert printed(verdict) == "True True\n"


def test_a_child_finds_the_meta_kernels_imports_made_unless_its_command_said_no(tmp_path):
    """Chapter 09's checks call the learner's code on the meta device, whose first call imports torch._dynamo
    (1.3 s): the fork server makes one such call (grader.boundary.meta_warmup), except for `grader grade` of
    notebooks of no chapter that needs it (start(meta=False))."""
    release = tmp_path / "release"
    release.mkdir()
    cells = [{"kind": "code", "source": "import sys\nprint('torch._dynamo' in sys.modules)"}]
    found = {}
    for meta in (False, True):
        stop_fork_server()
        start_fork_server(meta=meta)
        with Pool(jobs=1, timeout=10, limits=Limits(memory_mb=1024)) as pool:
            found[meta] = printed(pool.judge(Job("ann/02", CHAPTER, cells, release)))
    assert found == {False: "False\n", True: "True\n"}


def test_the_meta_warm_up_is_for_the_chapters_whose_checks_use_the_meta_device():
    uses_meta = {c.name for c in CHAPTERS
                 if "meta" in (REPO / "grader" / "boundary" / "specs" / f"{c.name}.py").read_text()}
    assert uses_meta == set(META_CHAPTERS)
    assert not needs_meta(["ann/gpt_generation.ipynb", "self_attention.ipynb"])
    assert needs_meta(["ann/gpt_generation.ipynb", "ben/llama_modern.ipynb"])
    assert needs_meta(["llama_modern-Copy1.ipynb"])  # told by its cells later: it may be 09's
    assert not needs_meta(["ann/self_attention.ipynb", "ann/Untitled.ipynb"], unknown=False)  # a class's strays


def test_the_grading_process_holds_full_passes_off_until_its_imports_are_done():
    """grader.boundary.heap in a process of its own: no full pass between defer and settle, then the
    imported modules frozen and the thresholds as they were; settle without defer changes nothing."""
    code = """import gc
from grader.boundary import heap
heap.settle()
untouched = gc.get_freeze_count() == 0
heap.defer()
deferred = gc.get_threshold()[2] > 10 ** 6
import email.mime.multipart, json.decoder
heap.settle()
print(untouched, deferred, gc.get_freeze_count() > 1000, gc.get_threshold() == (700, 10, 10))"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "True True True True\n"


@needs_namespaces
def test_the_child_cannot_signal_the_grader_or_anything_else(tmp_path):
    # Signal 0 asks only whether a signal could be delivered. Never a real signal to -1 here: in a
    # sandbox without its own PID namespace (the code before issue 29), kill(-1, SIGKILL) from a
    # root grader killed every process on the machine.
    verdict = run_cells(tmp_path, f"""
import os
for target in ({os.getpid()}, {os.getppid()}, -1):
    try:
        os.kill(target, 0)
        print('reached', target)
    except (ProcessLookupError, PermissionError):  # not in its namespace; refused by the filter
        print('none', target)
os.killpg(0, 0)
print('own group: only itself', os.getpgid(0) == os.getpid() == 1)""")
    text = printed(verdict)
    assert "reached" not in text and text.count("none") == 3, text
    assert "own group: only itself True" in text, text


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux's")
def test_without_namespaces_the_filter_still_keeps_signals_and_tracing_to_itself():
    """What holds where the sandbox gets no PID namespace: the seccomp filter alone."""
    parent, (read, write) = os.getpid(), os.pipe()
    pid = os.fork()
    if pid == 0:
        outcome = {}
        try:
            os.setsid()
            no_new_processes()
            signal.signal(signal.SIGUSR1, lambda *a: outcome.setdefault("own signal", "handled"))
            for name, call in [("parent", lambda: os.kill(parent, 0)), ("everyone", lambda: os.kill(-1, 0)),
                               ("itself", lambda: os.kill(os.getpid(), signal.SIGUSR1)),
                               ("own group", lambda: os.kill(0, 0)),
                               ("own thread", lambda: signal.pthread_kill(threading.get_ident(), 0))]:
                try:
                    call()
                    outcome[name] = "allowed"
                except PermissionError:
                    outcome[name] = "refused"
            libc = ctypes.CDLL(None, use_errno=True)
            # PTRACE_SEIZE: where it is allowed (the code before issue 29) it does not stop the parent
            outcome["ptrace"] = libc.ptrace(0x4206, parent, None, None), ctypes.get_errno()
        finally:
            os.write(write, json.dumps(outcome).encode())
            os._exit(0)
    os.close(write)
    outcome = json.loads(os.read(read, 1 << 16))
    os.waitpid(pid, 0)
    assert outcome == {"parent": "refused", "everyone": "refused", "itself": "allowed", "own signal": "handled",
                       "own group": "allowed", "own thread": "allowed", "ptrace": [-1, 1]}, outcome


def test_the_fork_server_starts_with_no_secret(tmp_path, monkeypatch):
    assert server_environment({"PATH": "/bin", "PGPASSWORD": "x", "DATABASE_URL": "postgresql://u:p@h/db",
                               "LC_ALL": "C", "PYTHONPATH": "/src", "AWS_SECRET_ACCESS_KEY": "k"}) == \
        {"PATH": "/bin", "LC_ALL": "C", "PYTHONPATH": "/src"}
    stop_fork_server()  # a fresh one, started while this process holds the secret
    monkeypatch.setenv("PGPASSWORD", "hunter2-in-the-graders-environment")
    verdict = run_cells(tmp_path, """
import os
print('hunter2' in repr(dict(os.environ)), 'hunter2' in open('/proc/self/environ').read())
print(sorted(os.environ))""")
    first = forkserver._forkserver._forkserver_pid
    os.kill(first, signal.SIGKILL)
    os.waitid(os.P_PID, first, os.WEXITED | os.WNOWAIT)  # dead, not yet reaped
    start_fork_server()  # and multiprocessing would start a new one here with this environment
    second = forkserver._forkserver._forkserver_pid
    assert second != first and b"hunter2" not in Path(f"/proc/{second}/environ").read_bytes()
    stop_fork_server()
    text = printed(verdict)
    assert text.startswith("False False"), text
    assert "'HOME'" in text and "'PYTHONPATH'" not in text


def test_a_child_blanks_the_environment_it_was_started_with():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.environ["GRADER_TEST_SECRET"] = "x"
        clean_environment(keep=("PATH",))
        block = open("/proc/self/environ", "rb").read()
        os.write(write, json.dumps([sorted(os.environ), block.strip(b"\0").decode(errors="replace")]).encode())
        os._exit(0)
    os.close(write)
    names, block = json.loads(os.read(read, 1 << 20))
    os.waitpid(pid, 0)
    assert names == ["PATH"] and block == ""  # pytest's own environment was in that block


@needs_namespaces
def test_memory_outside_the_address_space_limit_is_refused_or_capped(tmp_path):
    verdict = run_cells(tmp_path, """
import ctypes, os
for what, attempt in [('memfd', lambda: os.memfd_create('x')),
                      ('shm', lambda: __import__('multiprocessing.shared_memory').shared_memory.SharedMemory(
                          create=True, size=1 << 20))]:
    try:
        attempt()
        print(what, 'allowed')
    except OSError as err:
        print(what, 'refused')
print('sysv', ctypes.CDLL(None).shmget(0, 1 << 20, 0o1000 | 0o600))
written = 0
try:
    for i in range(20):
        for folder in ('.', '/tmp'):
            with open(f'{folder}/fill-{i}.bin', 'wb') as f:
                written += f.write(bytes(30 << 20))
except OSError as err:
    print('full', err.errno)
print('written', written >> 20)""", disk_mb=96)
    text = printed(verdict)
    assert "memfd refused" in text and "shm refused" in text and "sysv -1" in text, text
    assert "full 28" in text, text  # ENOSPC
    assert int(text.split("written")[1]) <= 96, text  # the folder and /tmp share one capped tmpfs


def cgroups_here() -> bool:
    made = memcg.create(1 << 30)
    memcg.remove(made)
    return made is not None


def test_each_child_is_counted_in_a_memory_cgroup_of_its_own(tmp_path):
    created = memcg.create(1 << 30)
    if created is None:
        pytest.skip("no memory cgroup can be made here (see grader.boundary.memcg)")
    assert Path(created, "cgroup.procs").read_text() == ""
    memcg.remove(created)
    assert not Path(created).exists()
    verdict = run_cells(tmp_path, """
mine = [line.split(':', 2) for line in open('/proc/self/cgroup').read().splitlines()]
path = next(p for _, controllers, p in mine if controllers in ('memory', ''))
for limit in ('/sys/fs/cgroup/memory' + path + '/memory.limit_in_bytes', '/sys/fs/cgroup' + path + '/memory.max'):
    try:
        print(path, int(open(limit).read()) >> 20)
    except (OSError, ValueError):
        pass""", memory_mb=300, disk_mb=100)
    assert "/grader-" in printed(verdict) and printed(verdict).endswith(" 400\n"), printed(verdict)


def test_a_child_over_its_cgroup_is_killed_and_says_so(tmp_path, monkeypatch):
    if not cgroups_here():
        pytest.skip("no memory cgroup can be made here (see grader.boundary.memcg)")
    monkeypatch.setattr(Limits, "cgroup_bytes", lambda self: 300 << 20)  # below what RLIMIT_AS allows
    verdict = run_cells(tmp_path, "print('first')", "held = b'x' * (600 << 20)", memory_mb=2048)
    assert "was killed (memory or time limit) in cell 2" in verdict.error, verdict.error


@pytest.mark.parametrize("source, reason", [
    ("import os\nos._exit(3)", "exit status 3"),
    ("import ctypes\nctypes.string_at(0)", "segmentation fault"),
    ("while True:\n    pass", "was killed (memory or time limit)"),  # RLIMIT_CPU, before the cell limit
])
def test_the_end_of_the_sandbox_reads_as_before(tmp_path, source, reason):
    verdict = run_cells(tmp_path, "print('first')", source, "print('never')", timeout=30, cpu_seconds=2)
    assert reason in verdict.error and "in cell 2" in verdict.error, verdict.error
    assert printed(verdict) == "first\n" and 2 not in verdict.cells


def test_a_submission_has_a_wall_clock_limit(tmp_path):
    release = tmp_path / "release"
    release.mkdir()
    cells = [{"kind": "code", "source": "import time\ntime.sleep(1.5)"}] * 20  # 30 s of sleep unlimited
    with Pool(jobs=1, timeout=2, limits=Limits(memory_mb=1024, submission_seconds=4)) as pool:
        started = time.perf_counter()  # the judging, not the pool's start (a loaded CI machine took 10 s for that)
        verdict = pool.judge(Job("someone/02", CHAPTER, cells, release))
        assert time.perf_counter() - started < 20
    assert "ran past the 4 s limit for a whole submission" in verdict.error, verdict.error
    assert 1 <= len(verdict.cells) < 4  # the cells before the limit keep what they did


def test_the_outputs_kept_of_one_submission_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr("grader.boundary.pool.OUTPUT_BUDGET", 1 << 20)
    verdict = run_cells(tmp_path, *["print('x' * 60_000)"] * 30)
    kept = [i for i, c in verdict.cells.items() if "x" * 1000 in printed(verdict, i)]
    assert verdict.error is None and len(verdict.cells) == 30
    assert 10 <= len(kept) <= 18 and kept == list(range(len(kept)))
    assert "passed the grader's 1 MB limit" in printed(verdict, 29)


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def repo_for_nobody(scratch: Path) -> tuple[list[str], Path]:
    """A command prefix, and where uid 65534 finds the repository under it: the repository itself
    where that user can read it; else (a clone in a private folder, as `mktemp -d` makes, whose own
    mode a bind mount keeps) its entries bind-mounted one by one into the world-readable scratch
    folder, in a mount namespace of the command's own."""
    if subprocess.run(NOBODY + ["test", "-r", str(REPO / "grader" / "__init__.py")]).returncode == 0:
        return [], REPO
    mount = scratch / "repo"
    mount.mkdir()
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'for e in "$0"/* "$0"/.venv; do t="$1/${e##*/}"; if [ -d "$e" ]; then mkdir -p "$t"; else touch "$t"; fi; '
            'mount --bind "$e" "$t" || exit 1; done; shift; exec "$@"', str(REPO), str(mount)], mount


def python_for_nobody(scratch: Path, repo: Path) -> tuple[str, dict]:
    """An interpreter with this one's packages that uid 65534 can run, and the environment it needs.
    This one, where it can; else (a virtual environment over an interpreter in a private home, as
    on the project's build machines) the system's interpreter of the same version, given the
    environment's packages by PYTHONPATH and an `alembic` command (nbgrader shells out to it)."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(repo)}
    probe = [sys.executable, "-c", f"import subprocess; subprocess.run([{sys.executable!r}, '-V'], check=True)"]
    if subprocess.run(NOBODY + probe, env=env, capture_output=True).returncode == 0:
        return sys.executable, env
    system = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin:/bin")
    if system is None:
        pytest.skip("no Python an unprivileged user can run on this machine")
    shims = scratch / "bin"
    shims.mkdir()
    (shims / "alembic").write_text(f"#!{system}\nimport sys\nfrom alembic.config import main\nsys.exit(main())\n")
    (shims / "alembic").chmod(0o755)
    site = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    if Path(site).is_relative_to(REPO):  # the environment inside the repository: seen through the mount
        site = str(repo / Path(site).relative_to(REPO))
    return system, {"PATH": f"{shims}:/usr/bin:/bin", "PYTHONPATH": f"{repo}:{site}"}


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to become another user")
def test_grading_as_an_unprivileged_user():
    """`grader grade` as nobody (65534) on a world-readable copy: full marks, sandbox not degraded."""
    tmp_path = Path(tempfile.mkdtemp(prefix="grader-nobody-"))  # pytest's own is private to its user
    tmp_path.chmod(0o755)
    try:
        run_as_nobody(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def run_as_nobody(tmp_path: Path) -> None:
    notebook = tmp_path / CHAPTER.notebook_name
    nbformat.write(samples.reference(CHAPTER), notebook)
    notebook.chmod(0o644)
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, 65534, 65534)
    prefix, repo = repo_for_nobody(tmp_path)
    python, env = python_for_nobody(tmp_path, repo)
    env.update(HOME=str(home), TMPDIR=str(home))
    run = subprocess.run(prefix + NOBODY + [python, "-m", "grader", "grade", str(notebook), "--json"], env=env,
                         capture_output=True, text=True, timeout=600, cwd=home)
    assert run.returncode == 0, run.stderr[-3000:]
    [result] = json.loads(run.stdout)
    assert result["score"] == sum(t["max_score"] for t in result["tests"].values()) == 8.0, run.stdout
    assert "sandbox degraded" not in run.stderr, run.stderr[-3000:]

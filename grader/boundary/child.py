"""Child side: run one submission's cells in a freshly forked, sandboxed child.

This module is preloaded by the fork server (grader.boundary.forkserver: torch, IPython and matplotlib imported once;
never the hidden specs, the answers or the course package); every submission then runs in a child
forked from it, so nothing leaks between learners. The child confines itself (grader.boundary.confine: with
namespaces the cells run in a grandchild, PID 1 of its own PID namespace), forgets the `grader`
modules it was forked with (so `import solutions.<this chapter>` finds only the release folder's
subset), runs the cells in an IPython shell with a time limit per cell, and sends one JSON message
per learner cell back through a pipe (its outputs); at a test cell it serves the trusted side's
calls (grader.boundary.serve). Never pickle.
"""
from __future__ import annotations

import base64
import io
import json
import os
import sys
import time
import traceback

import matplotlib
import torch  # preloaded for every child

matplotlib.use("Agg")
import matplotlib.pyplot
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.core.interactiveshell import InteractiveShell

from grader.boundary import confine
from grader.boundary.forbid import in_sandbox
from grader.boundary.serve import CellTimeout, Server, alarm

try:  # an optional third-party package the notebooks use: import once here when present
    import tqdm.auto  # noqa: F401
except ImportError:  # pragma: no cover
    pass

GRADING_ENV = "TRANSFORMERS_COURSE_GRADING"  # course.toolkit.GRADING_ENV; the course package is not imported here
# Modules whose attributes the checks rely on: restored before every test cell, so that a learner
# cell that patched them earlier (torch.testing.assert_close, builtins.isinstance, ...) changes nothing.
GUARDED = ("builtins", "math", "torch", "torch.testing", "torch.nn", "torch.nn.functional", "torch.nn.modules.module")
GUARDED_CLASSES = (torch.Tensor, torch.nn.Module)
HIDDEN_PACKAGES = ("grader", "solutions", "course", "tests")
TEXT_LIMIT = 64 * 1024  # characters of stdout kept per cell
DISPLAY_LIMIT = 20  # rich outputs (figures) kept per cell
DATA_LIMIT = 4 * 1024 * 1024  # bytes of one rich output


class BoundedText(io.TextIOBase):
    def __init__(self, limit: int = TEXT_LIMIT):
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0
        self.limit = limit

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def value(self) -> str:
        text = "".join(self.parts)
        if self.dropped:
            text += f"\n[... {self.dropped} more characters of output were dropped]\n"
        return text


def _send(conn, message: dict) -> None:
    conn.send_bytes(json.dumps(message, default=str).encode())


def _snapshot() -> dict:
    state = {name: (sys.modules[name], dict(vars(sys.modules[name]))) for name in GUARDED if name in sys.modules}
    state.update({cls: (cls, dict(vars(cls))) for cls in GUARDED_CLASSES})
    return state


def _restore(state: dict) -> None:
    """Put back every guarded module and attribute a learner cell replaced, and drop trace hooks."""
    sys.settrace(None)
    sys.setprofile(None)
    for key, (owner, attributes) in state.items():
        if isinstance(key, str):
            sys.modules[key] = owner
        current = vars(owner)
        for attr, value in attributes.items():
            if current.get(attr, _MISSING) is not value:
                try:
                    setattr(owner, attr, value)
                except (AttributeError, TypeError):
                    pass
        if isinstance(key, str):
            continue  # new names in a module (a submodule imported later) are harmless
        for attr in [a for a in current if a not in attributes]:
            try:
                delattr(owner, attr)
            except (AttributeError, TypeError):
                pass


_MISSING = object()


def _forget_answers(job_dir: str) -> None:
    """Drop the packages the fork server imported (the grader's own modules) from this child, and the
    editable-install finders: the learner's imports then see only the job folder and third-party
    packages."""
    for name in [n for n in sys.modules if n.split(".")[0] in HIDDEN_PACKAGES]:
        del sys.modules[name]
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__name__.lower()
                        and "editable" not in getattr(f, "__name__", "").lower()]
    sys.path[:] = [job_dir] + [p for p in sys.path if p and ("site-packages" in p or "lib-dynload" in p
                                                        or p.endswith(".zip") or p.startswith(sys.base_prefix))]
    sys.path_importer_cache.clear()


def prebuild_shell() -> None:
    """Build the IPython shell once, in the fork server (grader.boundary.shell_preload), before any learner's
    code runs anywhere: every child inherits this pristine instance (its own copy, by fork) instead of
    building one (about half of a child's set-up CPU). No cell ever runs in the fork server, so what a child
    finds in the shell is what a fresh one holds. Its profile folder is a private temporary one, gone
    once built: each child names its own in the sandbox (`_shell`)."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="grader-ipython-")
    try:
        _new_shell(ipython_dir=folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _new_shell(**kwargs) -> InteractiveShell:
    """The shell a child runs cells in: no history, no colours, figures drawn inline."""
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "NoColor"
    shell = InteractiveShell.instance(config=config, **kwargs)
    try:
        shell.enable_matplotlib("inline")
    except Exception:  # noqa: BLE001 - figures are feedback, not the grade (the base shell has no GUI loop)
        pass
    return shell


def _shell(job_dir: str) -> tuple[InteractiveShell, CapturingDisplayPublisher, list]:
    """This child's shell: the fork server's prebuilt one (grader.boundary.shell_preload), else one built
    here; its profile folder in the sandbox's /tmp (IPYTHONDIR), its outputs and errors captured."""
    from IPython.core.profiledir import ProfileDir

    if InteractiveShell.initialized():
        shell = InteractiveShell.instance()
        shell.ipython_dir = os.environ["IPYTHONDIR"]
        shell.profile_dir = ProfileDir.create_profile_dir_by_name(shell.ipython_dir, "default")
    else:
        shell = _new_shell()
    publisher = CapturingDisplayPublisher(shell=shell)
    shell.display_pub = publisher
    errors: list = []

    def record_error(etype, value, stb):
        errors.append({"output_type": "error", "ename": getattr(etype, "__name__", str(etype)),
                       "evalue": str(value)[:2000], "traceback": [line[:2000] for line in stb[-30:]]})

    shell._showtraceback = record_error
    shell.user_ns["__name__"] = "__main__"
    return shell, publisher, errors


def _rich(outputs: list[dict]) -> list[dict]:
    kept = []
    for out in outputs[:DISPLAY_LIMIT]:
        data = {}
        for mime, value in (out.get("data") or {}).items():
            if isinstance(value, bytes):
                value = (base64.b64encode(value).decode() if mime.startswith("image/")
                         else value.decode(errors="replace"))
            if isinstance(value, (dict, list)):
                value = json.loads(json.dumps(value, default=str))
            elif not isinstance(value, str):
                value = str(value)
            if len(value) <= DATA_LIMIT:
                data[mime] = value
        if data:
            kept.append({"output_type": "display_data", "data": data, "metadata": {}})
    return kept


def _run_code(shell, publisher, errors, source: str, timeout: float) -> dict:
    stdout, saved = BoundedText(), (sys.stdout, sys.stderr)
    publisher.outputs.clear()
    errors.clear()
    sys.stdout = sys.stderr = stdout
    try:
        with alarm(timeout):
            shell.run_cell(source, store_history=False)
    except CellTimeout as err:  # interrupted between statements IPython guards
        errors.append({"output_type": "error", "ename": "CellTimeout", "evalue": str(err), "traceback": []})
    finally:
        sys.stdout, sys.stderr = saved
    outputs = []
    text = stdout.value()
    if text:
        outputs.append({"output_type": "stream", "name": "stdout", "text": text})
    outputs += _rich(list(publisher.outputs))
    outputs += errors[:1]
    return {"outputs": outputs}


def _serve_test(conn, shell, index: int, exercise: str, judged: dict) -> None:
    """Say that a test cell is reached, then answer the trusted grader's calls until its checks end."""
    _send(conn, {"kind": "test", "index": index, "exercise": exercise})
    sink, saved = BoundedText(0), (sys.stdout, sys.stderr)
    sys.stdout = sys.stderr = sink  # what the learner's code prints while checked is not shown
    try:
        Server(conn, shell.user_ns, in_sandbox, judged).serve()
    finally:
        sys.stdout, sys.stderr = saved


def _serve_diagnoses(conn, shell, judged: dict) -> None:
    """After `done`: serve the judged objects again, one frame per exercise the trusted side diagnoses
    (grader.boundary.diagnosis), until it closes the pipe or ends this process."""
    sys.stdout = sys.stderr = BoundedText(0)
    while True:
        try:
            Server(conn, shell.user_ns, in_sandbox, judged, again=True).serve()
        except BaseException:  # noqa: BLE001 - the pipe closed, or the learner's code broke a frame: the scores are in
            return


def run(job: dict, conn) -> None:
    """The child's entry point: confine, then run the cells, one message per cell, then `done`."""
    try:
        started = time.perf_counter()
        missing = confine.confine(job["dir"], job["root"], confine.Limits(**job["limits"]), job.get("cgroup"),
                                  close=[conn])
        _send(conn, {"kind": "start", "missing": missing, "seconds": round(time.perf_counter() - started, 3)})
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.environ.update({GRADING_ENV: "1", "HOME": "/tmp", "MPLCONFIGDIR": "/tmp/matplotlib",
                           "IPYTHONDIR": "/tmp/ipython", "MPLBACKEND": "module://matplotlib_inline.backend_inline"})
        torch.set_num_threads(job.get("threads", 1))
        _forget_answers(job["dir"])
        started = time.perf_counter()
        shell, publisher, errors = _shell(job["dir"])
        _send(conn, {"kind": "shell", "seconds": round(time.perf_counter() - started, 3)})
        trusted, judged = _snapshot(), {}
        cpu = {"shell": time.process_time(), "cells": 0.0, "tests": 0.0}  # this process's CPU: a profile's figures
        for index, cell in enumerate(job["cells"]):
            if cell["kind"] == "skip":
                continue
            started, cpu_started = time.perf_counter(), time.process_time()
            if cell["kind"] == "test":
                _restore(trusted)
                _serve_test(conn, shell, index, cell["exercise"], judged)
                cpu["tests"] += time.process_time() - cpu_started
                continue
            message = _run_code(shell, publisher, errors, cell["source"], job["timeout"])
            cpu["cells"] += time.process_time() - cpu_started
            _send(conn, {"kind": "cell", "index": index, "seconds": round(time.perf_counter() - started, 3), **message})
        _send(conn, {"kind": "done", "cpu": {k: round(v, 3) for k, v in cpu.items()}})
        _restore(trusted)
        _serve_diagnoses(conn, shell, judged)
    except BaseException:  # noqa: BLE001 - the grader's side says what happened
        try:
            _send(conn, {"kind": "fatal", "reason": traceback.format_exc(limit=3)[-2000:]})
        except Exception:  # noqa: BLE001
            pass
    finally:
        conn.close()
        os._exit(0)

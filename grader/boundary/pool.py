"""The trusted side of grading: a warm pool of sandboxed children, and their verdicts as nbgrader outputs.

One submission is one unit of work: a `Job` (the chapter, its release folder, the cells to run) in,
a `Verdict` (one plain JSON message per cell, or why the run ended early) out. The pool runs jobs
in children forked from a fork server that imported torch, IPython and matplotlib once, never the
hidden specs (`grader.boundary.child`); the children confine themselves (`grader.boundary.confine`), each in a
memory cgroup of its own where this machine allows one (`grader.boundary.memcg`). Messages are read with a
size limit and parsed as JSON, never unpickled; the outputs kept of one submission are bounded; a
child that stops answering, or runs past the submission's wall-clock limit, is killed.

`FillVerdict` then stands in for nbgrader's Execute preprocessor: inside nbgrader's own autograde
it writes each verdict into the cells' outputs (the learner's outputs and figures, each test
cell's report and partial credit), so nbgrader's gradebook, feedback and export record it.
Scores are computed here, from the checks the trusted specs define.
"""
from __future__ import annotations

import json
import multiprocessing
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.boundary import memcg
from grader.chapters import Chapter
from grader.boundary.confine import PRELOAD, Limits, start_fork_server
from grader.boundary.wire import Lost, WireError

MAX_MESSAGE = 32 * 1024 * 1024  # bytes of one cell's message
OUTPUT_BUDGET = 64 * 1024 * 1024  # bytes of learner-cell messages kept for one submission, all cells
OVER_BUDGET = "[outputs not kept: this notebook's outputs passed the grader's {mb} MB limit]\n"
GRACE = 15  # seconds a child may stay silent beyond the cell time limit before it is killed
OUTPUT_TYPES = {"stream", "display_data", "execute_result", "error"}


@dataclass
class Job:
    key: str
    chapter: Chapter
    cells: list[dict]  # per notebook cell: {"kind": "code", "source"} | {"kind": "test", "exercise"} | {"kind": "skip"}
    release_dir: Path
    secret: int = 0  # the hidden inputs' secret (grader.boundary.spec.hidden_inputs): stays in the trusted process


@dataclass
class Verdict:
    cells: dict[int, dict] = field(default_factory=dict)
    error: str | None = None  # why the run ended early, or never ran
    missing: list[str] = field(default_factory=list)  # sandbox parts this machine could not give
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "did not finish"
    if exitcode < 0:
        name = signal.Signals(-exitcode).name
        return {"SIGSEGV": "crashed (segmentation fault)", "SIGKILL": "was killed (memory or time limit)",
                "SIGXCPU": "used up its CPU time", "SIGABRT": "aborted"}.get(name, f"was killed by {name}")
    return f"ended the grading process itself (exit status {exitcode})"


def _over_budget() -> dict:
    return {"kind": "cell", "outputs": [{"output_type": "stream", "name": "stdout",
                                         "text": OVER_BUDGET.format(mb=OUTPUT_BUDGET >> 20)}]}


class Pool:
    """Fresh forked children from one warm fork server; `jobs` of them at a time."""

    def __init__(self, jobs: int = 2, timeout: float = 120, limits: Limits = Limits(), threads: int = 1):
        self.jobs, self.timeout, self.limits, self.threads = max(1, jobs), timeout, limits, threads
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(PRELOAD)
        self.workdir = Path(tempfile.mkdtemp(prefix="grader-jobs-"))
        self.missing: list[str] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the fork server now (it imports torch while the caller does other work)."""
        start_fork_server()

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def judge(self, job: Job) -> Verdict:
        from grader.boundary.proxy import judge_exercise  # torch and the specs: imported while the fork server starts
        from grader.boundary.runner import exercises
        from grader.boundary.confine import run_confined as run

        started = time.perf_counter()
        base = Path(tempfile.mkdtemp(dir=self.workdir))
        job_dir, root = base / job.chapter.assignment, base / "root"
        root.mkdir()
        shutil.copytree(job.release_dir, job_dir, ignore=shutil.ignore_patterns("*.ipynb", "__pycache__"))
        specs = exercises(job.chapter.name)
        tests = {i: specs[c["exercise"]] for i, c in enumerate(job.cells)
                 if c["kind"] == "test" and c.get("exercise") in specs}
        # a test cell with no hidden checks is not served; a left-out cell's saved outputs stay here
        cells = [{"kind": "skip"} if c["kind"] == "skip" or c["kind"] == "test" and i not in tests else c
                 for i, c in enumerate(job.cells)]
        cgroup = memcg.create(self.limits.cgroup_bytes())
        payload = {"dir": str(job_dir), "root": str(root), "limits": asdict(self.limits), "chapter": job.chapter.name,
                   "cells": cells, "timeout": self.timeout, "threads": self.threads, "cgroup": cgroup}
        verdict_copy = time.perf_counter() - started
        receive, send = self.ctx.Pipe(duplex=True)
        proc = self.ctx.Process(target=run, args=(payload, send), daemon=True)
        verdict, reached, done, kept = Verdict(), 0, False, 0
        start_fork_server()  # never the implicit start, which would hand the server this environment
        expired = threading.Event()
        deadline = threading.Timer(self.limits.submission_seconds, lambda: (expired.set(), proc.kill()))
        try:
            proc.start()
            send.close()
            deadline.start()
            while True:
                if not receive.poll(self.timeout + GRACE):
                    verdict.error = (f"cell {reached + 1} ran past the {self.timeout:g} s limit and could not be "
                                     "interrupted; later cells were not run")
                    break
                try:
                    raw = receive.recv_bytes(MAX_MESSAGE)
                    message = json.loads(raw)
                except EOFError:
                    proc.join(5)  # the sandbox's last process closed the pipe; its parent ends as it did
                    break
                except OSError:
                    verdict.error = f"cell {reached + 1} sent more than {MAX_MESSAGE >> 20} MB of output; later cells were not run"
                    break
                except ValueError:
                    verdict.error = f"cell {reached + 1}: the sandbox sent an unreadable message; later cells were not run"
                    break
                kind = message.get("kind") if isinstance(message, dict) else None
                if kind in ("start", "shell"):
                    verdict.timings[kind] = message.get("seconds")
                if kind == "start":
                    verdict.missing = [str(m) for m in message.get("missing", [])][:5]
                elif kind == "cell" and isinstance(message.get("index"), int) and message["index"] not in verdict.cells \
                        and message["index"] not in tests:  # a test cell's verdict is never the child's word
                    kept += len(raw)
                    verdict.cells[message["index"]] = message if kept <= OUTPUT_BUDGET else _over_budget()
                    reached = message["index"] + 1
                elif kind == "test" and message.get("index") in tests and message["index"] not in verdict.cells:
                    index = message["index"]
                    try:
                        verdict.cells[index] = judge_exercise(tests[index], receive, self.timeout, job.secret)
                    except Lost:
                        verdict.error = (f"cell {index + 1} ran past the {self.timeout:g} s limit and could not be "
                                         "interrupted, or its process ended; later cells were not run")
                        break
                    except WireError as err:
                        verdict.error = f"cell {index + 1}: the sandbox broke the grading protocol ({err}); later cells were not run"
                        break
                    reached = index + 1
                elif kind == "done":
                    done = True
                elif kind == "fatal":
                    verdict.error = "the grading sandbox failed: " + str(message.get("reason", ""))[-300:].strip()
        finally:
            deadline.cancel()
            if proc.is_alive():
                proc.kill()
            proc.join(10)
            receive.close()
            memcg.remove(cgroup)
            shutil.rmtree(base, ignore_errors=True)
        if expired.is_set() and not done:  # the cells judged before the limit keep their scores
            verdict.error = (f"the notebook ran past the {self.limits.submission_seconds:g} s limit for a whole "
                             f"submission in cell {reached + 1}; later cells were not run")
        if not done and verdict.error is None:
            verdict.error = (f"the notebook {_exit_reason(proc.exitcode)} in cell {reached + 1}; "
                             "later cells were not run")
        verdict.seconds = time.perf_counter() - started
        verdict.timings["copy"] = round(verdict_copy, 3)
        with self._lock:
            for note in verdict.missing:
                if note not in self.missing:
                    self.missing.append(note)
                    print(f"grader: sandbox degraded on this machine: {note}; resource limits still apply",
                          file=sys.stderr)
        return verdict

    def judge_all(self, jobs: list[Job], progress: bool = True, done=None) -> dict[str, Verdict]:
        """Judge every job, `self.jobs` at a time; `done(job, verdict)` is called in this thread as each
        finishes (the caller records it while the next ones run)."""
        from tqdm.auto import tqdm

        verdicts: dict[str, Verdict] = {}
        with ThreadPoolExecutor(max_workers=self.jobs) as pool, \
                tqdm(total=len(jobs), desc="grading", unit="notebook", disable=not progress or not jobs,
                     file=sys.stderr) as bar:
            futures = {pool.submit(self.judge, job): job for job in jobs}
            for future in as_completed(futures):
                job = futures[future]
                try:
                    verdicts[job.key] = future.result()
                except Exception as err:  # noqa: BLE001 - one unit failing never stops the batch
                    verdicts[job.key] = Verdict(error=f"the grader could not run this notebook: {type(err).__name__}: {err}")
                if done is not None:
                    done(job, verdicts[job.key])
                bar.set_postfix_str(job.key[-40:], refresh=False)
                bar.update()
        return verdicts


# ----------------------------------------------------------------- verdicts into the notebook

# (student, assignment) -> (chapter, job cells, verdict), read by FillVerdict inside nbgrader's autograde
VERDICTS: dict[tuple[str, str], tuple[Chapter, list[dict], Verdict]] = {}


def _clean_outputs(outputs) -> list:
    clean = []
    for out in outputs if isinstance(outputs, list) else []:
        if not isinstance(out, dict) or out.get("output_type") not in OUTPUT_TYPES:
            continue
        if out["output_type"] == "execute_result":
            out = {**out, "execution_count": None, "metadata": {}}
        try:
            node = nbformat.from_dict(out)
            nbformat.validator.validate(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[node])]))
        except Exception:  # noqa: BLE001 - a malformed output is dropped, never trusted
            continue
        clean.append(node)
    return clean


NOT_RERUN = "[not re-run while grading: no score depends on this cell; {what}]\n"


def saved_outputs(saved) -> list:
    """A cell the grading run left out (grader.classroom.skipping): the outputs the learner saved, and a note."""
    outputs = _clean_outputs(saved)  # bounded when staged (grader.classroom.grading.bound_saved_outputs)
    what = "the outputs below are from your own run" if outputs else "your notebook saved no outputs for it"
    return [nbformat.v4.new_output("stream", name="stdout", text=NOT_RERUN.format(what=what)), *outputs]


def test_outputs(chapter: Chapter, exercise: str, points: float, message: dict | None, reason: str | None) -> list:
    """A test cell's outputs: the report, then the partial credit (nbgrader reads it) or an error."""
    from grader.boundary.runner import Result, exercises

    spec = exercises(chapter.name).get(exercise)
    result = Result(exercise, points)
    if spec is None:
        result.zero_reason = f"no hidden checks named {exercise!r}"
    elif message is None:
        result.zero_reason = reason or "this cell was not run"
    else:
        known = [c.description for c in spec.checks]
        seen = set()
        for description in message.get("passed") or []:
            if description in known and description not in seen:
                seen.add(description)
                result.passed.append(description)
        for item in message.get("failed") or []:
            if isinstance(item, list) and len(item) == 2 and item[0] in known and item[0] not in seen:
                seen.add(item[0])
                result.failed.append((item[0], str(item[1])[:500]))
        result.failed += [(d, "was not run") for d in known if d not in seen]
        zero = message.get("zero_reason")
        result.zero_reason = str(zero)[:500] if zero else None
    outputs = [nbformat.v4.new_output("stream", name="stdout", text=result.report() + "\n")]
    if result.score > 0:
        outputs.append(nbformat.v4.new_output("execute_result", data={"text/plain": repr(result.score)},
                                              execution_count=None))
    else:
        why = result.zero_reason or f"{exercise}: no check passed"
        outputs.append(nbformat.v4.new_output("error", ename="NoCredit", evalue=why, traceback=[f"NoCredit: {why}"]))
    return outputs


def fill(nb: nbformat.NotebookNode, chapter: Chapter, cells: list[dict], verdict: Verdict) -> None:
    """Write the verdict into the notebook nbgrader sanitised (same cells, in the same order, as staged)."""
    aligned = len(nb.cells) == len(cells)
    reason = verdict.error
    if not aligned:
        reason = "the notebook's cells changed between staging and grading"
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        cell.execution_count = None
        meta = cell.metadata.get("nbgrader", {})
        grade_id = meta.get("grade_id", "")
        message = verdict.cells.get(index) if aligned else None
        if meta.get("grade") and not meta.get("solution") and grade_id.startswith("test_"):
            cell.outputs = test_outputs(chapter, grade_id.removeprefix("test_"), float(meta.get("points", 0)),
                                        message, reason)
        elif message is None and aligned and "saved" in cells[index]:
            cell.outputs = saved_outputs(cells[index]["saved"])
        else:
            cell.outputs = _clean_outputs(message.get("outputs")) if message else []


class FillVerdict(NbGraderPreprocessor):
    """nbgrader preprocessor used in place of Execute: the judge's verdict becomes the cells' outputs."""

    def preprocess(self, nb, resources):
        key = (resources["nbgrader"]["student"], resources["nbgrader"]["assignment"])
        chapter, cells, verdict = VERDICTS[key]
        fill(nb, chapter, cells, verdict)
        return nb, resources

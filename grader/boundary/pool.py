"""Trusted side: a warm pool of sandboxed children, each judging one submission (a Job in, a Verdict out).

The pool runs each job (grader.boundary.unit) in a child forked from the fork server
(grader.boundary.forkserver), which imported torch, IPython and matplotlib once, never the hidden specs
(grader.boundary.child); the child confines itself (grader.boundary.confine), in a memory cgroup of its
own where this machine allows one (grader.boundary.memcg), and runs the cells. When it reaches a test
cell, the exercise's checks run here, against proxies of its objects (grader.boundary.proxy): scores
are computed on this side, from the checks the trusted specs define. Messages are read with a size
limit and parsed as JSON, never unpickled; the outputs kept of one submission are bounded; a child
that stops answering, or runs past the submission's wall-clock limit, is killed, and so is one whose
exercise's checks run past their deadline on this side's clock (the cell time limit and GRACE; whatever it did
to its own alarm), that exercise scoring nothing. No lock is held while a child is awaited
(grader.boundary.proxy.turn), so one learner's child delays no other's grading.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

from grader.boundary import forkserver, memcg
from grader.boundary.confine import Limits
from grader.boundary.score import shown
from grader.boundary.unit import Job, Verdict
from grader.boundary.wire import Lost, Overtime, WireError
from grader.chapters import Chapter

MAX_MESSAGE = 32 * 1024 * 1024  # bytes of one cell's message
OUTPUT_BUDGET = 64 * 1024 * 1024  # bytes of learner-cell messages kept for one submission, all cells
OVER_BUDGET = "[outputs not kept: this notebook's outputs passed the grader's {mb} MB limit]\n"
GRACE = 15  # seconds a child may stay silent beyond the cell time limit before it is killed


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return shown("did not finish")
    if exitcode < 0:
        name = signal.Signals(-exitcode).name
        known = {"SIGSEGV": shown("crashed (segmentation fault)"),
                 "SIGKILL": shown("was killed (memory or time limit)"),
                 "SIGXCPU": shown("used up its CPU time"), "SIGABRT": shown("aborted")}
        return known.get(name, shown(f"was killed by {name}"))
    return shown(f"ended the grading process itself (exit status {exitcode})")


def _child_cpu(said) -> dict:
    """The CPU seconds the child says its shell, learner cells and served checks took: a profile's figures
    (benchmarks/phases.py), never a score's; numbers only."""
    said = said if isinstance(said, dict) else {}
    return {k: float(v) for k, v in said.items() if k in ("shell", "cells", "tests") and isinstance(v, (int, float))}


def _over_budget() -> dict:
    return {"kind": "cell", "outputs": [{"output_type": "stream", "name": "stdout",
                                         "text": OVER_BUDGET.format(mb=OUTPUT_BUDGET >> 20)}]}


class Pool:
    """Fresh forked children from one warm fork server; `jobs` of them at a time."""

    def __init__(self, jobs: int = 2, timeout: float = 120, limits: Limits = Limits(), threads: int = 1):
        self.jobs, self.timeout, self.limits, self.threads = max(1, jobs), timeout, limits, threads
        self.ctx = forkserver.context()
        self.workdir = Path(tempfile.mkdtemp(prefix="grader-jobs-"))
        self.missing: list[str] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the fork server now (it imports torch while the caller does other work)."""
        forkserver.start()

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def judge(self, job: Job) -> Verdict:
        # lazy: the checks' side (the claims, the stand-ins' host and the chapters' hidden specs) is imported by
        # `load_checks` in a thread while the fork server starts, not with this module
        from grader.boundary.diagnosis import diagnose_all
        from grader.boundary.proxy import checks_of, judge_exercise

        started = time.perf_counter()
        base = Path(tempfile.mkdtemp(dir=self.workdir))
        job_dir, root = base / job.chapter.assignment, base / "root"
        root.mkdir()
        shutil.copytree(job.release_dir, job_dir, ignore=shutil.ignore_patterns("*.ipynb", "__pycache__"))
        specs = checks_of(job.chapter.name)
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
        proc = self.ctx.Process(target=forkserver.run_child, args=(payload, send), daemon=True)
        verdict, reached, done, kept = Verdict(), 0, False, 0
        forkserver.start()  # never the implicit start, which would hand the server this environment
        expired = threading.Event()
        deadline = threading.Timer(self.limits.submission_seconds, lambda: (expired.set(), proc.kill()))
        try:
            proc.start()
            send.close()
            deadline.start()
            while True:
                if not receive.poll(self.timeout + GRACE):
                    verdict.error = shown(f"cell {reached + 1} ran past the {self.timeout:g} s limit and could not be "
                                          "interrupted; later cells were not run")
                    break
                try:
                    raw = receive.recv_bytes(MAX_MESSAGE)
                    message = json.loads(raw)
                except EOFError:
                    proc.join(5)  # the sandbox's last process closed the pipe; its parent ends as it did
                    break
                except OSError:
                    verdict.error = shown(f"cell {reached + 1} sent more than {MAX_MESSAGE >> 20} MB of output; "
                                          "later cells were not run")
                    break
                except ValueError:
                    verdict.error = shown(f"cell {reached + 1}: the sandbox sent an unreadable message; "
                                          "later cells were not run")
                    break
                kind = message.get("kind") if isinstance(message, dict) else None
                if kind in ("start", "shell"):
                    verdict.timings[kind] = message.get("seconds")
                if kind == "start":
                    verdict.missing = [str(m) for m in message.get("missing", [])][:5]
                elif kind == "cell" and isinstance(message.get("index"), int) \
                        and message["index"] not in verdict.cells \
                        and message["index"] not in tests:  # a test cell's verdict is never the child's word
                    kept += len(raw)
                    verdict.cells[message["index"]] = message if kept <= OUTPUT_BUDGET else _over_budget()
                    reached = message["index"] + 1
                elif kind == "test" and message.get("index") in tests and message["index"] not in verdict.cells:
                    index = message["index"]
                    seconds = self.timeout + GRACE
                    watchdog = threading.Timer(seconds + 1, proc.kill)  # a send blocked on a child that stopped reading
                    watchdog.start()
                    try:
                        verdict.cells[index] = judge_exercise(tests[index], receive, self.timeout, job.secret,
                                                              deadline=time.monotonic() + seconds)
                    except (Overtime, Lost) as err:
                        # past this side's deadline, whatever the child did to its own alarm: no credit, and
                        # the child is killed below
                        if isinstance(err, Overtime) or not watchdog.is_alive():
                            verdict.cells[index] = {"passed": [], "failed": [], "zero_reason": shown(
                                f"its checks ran past the {seconds:g} s limit of one exercise; the grader stopped "
                                "the notebook here")}
                        verdict.error = shown(f"cell {index + 1} ran past the {self.timeout:g} s limit and could not "
                                              "be interrupted, or its process ended; later cells were not run")
                        break
                    except WireError as err:
                        verdict.error = shown(f"cell {index + 1}: the sandbox broke the grading protocol ({err}); "
                                              "later cells were not run")
                        break
                    finally:
                        watchdog.cancel()
                    reached = index + 1
                elif kind == "done":
                    done = True
                    verdict.timings["child_cpu"] = _child_cpu(message.get("cpu"))
                    diagnose_all(job.chapter.name, tests, verdict.cells, receive)  # text only: the scores are in
                    break
                elif kind == "fatal":
                    reason = str(message.get("reason", ""))[-300:].strip()
                    verdict.error = shown(f"the grading sandbox failed: {reason}")
        finally:
            deadline.cancel()
            if proc.is_alive():
                proc.kill()
            proc.join(10)
            receive.close()
            memcg.remove(cgroup)
            shutil.rmtree(base, ignore_errors=True)
        if expired.is_set() and not done:  # the cells judged before the limit keep their scores
            verdict.error = shown(f"the notebook ran past the {self.limits.submission_seconds:g} s limit for a whole "
                                  f"submission in cell {reached + 1}; later cells were not run")
        if not done and verdict.error is None:
            verdict.error = shown(f"the notebook {_exit_reason(proc.exitcode)} in cell {reached + 1}; "
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
                    verdicts[job.key] = Verdict(error=shown(f"the grader could not run this notebook: "
                                                            f"{type(err).__name__}: {err}"))
                if done is not None:
                    done(job, verdicts[job.key])
                bar.set_postfix_str(job.key[-40:], refresh=False)
                bar.update()
        return verdicts


def load_checks(chapters: list[Chapter]) -> threading.Thread:
    """Import the checks' side of judging (the claims, the stand-ins' host)
    and the chapters' hidden specs in a thread, while the pool's fork server starts: judging and
    recording need them, and the grading process has nothing else to do meanwhile."""
    def load():
        from grader.boundary.proxy import checks_of  # lazy: what `Pool.judge` imports, here in a thread

        for chapter in chapters:
            with contextlib.suppress(Exception):  # a broken spec is reported where it is used
                checks_of(chapter.name)

    thread = threading.Thread(target=load, name="load-checks", daemon=True)
    thread.start()
    return thread

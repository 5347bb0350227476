"""Grading units on a Dask cluster: `grader autograde ... --scheduler tcp://HOST:PORT`.

`DaskPool` has the interface of grader.boundary.pool.Pool (start, judge_all, a context manager), so
grader.classroom.grading.batch drives it the same way: this process (the driver) stages every submission, sends
each one's `Job` to the cluster, and records each verdict into the gradebook as it comes back.

The trust boundary is the local one on every worker. A Dask worker process is trusted like the
driver: it imports this repository's grader (installed, or on its PYTHONPATH), loads the hidden
specs from there and judges the unit with its own grader.boundary.pool.Pool, the same code path as
locally; the learner's cells run only in a sandboxed child forked there (grader.boundary.child). What
travels: to the worker, the job's cells (plain text) and the chapter's release folder (what every
learner has); back, the verdict as JSON text, never a pickled object of the learner's.
Only the driver writes the gradebook.

A worker that dies mid-batch: the scheduler gives its units to another worker (up to its
`distributed.scheduler.allowed-failures`, then KilledWorker); a unit whose function fails is
retried `retries` times; a unit that still fails, or that no worker is left to run, is recorded
as failed with the reason. Nothing is dropped.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import CancelledError
from dataclasses import asdict
from pathlib import Path

from grader.boundary.confine import Limits
from grader.boundary.pool import Pool
from grader.boundary.score import shown
from grader.boundary.unit import Job, Verdict, verdict_from_json, verdict_to_json
from grader.chapters import REPO, Chapter

CONNECT_SECONDS = 30  # to reach the scheduler, and for a first worker to join
NO_WORKER_SECONDS = 120  # units wait this long for a worker when none is left, then are recorded failed
POLL_SECONDS = 5


def grader_digest() -> str:
    """The grading code a process would use: the grader package (hidden specs included, the nbgrader
    source notebooks not: releases travel with each batch) and the reference solutions it imports."""
    digest = hashlib.sha256()
    files = [p for p in (REPO / "grader").rglob("*.py")
             if not p.relative_to(REPO / "grader").parts[0].startswith("source")]  # source/, source-zh/
    for path in sorted(files + list((REPO / "solutions").rglob("*.py"))):
        if "__pycache__" not in path.parts:
            digest.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


# ------------------------------------------------------------------------------ on a worker

_POOLS: dict[tuple, Pool] = {}
_RELEASES: dict[str, Path] = {}
_WORKER_LOCK = threading.Lock()


def _worker_pool(timeout: float, limits: dict, threads: int) -> Pool:
    """This worker process's grading pool (one fork server, started on first use)."""
    key = (timeout, tuple(sorted(limits.items())), threads)
    with _WORKER_LOCK:
        if key not in _POOLS:
            # A Dask nanny starts its worker as a daemonic process, and multiprocessing refuses
            # children to those; the pool's children are the fork server's, confined and
            # killed on their own time limit, so they need no daemon flag to end.
            multiprocessing.current_process()._config["daemon"] = False
            pool = Pool(jobs=1, timeout=timeout, limits=Limits(**limits), threads=threads)
            pool.start()
            _POOLS[key] = pool
        return _POOLS[key]


def _release_dir(assignment: str, files: dict[str, bytes]) -> Path:
    """The chapter's release folder on this worker, written once per content."""
    digest = hashlib.sha256(json.dumps(sorted((k, hashlib.sha256(v).hexdigest()) for k, v in files.items()))
                            .encode()).hexdigest()[:16]
    with _WORKER_LOCK:
        if digest not in _RELEASES:
            folder = Path(tempfile.mkdtemp(prefix=f"grader-release-{digest}-")) / assignment
            for rel, data in files.items():
                if Path(rel).is_absolute() or ".." in Path(rel).parts:
                    raise ValueError(f"release file outside its folder: {rel!r}")
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_bytes(data)
            _RELEASES[digest] = folder
        return _RELEASES[digest]


def judge_unit(unit: dict, release: dict[str, bytes]) -> str:
    """One grading unit on a Dask worker: grader.boundary.pool.Pool.judge, as locally; the verdict as JSON."""
    chapter = Chapter(*unit["chapter"])
    pool = _worker_pool(unit["timeout"], unit["limits"], unit["threads"])
    job = Job(unit["key"], chapter, unit["cells"], _release_dir(chapter.assignment, release), unit.get("secret", 0))
    return verdict_to_json(pool.judge(job))


def _passed(value):
    return value


def worker_facts() -> dict:
    """What the driver checks on each worker before sending it anything."""
    return {"grader": grader_digest(), "python": sys.version.split()[0]}


# ------------------------------------------------------------------------------ on the driver

def failure_reason(err: BaseException) -> str:
    """Why a unit has no verdict, for the gradebook's record of a failed grading."""
    name = type(err).__name__
    if name == "KilledWorker":
        return shown(f"the Dask workers grading this notebook died each time it was tried ({err}); it was not graded")
    if isinstance(err, CancelledError) or name == "CancelledError":
        return shown("the Dask cluster lost this notebook's grading (the scheduler went away or cancelled it); "
                     "it was not graded")
    return shown(f"grading on the Dask cluster failed: {name}: {str(err)[:300]}")


def release_files(release_dir: Path) -> dict[str, bytes]:
    """A release folder as it travels: what the learner gets, less notebooks (each job carries its cells)."""
    return {p.relative_to(release_dir).as_posix(): p.read_bytes() for p in sorted(release_dir.rglob("*"))
            if p.is_file() and p.suffix != ".ipynb" and "__pycache__" not in p.parts}


class DaskPool:
    """Grading units on an existing dask.distributed cluster, one per submission. `scheduler`: its
    address (tcp://HOST:PORT), or a connected distributed.Client."""

    def __init__(self, scheduler, timeout: float = 120, limits: Limits = Limits(), threads: int = 1,
                 retries: int = 2, no_worker_seconds: float | None = None):
        self.scheduler, self.timeout, self.limits, self.threads = scheduler, timeout, limits, threads
        self.retries, self.no_worker_seconds = retries, no_worker_seconds or NO_WORKER_SECONDS
        self.client, self._own_client = None, True
        self.missing: list[str] = []

    def start(self) -> None:
        """Connect, wait for a worker, and check every worker grades with this very grader."""
        from distributed import Client

        if not isinstance(self.scheduler, str):  # a Client made by the caller (a Dask Gateway's, with its TLS)
            self.client, self._own_client = self.scheduler, False
            self.scheduler = self.client.scheduler_info().get("address", "the given client")
        else:
            try:
                self.client = Client(self.scheduler, timeout=CONNECT_SECONDS, set_as_default=False)
            except (OSError, TimeoutError, ValueError) as err:
                raise ValueError(f"cannot reach the Dask scheduler at {self.scheduler}: {err}") from err
        try:
            self.client.wait_for_workers(1, timeout=CONNECT_SECONDS)
        except TimeoutError:
            raise ValueError(f"no Dask worker joined the scheduler at {self.scheduler} "
                             f"within {CONNECT_SECONDS} s") from None
        try:
            facts = self.client.run(worker_facts)
        except Exception as err:  # a worker without this grader cannot even unpickle the call
            raise ValueError(f"a Dask worker at {self.scheduler} cannot import this grader ({type(err).__name__}: "
                             f"{err}); install this repository in the workers' environment") from err
        ours = grader_digest()
        other = sorted(address for address, fact in facts.items() if fact["grader"] != ours)
        if other:
            raise ValueError(f"Dask worker(s) {', '.join(other)} grade with other grading code (hidden specs or "
                             "grader) than this one; give every worker this repository at the same commit")

    def close(self) -> None:
        if self.client is not None and self._own_client:
            self.client.close()
        self.client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _unit(self, job: Job) -> dict:
        return {"key": job.key, "chapter": [job.chapter.number, job.chapter.name], "cells": job.cells,
                "secret": job.secret, "timeout": self.timeout, "limits": asdict(self.limits), "threads": self.threads}

    def judge_all(self, jobs: list[Job], progress: bool = True, done=None) -> dict[str, Verdict]:
        """Send every job to the cluster; `done(job, verdict)` is called in this thread as each comes back."""
        from distributed import as_completed
        from tqdm.auto import tqdm

        releases, futures = {}, {}
        batch = uuid.uuid4().hex[:8]
        for job in jobs:
            if job.release_dir not in releases:
                # A task, not scattered data: a worker that dies holding it does not take it with it
                # (the scheduler runs it again); each worker fetches it once per chapter.
                releases[job.release_dir] = self.client.submit(_passed, release_files(job.release_dir), pure=False,
                                                               key=f"release-{batch}-{job.chapter.assignment}")
            future = self.client.submit(judge_unit, self._unit(job), releases[job.release_dir], pure=False,
                                        key=f"grade-{batch}-{len(futures)}", retries=self.retries)
            futures[future] = job
        verdicts: dict[str, Verdict] = {}
        arrivals, pending = as_completed(futures, loop=self.client.loop), set(futures)
        idle_since, checked = None, time.monotonic()
        with tqdm(total=len(jobs), desc="grading", unit="notebook", disable=not progress or not jobs,
                  file=sys.stderr) as bar:
            while pending:
                finished = arrivals.next_batch(block=False) if arrivals.has_ready() else []
                if not finished:
                    time.sleep(0.1)
                    if time.monotonic() - checked > POLL_SECONDS:
                        idle_since, checked = self._idle(idle_since), time.monotonic()
                    if idle_since is not None and time.monotonic() - idle_since > self.no_worker_seconds:
                        finished = list(pending)
                for future in finished:
                    pending.discard(future)
                    job = futures[future]
                    if future.done():
                        verdicts[job.key] = self._verdict(future)
                    else:  # given up: no worker left to run it
                        future.cancel()
                        verdicts[job.key] = Verdict(error=shown(f"no Dask worker was left to grade this notebook for "
                                                                f"{self.no_worker_seconds:g} s; it was not graded"))
                    if done is not None:
                        done(job, verdicts[job.key])
                    future.release()
                    bar.set_postfix_str(job.key[-40:], refresh=False)
                    bar.update()
        return verdicts

    def _idle(self, idle_since: float | None) -> float | None:
        """Since when the cluster has had no worker (None while it has one)."""
        if self.client.scheduler_info().get("workers"):
            return None
        return idle_since or time.monotonic()

    def _verdict(self, future) -> Verdict:
        try:
            if future.status == "finished":
                verdict = verdict_from_json(future.result())
            elif future.cancelled():
                verdict = Verdict(error=failure_reason(CancelledError()))
            else:
                verdict = Verdict(error=failure_reason(future.exception()))
        except Exception as err:  # noqa: BLE001 - one unit failing never stops the batch
            verdict = Verdict(error=failure_reason(err))
        for note in verdict.missing:
            if note not in self.missing:
                self.missing.append(note)
                print(f"grader: sandbox degraded on a Dask worker: {note}; resource limits still apply",
                      file=sys.stderr)
        return verdict

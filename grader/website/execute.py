"""The reference runs the site shows: each chapter's source notebook (solutions filled in) executed
once, cached under site/_cache/ by a hash of everything the run reads, several chapters at a time. The
English run of a chapter goes first: its slow statements (the trainings) are recorded for the other
edition's run, which puts their results in place instead of training again (grader.website.share)."""
from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbformat

from grader.chapters import REPO, Chapter, is_test_cell

CACHE = REPO / "site" / "_cache"
SHARED = CACHE / "shared"  # the slow statements' results, for the other edition's run (grader.website.share)
# A training cell's idle OpenMP threads spin on a shared 2-core machine (benchmarks/results/README.md).
RUN_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "MPLBACKEND": "module://matplotlib_inline.backend_inline"}


def content_hash(chapter: Chapter) -> str:
    """What the run reads: the source folder (notebook, figures, the modules it carries), then course/'s
    shared modules the kernel imports from the release folder."""
    digest = hashlib.sha256()
    roots = [chapter.source_dir, REPO / "course" / "toolkit", REPO / "course" / "checks"]
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def cached_path(chapter: Chapter) -> Path:
    return CACHE / f"{chapter.lang}-{chapter.assignment}-{content_hash(chapter)}.ipynb"


def library_digest(chapter: Chapter) -> str:
    """The Python the kernel imports from the chapter's folder: the same in every edition."""
    digest = hashlib.sha256()
    for package in ("course", "solutions"):
        for path in sorted((chapter.course_dir / package).rglob("*.py")):
            digest.update(str(path.relative_to(chapter.course_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def execute_shared(nb: nbformat.NotebookNode, folder: Path, library: str, log: Path, shared: Path = SHARED,
                   timeout: int = 900, min_seconds: float | None = None) -> nbformat.NotebookNode:
    """Run a notebook in `folder` with the site's share of slow statements installed in its kernel first
    (silently: no cell, no output, no execution count); what the share did goes to `log`."""
    from nbclient import NotebookClient  # lazy: a worker process imports it

    cells = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    options = "" if min_seconds is None else f", min_seconds={min_seconds!r}"
    setup = (f"__import__('grader.website.share', fromlist=['install']).install("
             f"{str(shared)!r}, {cells!r}, {library!r}, {str(log)!r}{options})")
    # Killed once the last cell has run, not asked to exit: a graceful exit (torch loaded) took 1.4 s of 7.6.
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", shutdown_kernel="immediate",
                            resources={"metadata": {"path": str(folder)}})

    async def install_share(notebook):
        reply = await client.async_wait_for_reply(client.kc.execute(setup, silent=True, store_history=False))
        if reply is None or reply["content"]["status"] != "ok":
            raise RuntimeError(f"the site's share did not install: {reply and reply['content'].get('evalue')}")

    client.on_notebook_start = install_share
    client.execute()
    return nb


def execute_reference(chapter: Chapter, log: Path) -> nbformat.NotebookNode:
    """The source notebook run top to bottom in its chapter folder, as a learner runs it, less the hidden
    tests."""
    from course.toolkit import GRADING_ENV

    os.environ.pop(GRADING_ENV, None)  # the full run: training cells train as a learner sees them
    nb = nbformat.read(chapter.source_notebook, as_version=4)
    for cell in nb.cells:
        if is_test_cell(cell):  # no page shows a test cell, and `make test` runs the hidden checks: 20 CPU-s saved
            cell.source = ""
    return execute_shared(nb, chapter.course_dir, library_digest(chapter), log)


def _run(chapter: Chapter, threads: int) -> tuple[str, float, list[str]]:
    # The kernels running side by side share the cores rather than each taking them all.
    os.environ.update(RUN_ENV, OMP_NUM_THREADS=str(threads))
    log = SHARED / f"{chapter.lang}-{chapter.assignment}.log"  # what the share did, kept to read
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    start = time.perf_counter()
    nb = execute_reference(chapter, log)
    seconds = time.perf_counter() - start
    target = cached_path(chapter)
    partial = target.with_suffix(".partial")
    nbformat.write(nb, partial)
    partial.replace(target)  # never a half-written cache entry
    shared = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return str(target), seconds, shared


def reference_runs(chapters: list[Chapter], jobs: int | None = None, log=print) -> dict[Chapter, Path]:
    """Each chapter's executed reference notebook: from the cache, else run (`jobs` at a time)."""
    jobs = jobs or int(os.environ.get("SITE_JOBS", min(2, os.cpu_count() or 1)))
    threads = max(1, (os.cpu_count() or 1) // jobs)
    missing = [c for c in chapters if not cached_path(c).exists()]
    # English first, the later chapters (they train, take longest) first: a translation's run starts once
    # its English run is done, to find the trainings recorded.
    first = sorted((c for c in missing if c.lang == "en"), key=lambda c: c.number, reverse=True)
    waiting = [c for c in missing if c.lang != "en" and any(e.number == c.number for e in first)]
    first += sorted((c for c in missing if c.lang != "en" and c not in waiting), key=lambda c: c.number,
                    reverse=True)
    start = time.perf_counter()
    if missing:
        log(f"running {len(missing)} reference notebook(s), {jobs} at a time")
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            runs = {pool.submit(_run, chapter, threads): chapter for chapter in first}
            while runs:
                done = next(as_completed(runs))
                chapter = runs.pop(done)
                _, seconds, shared = done.result()
                replayed = sum("replayed" in line for line in shared)
                log(f"  ran {chapter.lang}/{chapter.assignment} in {seconds:.0f} s"
                    + (f" ({replayed} training(s) from the {'English' if chapter.lang != 'en' else 'other'} run)"
                       if replayed else ""))
                if chapter.lang == "en":
                    for other in [c for c in waiting if c.number == chapter.number]:
                        waiting.remove(other)
                        runs[pool.submit(_run, other, threads)] = other
        log(f"reference runs: {time.perf_counter() - start:.0f} s")
        for share in SHARED.glob("*.pickle"):  # of use to these runs only (tens of MB): not kept in the cache
            share.unlink()
    kept = {c: cached_path(c) for c in chapters}
    for chapter, path in kept.items():  # the runs of a chapter's earlier contents are of no more use
        for stale in CACHE.glob(f"{chapter.lang}-{chapter.assignment}-*.ipynb"):
            if stale != path:
                stale.unlink()
    return kept

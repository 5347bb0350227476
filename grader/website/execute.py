"""The reference runs the site shows: each chapter's source notebook (solutions filled in) executed
once, cached under site/_cache/ by a hash of everything the run reads, several chapters at a time."""
from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbformat

from grader.chapters import REPO, Chapter

CACHE = REPO / "site" / "_cache"
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


def _run(chapter: Chapter, threads: int) -> tuple[str, float]:
    from grader.authoring.execute import execute_source  # lazy: a worker process imports nbclient

    # The kernels running side by side share the cores rather than each taking them all.
    os.environ.update(RUN_ENV, OMP_NUM_THREADS=str(threads))
    nb, seconds = execute_source(chapter, timeout=900)
    target = cached_path(chapter)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    nbformat.write(nb, partial)
    partial.replace(target)  # never a half-written cache entry
    return str(target), seconds


def reference_runs(chapters: list[Chapter], jobs: int | None = None, log=print) -> dict[Chapter, Path]:
    """Each chapter's executed reference notebook: from the cache, else run (`jobs` at a time)."""
    jobs = jobs or int(os.environ.get("SITE_JOBS", min(2, os.cpu_count() or 1)))
    threads = max(1, (os.cpu_count() or 1) // jobs)
    # The later chapters train and take longest: started first, the two workers end close together.
    missing = sorted((c for c in chapters if not cached_path(c).exists()), key=lambda c: c.number, reverse=True)
    start = time.perf_counter()
    if missing:
        log(f"running {len(missing)} reference notebook(s), {jobs} at a time")
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            runs = {pool.submit(_run, chapter, threads): chapter for chapter in missing}
            for done in as_completed(runs):
                chapter, (_, seconds) = runs[done], done.result()
                log(f"  ran {chapter.lang}/{chapter.assignment} in {seconds:.0f} s")
        log(f"reference runs: {time.perf_counter() - start:.0f} s")
    kept = {c: cached_path(c) for c in chapters}
    for chapter, path in kept.items():  # the runs of a chapter's earlier contents are of no more use
        for stale in CACHE.glob(f"{chapter.lang}-{chapter.assignment}-*.ipynb"):
            if stale != path:
                stale.unlink()
    return kept

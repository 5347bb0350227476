"""How long a learner waits for feedback when grading on submit (grader.classroom.onsubmit.service), printed,
not asserted: from the moment a submission lands in nbgrader's exchange (what Submit does) to the
moment its feedback is fetchable there (what Fetch Feedback finds), with the service grading as the
hub runs it (a warm sandboxed pool), minus the hub's HTTP layer.

    .venv/bin/python benchmarks/onsubmit.py                  # 5 learners one at a time, then a burst of 20
    .venv/bin/python benchmarks/onsubmit.py --single 10 --burst 20 --chapter 02 --jobs 2
    .venv/bin/python benchmarks/onsubmit.py --single 0 --burst 0 --flood 1200
    .venv/bin/python benchmarks/onsubmit.py --single 0 --burst 0 --behind 40 --rush 50   # issue 44, item 7

The burst: N learners submit within 10 s (one every 10/N s); the figure is the time from the first
submission to the last feedback, and the gradebook must then hold exactly N rows.
The flood: one learner leaves N folders in the inbound folder at once; the figures are the service's
round that first sees them (its scan), a later round's scan, and how long an honest classmate who
submits right after waits for feedback.
Behind a slow notebook (`--behind S`): a learner submits a notebook that sleeps S s, a classmate submits
a second later; the figure is the classmate's wait (as if alone: no learner delays another).
The rush (`--rush N`): N learners submit within a minute, the first a hostile notebook that sleeps until
the term's time limit (`--limit`, term.toml's time_limit_seconds) stops it; the figures are the median and
the slowest wait of the others, and the hostile one's.
"""
from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook
from nbgrader.utils import notebook_hash

from grader.authoring import samples
from grader.boundary import forkserver
from grader.boundary.confine import Limits
from grader.boundary.pool import Pool
from grader.chapters import find_chapter
from grader.classroom.onsubmit.service import Service
from grader.coursedir import COURSE_ID


def submit(exchange: Path, student: str, chapter, nb) -> Path:
    """A submission as `nbgrader submit` leaves it: the notebook, timestamp.txt, submission_secret.txt."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    name = f"{student}+{chapter.assignment}+{stamp}+{secrets.token_urlsafe(9)}"
    staging = exchange / "staging" / name
    staging.mkdir(parents=True)
    nbformat.write(nb, staging / chapter.notebook_name)
    (staging / "timestamp.txt").write_text(stamp)
    secret = secrets.token_hex(16)
    (staging / "submission_secret.txt").write_text(secret)
    staging.rename(exchange / COURSE_ID / "inbound" / name)  # appears whole, as a move
    return exchange / COURSE_ID / "feedback" / f"{notebook_hash(secret=secret, notebook_id=chapter.name)}.html"


def wait(paths: list[Path], timeout: float = 600) -> float:
    start = time.perf_counter()
    while not all(p.is_file() for p in paths):
        if time.perf_counter() - start > timeout:
            raise SystemExit(f"timed out after {timeout:.0f} s: {sum(p.is_file() for p in paths)} of {len(paths)}")
        time.sleep(0.05)
    return time.perf_counter() - start


def timed(service) -> list[float]:
    """The seconds of each of the service's scans (appended as they happen)."""
    seconds, scan = [], service.scan

    def measured():
        start = time.perf_counter()
        try:
            return scan()
        finally:
            seconds.append(time.perf_counter() - start)

    service.scan = measured
    return seconds


def flood(exchange: Path, chapter, n: int, scans: list[float]) -> None:
    """One learner's n folders at once, then an honest classmate's submission."""
    nb = samples.released(chapter)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    staging = exchange / "staging" / "flood"
    for i in range(n):
        folder = staging / f"flooder+{chapter.assignment}+{stamp}+{i:05d}"
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / chapter.notebook_name)
        (folder / "timestamp.txt").write_text(stamp)
    before = len(scans)
    for folder in sorted(staging.iterdir()):
        folder.rename(exchange / COURSE_ID / "inbound" / folder.name)
    feedback = submit(exchange, "honest", chapter, samples.reference(chapter))
    waited = wait([feedback])
    time.sleep(1.0)  # a few more rounds with every folder known
    rounds = scans[before:]
    print(f"flood of {n} folders from one learner: the round that saw them scanned in {max(rounds):.2f} s, "
          f"a later round in {rounds[-1]:.3f} s; an honest classmate waited {waited:.1f} s for feedback")


def sleeper(chapter, seconds: float) -> nbformat.NotebookNode:
    """The reference with a first cell that sleeps: slow, or (for hours) hostile."""
    nb = samples.reference(chapter)
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"import time\ntime.sleep({seconds})"))
    return nb


def waiting(feedback: Path, waits: list[float]) -> threading.Thread:
    """A thread that appends how long this learner waits for their feedback, from now."""
    thread = threading.Thread(target=lambda: waits.append(wait([feedback], 1800)), daemon=True)
    thread.start()
    return thread


def behind(exchange: Path, chapter, seconds: float) -> None:
    """A classmate who submits a second after a notebook that sleeps `seconds`."""
    slow, classmate = [], []
    first = waiting(submit(exchange, "slowpoke", chapter, sleeper(chapter, seconds)), slow)
    time.sleep(1.0)
    waiting(submit(exchange, "rightafter", chapter, samples.reference(chapter)), classmate).join()
    first.join()
    print(f"behind a {seconds:g} s notebook: the classmate who submitted 1 s later waited {classmate[0]:.1f} s "
          f"(the slow notebook's own feedback: {slow[0]:.1f} s)")


def rush(exchange: Path, chapter, n: int) -> None:
    """n learners within a minute, the first hostile (sleeps for an hour: the time limit stops it)."""
    hostile, waits = [], []
    threads = [waiting(submit(exchange, "hostile", chapter, sleeper(chapter, 3600)), hostile)]
    for i in range(1, n):
        time.sleep(60 / n)
        threads.append(waiting(submit(exchange, f"rush{i:02d}", chapter, samples.reference(chapter)), waits))
    for thread in threads:
        thread.join()
    print(f"rush of {n} learners within 60 s, the first hostile: the {n - 1} others waited median "
          f"{statistics.median(waits):.1f} s, slowest {max(waits):.1f} s (the hostile one: {hostile[0]:.1f} s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapter", default="02")
    parser.add_argument("--single", type=int, default=5, help="learners submitting one at a time")
    parser.add_argument("--burst", type=int, default=20, help="learners submitting within 10 s")
    parser.add_argument("--flood", type=int, default=0, help="folders one learner leaves in the inbound folder")
    parser.add_argument("--behind", type=float, default=0, help="seconds a notebook sleeps, a classmate behind it")
    parser.add_argument("--rush", type=int, default=0, help="learners within a minute, the first hostile")
    parser.add_argument("--limit", type=int, default=60, help="term.toml's time_limit_seconds (for --rush)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    chapter = find_chapter(args.chapter)
    makers = [samples.reference, samples.released, lambda c: samples.partly_wrong(c, mistakes=1)]
    forkserver.start()
    with tempfile.TemporaryDirectory() as tmp, Pool(jobs=args.jobs, timeout=120, limits=Limits()) as pool:
        root, exchange = Path(tmp) / "course", Path(tmp) / "exchange"
        for sub in ("inbound", "feedback"):
            (exchange / COURSE_ID / sub).mkdir(parents=True)
        root.mkdir()
        limit = f"time_limit_seconds = {args.limit}\n" if args.rush else ""
        (root / "term.toml").write_text(f'[on_submit]\nchapters = ["{chapter.number}"]\n{limit}')
        started = time.perf_counter()
        pool.start()
        service = Service(root, exchange, pool)
        scans = timed(service)
        worker = threading.Thread(target=service.serve, args=(0.2,), daemon=True)
        worker.start()
        print(f"service up (pool started) in {time.perf_counter() - started:.1f} s; chapter {chapter.assignment}, "
              f"{args.jobs} jobs; grader from {Path(sys.modules['grader'].__file__).parent.parent}")
        singles = []
        for i in range(args.single):
            feedback = submit(exchange, f"alone{i}", chapter, makers[i % len(makers)](chapter))
            singles.append(wait([feedback]))
            print(f"  learner alone {i + 1}: Submit -> feedback fetchable in {singles[-1]:.1f} s")
        if singles:
            print(f"one learner alone: median {statistics.median(singles):.1f} s, max {max(singles):.1f} s "
                  f"(goal: median <= 10 s)")
        if args.burst:
            expected, start = [], time.perf_counter()
            for i in range(args.burst):
                expected.append(submit(exchange, f"burst{i:02d}", chapter, makers[i % len(makers)](chapter)))
                time.sleep(10 / args.burst)
            wait(expected)
            total = time.perf_counter() - start
            with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
                rows = [s for s in gb.find_assignment(chapter.assignment).submissions
                        if s.student.id.startswith("burst")]
            print(f"burst of {args.burst} within 10 s: last feedback {total:.1f} s after the first Submit "
                  f"(goal: <= 180 s); gradebook rows for them: {len(rows)} (expected {args.burst})")
            if len(rows) != args.burst:
                return 1
        if args.flood:
            flood(exchange, chapter, args.flood, scans)
        if args.behind:
            behind(exchange, chapter, args.behind)
        if args.rush:
            rush(exchange, chapter, args.rush)
        service.stop()
        worker.join(timeout=120)
    forkserver.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

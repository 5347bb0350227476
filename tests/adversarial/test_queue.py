"""Attacks on the grading service's queue as a learner would make them (issue 35, sections 2 to 5): the
inbound folder of nbgrader's exchange is the learner's to write (its name, its files, its clock, how
many). Each test failed on the service before (grader.classroom.onsubmit.service with a JSON ledger, folder
names as times, copies at grading time with shutil); most need only a scan, a few grade with the
sandboxed pool (chapter 02)."""
import os
import secrets
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest

from grader.authoring import samples
from grader.boundary.confine import Limits
from grader.boundary.pool import Pool
from grader.chapters import CHAPTERS, find_chapter
from grader.classroom.ledger import FAILED, GRADED, GRADING, HELD, QUEUED, REFUSED, SUPERSEDED, Entry
from grader.classroom.onsubmit.service import Service
from grader.coursedir import COURSE_ID
from tests.adversarial import CLASS_BATCH
from tests.test_onsubmit import course

CHAPTER = find_chapter("02")
NOW = datetime.now(timezone.utc)


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def submit(exchange: Path, student: str, nb=None, claimed: str | None = None, chapter=CHAPTER) -> Path:
    """A submission as `nbgrader submit` leaves it, with the time the learner chose to claim."""
    claimed = claimed or stamp(datetime.now(timezone.utc))
    folder = exchange / COURSE_ID / "inbound" / f"{student}+{chapter.assignment}+{claimed}+{secrets.token_urlsafe(6)}"
    folder.mkdir(parents=True)
    nbformat.write(nb if nb is not None else samples.released(chapter), folder / chapter.notebook_name)
    (folder / "timestamp.txt").write_text(claimed)
    (folder / "submission_secret.txt").write_text(secrets.token_hex(16))
    return folder


def add(service: Service, entry: Entry) -> None:
    """An entry the ledger already holds (an earlier round's), through the reading API both ledgers share."""
    service.ledger.entries[entry.id] = entry
    service.ledger.save()


def earlier(student: str, status: str, minutes_ago: float, graded: bool = True, n: int = 0) -> Entry:
    when = (datetime.now(timezone.utc) - timedelta(minutes=minutes_ago)).isoformat()  # now, not at import
    return Entry(f"{student}+{CHAPTER.assignment}+{when}+old{n}", student, CHAPTER.assignment, when, status=status,
                 seen_at=when, graded_at=when if graded else None, score=0.0)


def source_folder(root: Path) -> Path:
    """The instructor's source notebook (solutions and hidden tests in place), as the course keeps it."""
    folder = root / "source" / CHAPTER.assignment
    folder.mkdir(parents=True)
    (folder / CHAPTER.notebook_name).write_text(CHAPTER.source_notebook.read_text())
    return folder


@pytest.fixture(scope="module")
def pool():
    with Pool(jobs=2, timeout=60, limits=Limits()) as running:
        running.start()
        yield running


def newest(service: Service, student: str) -> Entry:
    return service.ledger.of(student)[0]


# ================================================================ 2. learner-written data is not fact
def test_a_folder_name_and_timestamp_from_before_the_due_date_do_not_make_a_late_submission_on_time(tmp_path):
    due = (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    root, exchange = course(tmp_path, 'after_due = "hold"', due=f'[due]\n"02" = {due}')
    submit(exchange, "mallory", claimed=stamp(NOW - timedelta(days=1)))
    service = Service(root, exchange, None)
    service.scan()
    entry = newest(service, "mallory")
    assert entry.status == HELD and "after the due date" in entry.reason
    assert datetime.fromisoformat(entry.submitted_at) > NOW - timedelta(minutes=5)


def test_a_folder_name_from_the_future_does_not_skip_the_wait_between_attempts(tmp_path):
    root, exchange = course(tmp_path, "min_minutes_between = 30")
    service = Service(root, exchange, None)
    add(service, earlier("mallory", GRADED, minutes_ago=2))
    submit(exchange, "mallory", claimed=stamp(NOW + timedelta(days=1)))
    service.scan()
    entry = newest(service, "mallory")
    assert entry.status == REFUSED and "between attempts" in entry.reason


def test_a_year_9999_folder_name_does_not_stop_the_round_for_the_class(tmp_path):
    # Round 1: mallory's folder claims 31 Dec 9999, and is graded. Round 2: her next submission made
    # the wait-between-attempts arithmetic overflow, and the round stopped for everyone, every round.
    root, exchange = course(tmp_path, "min_minutes_between = 5")
    service = Service(root, exchange, None)
    submit(exchange, "mallory", claimed="9999-12-31 23:59:59.000000 UTC")
    service.scan()
    first = newest(service, "mallory")
    first.status, first.graded_at, first.score = GRADED, NOW.isoformat(), 0.0  # as grading leaves it
    service.ledger.save()
    submit(exchange, "mallory")
    submit(exchange, "ben")
    try:
        service.scan()
    except (ValueError, OverflowError) as err:
        pytest.fail(f"the round stopped: {err}")
    assert newest(service, "ben").status == QUEUED
    assert datetime.fromisoformat(first.submitted_at).year == NOW.year  # the service's clock, not the name's


def test_a_notebook_rewritten_after_it_was_seen_is_graded_as_seen(tmp_path, pool):
    # The learner submits a blank notebook before the due date, then rewrites it in place while it
    # waits in the queue: the grade is of what was there when the service saw it (and timed it).
    root, exchange = course(tmp_path)
    service = Service(root, exchange, pool)
    folder = submit(exchange, "mallory", samples.released(CHAPTER))
    service.scan()
    nbformat.write(samples.reference(CHAPTER), folder / CHAPTER.notebook_name)
    [entry] = service.step()
    assert entry.status == GRADED and entry.score == 0


# ================================================================ 3. the trusted side's rights on the learner's paths
def test_a_hard_link_to_the_source_notebook_is_refused(tmp_path):
    # A hard link is a regular file: no link check catches it, and it is the source notebook itself.
    root, exchange = course(tmp_path)
    solutions = source_folder(root) / CHAPTER.notebook_name
    folder = submit(exchange, "mallory")
    (folder / CHAPTER.notebook_name).unlink()
    os.link(solutions, folder / CHAPTER.notebook_name)
    service = Service(root, exchange, None)
    service.scan()
    entry = newest(service, "mallory")
    assert entry.status == REFUSED and "hard link" in entry.reason


def test_an_inbound_folder_that_is_a_link_to_the_source_folder_is_never_queued(tmp_path):
    root, exchange = course(tmp_path)
    name = f"mallory+{CHAPTER.assignment}+{stamp(NOW)}+x"
    target = source_folder(root)
    os.utime(target, (time.time() - 3600, time.time() - 3600))  # the instructor's folder, written an hour ago
    (exchange / COURSE_ID / "inbound" / name).symlink_to(target)
    service = Service(root, exchange, None)
    service.scan()
    assert [e.status for e in service.ledger.of("mallory")] in ([], [REFUSED])
    assert not (root / "submitted" / "mallory").exists()


def test_a_sparse_file_over_the_limit_is_never_written_out(tmp_path):
    root, exchange = course(tmp_path)
    folder = submit(exchange, "mallory")
    with open(folder / "data.bin", "wb") as big:
        big.truncate(300 * 2 ** 20)  # 300 MB that take no disk until someone copies them
    service = Service(root, exchange, None)
    service.scan()
    assert newest(service, "mallory").status == REFUSED
    written = sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())
    assert written < 20 * 2 ** 20


def test_a_folder_of_thousands_of_files_is_refused(tmp_path):
    root, exchange = course(tmp_path)
    folder = submit(exchange, "mallory")
    for i in range(500):
        (folder / f"f{i}.txt").write_text("x")
    service = Service(root, exchange, None)
    service.scan()
    assert newest(service, "mallory").status == REFUSED


def test_a_named_pipe_in_one_submission_never_holds_a_classmate(tmp_path, pool):
    root, exchange = course(tmp_path)
    os.mkfifo(submit(exchange, "mallory") / "results.txt")
    submit(exchange, "ben", samples.reference(CHAPTER))
    service = Service(root, exchange, pool)
    done = {}
    worker = threading.Thread(target=lambda: done.update(graded=service.step()), daemon=True)
    worker.start()
    worker.join(300)
    if worker.is_alive():
        for pipe in (exchange / COURSE_ID / "inbound").rglob("results.txt"):
            with open(pipe, "wb"):
                pass
        pytest.fail("a named pipe stalled the round")
    assert "graded" in done, "the named pipe stopped the round"
    assert newest(service, "ben").status == GRADED
    mallory = newest(service, "mallory")
    assert mallory.status == REFUSED and "named pipe" in mallory.reason


# ================================================================ 4. one entry's failure stops no one
def test_an_entry_left_grading_is_graded_in_the_next_round_without_a_restart(tmp_path, pool):
    root, exchange = course(tmp_path)
    service = Service(root, exchange, pool)
    submit(exchange, "ben", samples.reference(CHAPTER))
    service.scan()
    entry = newest(service, "ben")
    entry.status = GRADING  # its grading thread died; the service did not restart
    service.ledger.save()
    service.step()
    assert newest(service, "ben").status == GRADED


def test_an_entry_the_grader_keeps_stopping_on_ends_failed_not_grading_forever(tmp_path):
    root, exchange = course(tmp_path)
    service = Service(root, exchange, None)
    stuck = earlier("mallory", GRADING, minutes_ago=1, graded=False)
    stuck.tries = 3
    add(service, stuck)
    service.step()
    entry = newest(service, "mallory")
    assert entry.status == FAILED and "stopped 3 times" in entry.reason


def test_a_grading_the_grader_failed_is_not_an_attempt_used(tmp_path):
    root, exchange = course(tmp_path, "attempts = 1")
    service = Service(root, exchange, None)
    add(service, earlier("ada", FAILED, minutes_ago=3, graded=False))  # the grader failed; no grade recorded
    submit(exchange, "ada")
    service.scan()
    assert newest(service, "ada").status == QUEUED


def test_a_corrupt_time_in_one_entry_fails_that_entry_alone(tmp_path, pool):
    root, exchange = course(tmp_path)
    service = Service(root, exchange, pool)
    bad = earlier("mallory", QUEUED, minutes_ago=1, graded=False)
    bad.submitted_at = "99999-01-01T00:00:00"
    add(service, bad)
    submit(exchange, "ben", samples.reference(CHAPTER))
    try:
        service.step()
    except ValueError as err:
        pytest.fail(f"the round stopped: {err}")
    assert newest(service, "ben").status == GRADED
    assert newest(service, "mallory").status == FAILED


# ================================================================ 5. per-learner bounds on the shared queue
def test_a_flood_of_1200_folders_from_one_learner_is_one_queue_entry_in_a_linear_scan(tmp_path):
    root, exchange = course(tmp_path)
    inbound = exchange / COURSE_ID / "inbound"
    for i in range(1200):
        folder = inbound / f"mallory+{CHAPTER.assignment}+{stamp(NOW - timedelta(seconds=i))}+f{i}"
        folder.mkdir()
        (folder / CHAPTER.notebook_name).write_text("{}")
        (folder / "timestamp.txt").write_text(stamp(NOW))
    service = Service(root, exchange, None)
    start = time.perf_counter()
    service.scan()
    seconds = time.perf_counter() - start
    statuses = [e.status for e in service.ledger.of("mallory")]
    assert statuses.count(QUEUED) == 1 and statuses.count(SUPERSEDED) == 1199
    assert seconds < 10, f"a scan of 1,200 folders took {seconds:.1f} s"


def test_a_learner_over_the_hourly_rate_is_refused(tmp_path):
    root, exchange = course(tmp_path)
    service = Service(root, exchange, None)
    for i in range(20):  # twenty graded in the last hour (the default limit)
        add(service, earlier("mallory", GRADED, minutes_ago=50 - i, n=i))
    submit(exchange, "mallory")
    submit(exchange, "ben")
    service.scan()
    assert newest(service, "mallory").status == REFUSED and "an hour" in newest(service, "mallory").reason
    assert newest(service, "ben").status == QUEUED


def test_every_chapter_at_once_counts_against_one_learners_rate(tmp_path):
    root, exchange = course(tmp_path)
    (root / "term.toml").write_text('[on_submit]\nchapters = "all"\nper_hour = 3\n')
    service = Service(root, exchange, None)
    for chapter in CHAPTERS:
        submit(exchange, "mallory", samples.released(chapter), chapter=chapter)
    service.scan()
    statuses = [e.status for e in service.ledger.of("mallory")]
    assert statuses.count(QUEUED) == 3 and statuses.count(REFUSED) == len(CHAPTERS) - 3


@CLASS_BATCH
def test_a_notebook_that_sleeps_is_stopped_at_the_chapters_limit_and_the_classmate_graded(tmp_path, pool):
    root, exchange = course(tmp_path, "time_limit_seconds = 15")
    slow = samples.reference(CHAPTER)
    slow.cells.insert(0, nbformat.v4.new_code_cell("import time\ntime.sleep(50)"))
    submit(exchange, "mallory", slow)
    submit(exchange, "ben", samples.reference(CHAPTER))
    service = Service(root, exchange, pool)
    service.step()
    mallory = newest(service, "mallory")
    assert mallory.status == FAILED and "15 s limit" in mallory.reason
    assert newest(service, "ben").status == GRADED


# ================================================================ 6. no learner delays another (issue 44, item 7)
# One service with three workers, as `grader serve --jobs 3` runs it: mallory's notebook sleeps for an hour and
# oscar's floods its output, both stopped by the term's LIMIT; mallory then submits three times in a second;
# four honest classmates submit right after. Before, the service graded in rounds: a round waited for its
# slowest notebook, and everyone submitted meanwhile waited for the next round. What is asserted is the order
# in which entries changed status (a watcher's log of the ledger), never a wall-clock threshold.
LIMIT = 90  # term.toml's time_limit_seconds: what stops the hostile notebooks
HONEST = ["ada", "ben", "cai", "dee"]
FLOOD = "import time\nwhile True:\n    print('x' * 1000)\n    time.sleep(0.001)"  # ~1 MB/s, until stopped


def hostile(first_cell: str) -> nbformat.NotebookNode:
    nb = samples.reference(CHAPTER)
    nb.cells.insert(0, nbformat.v4.new_code_cell(first_cell))
    return nb


def until(condition, seconds: float) -> None:
    """Wait for `condition`; past `seconds` carry on: the assertions say what did not happen."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.fixture(scope="module")
def rush(tmp_path_factory):
    root, exchange = course(tmp_path_factory.mktemp("rush"), f"time_limit_seconds = {LIMIT}\nmin_minutes_between = 0")
    log = []  # (when, student, entry id, status), each time an entry's status changes
    with Pool(jobs=3, timeout=120, limits=Limits()) as pool:
        pool.start()
        service = Service(root, exchange, pool)
        watching = threading.Event()

        def watch():
            last = {}
            while not watching.is_set():
                changed = []
                for e in service.ledger.of():
                    if last.get(e.id) != e.status:
                        last[e.id] = e.status
                        changed.append((e.student, e.id, e.status))
                # One look can find a learner's attempt ended and their next one started (the service starts it
                # within milliseconds): the ledger lists the newer first, which logged that start before the end
                # it followed. A second attempt started while the first still runs is still caught: the first
                # is GRADING in that look.
                for student, entry_id, status in sorted(changed, key=lambda c: c[2] == GRADING):
                    log.append((time.monotonic(), student, entry_id, status))
                time.sleep(0.02)

        threading.Thread(target=watch, daemon=True).start()
        server = threading.Thread(target=service.serve, args=(0.2,), daemon=True)
        server.start()

        def status(folder: Path) -> str | None:
            entry = service.ledger.entries.get(folder.name)
            return entry.status if entry else None

        sleeper = submit(exchange, "mallory", hostile("import time\ntime.sleep(3600)"))
        until(lambda: status(sleeper) == GRADING, 60)
        flooder = submit(exchange, "oscar", hostile(FLOOD))
        until(lambda: status(flooder) == GRADING, 60)
        again = []
        for _ in range(3):
            again.append(submit(exchange, "mallory"))
            time.sleep(0.3)
        honest = [submit(exchange, name, samples.reference(CHAPTER)) for name in HONEST]
        every = [sleeper, flooder, *again, *honest]
        until(lambda: all(status(f) not in (None, QUEUED, GRADING) for f in every), 3 * LIMIT + 300)
        service.stop()
        server.join(LIMIT + 120)
        watching.set()
        time.sleep(0.1)
    yield service, log, {"sleeper": sleeper.name, "flooder": flooder.name, "again": [f.name for f in again],
                         "honest": [f.name for f in honest]}


def first(log, entry_id: str, statuses) -> float:
    """When the entry first reached one of `statuses` (infinity if never)."""
    return min((when for when, _, e, status in log if e == entry_id and status in statuses), default=float("inf"))


@CLASS_BATCH
def test_a_slow_notebook_at_the_head_of_a_rush_delays_no_classmate(rush):
    service, log, ids = rush
    slow_ended = first(log, ids["sleeper"], (GRADED, FAILED))
    for entry_id in ids["honest"]:
        entry = service.ledger.entries[entry_id]
        assert entry.status == GRADED and not entry.reason and entry.feedback, entry
        assert first(log, entry_id, (GRADED,)) < slow_ended, f"{entry.student} was graded only after the slow notebook"
    mallory = service.ledger.entries[ids["sleeper"]]
    assert mallory.status == FAILED and f"{LIMIT} s limit" in mallory.reason and mallory.time_limit == LIMIT


@CLASS_BATCH
def test_a_notebook_flooding_its_output_delays_no_classmate(rush):
    service, log, ids = rush
    flood_ended = first(log, ids["flooder"], (GRADED, FAILED))
    for entry_id in ids["honest"]:
        assert first(log, entry_id, (GRADED,)) < flood_ended, service.ledger.entries[entry_id]
    oscar = service.ledger.entries[ids["flooder"]]
    assert oscar.status == FAILED and f"{LIMIT} s limit" in oscar.reason


@CLASS_BATCH
def test_a_learner_submitting_many_times_quickly_has_one_attempt_in_flight_and_delays_no_one(rush):
    service, log, ids = rush
    grading, most = set(), 0  # mallory's entries being graded at once, replayed from the log
    for _, student, entry_id, status in log:
        if student == "mallory":
            (grading.add if status == GRADING else grading.discard)(entry_id)
            most = max(most, len(grading))
    assert most == 1
    *older, newest = ids["again"]
    assert [service.ledger.entries[e].status for e in older] == [SUPERSEDED] * len(older)
    assert service.ledger.entries[newest].status == GRADED
    started = first(log, newest, (GRADING,))
    assert started > first(log, ids["sleeper"], (GRADED, FAILED))  # it waited for mallory's own attempt in flight
    for entry_id in ids["honest"]:  # submitted after it, graded before it started: it held no classmate
        assert first(log, entry_id, (GRADED,)) < started, service.ledger.entries[entry_id]


def test_no_lock_of_the_course_is_held_while_a_learners_notebook_runs(tmp_path, pool, monkeypatch):
    """Before, autograde_with held the course directory's lock (and the SQLite gradebook's) for a whole grading,
    so workers grading side by side would take turns on it."""
    import fcntl

    root, exchange = course(tmp_path)
    submit(exchange, "ben", samples.reference(CHAPTER))
    service = Service(root, exchange, pool)
    calls, judge_all = [], pool.judge_all

    def judging(jobs, **kwargs):  # while a notebook is judged: may another take each lock at once?
        calls.append(free := [])
        for name in (".grader-autograde.lock", ".gradebook.db.grader-lock"):
            with open(root / name, "a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(handle, fcntl.LOCK_UN)
                    free.append(name)
                except BlockingIOError:
                    pass
        return judge_all(jobs, **kwargs)

    monkeypatch.setattr(pool, "judge_all", judging)
    service.step()
    assert newest(service, "ben").status == GRADED
    assert calls[0] == [".grader-autograde.lock", ".gradebook.db.grader-lock"]  # ben's (then the reference's)

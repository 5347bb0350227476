"""A learner's process that stops its own clock (issue 44, item 6; DESIGN.md invariant 11: no learner
delays another). The trusted side bounds each exercise's checks and each diagnosis by a deadline of its
own, and holds no lock while it waits on one learner's child: before, it bounded each reply only, under a
lock all gradings share, so a child that switched off its alarm ran 65 s against a 5 s limit, kept its
marks, and held an honest classmate's grading for all of it."""
from __future__ import annotations

import multiprocessing
import threading

import nbformat
import pytest

from grader.boundary.pool import Pool
from grader.boundary.proxy import Session, turn
from grader.boundary.wire import Codec, Endpoint, Lost, Overtime
from grader.classroom.grading.batch import grade_paths
from tests.adversarial import CLASS_BATCH
from tests.adversarial.cases import FULL, STALLS, notebook, stalling


def fake_child(conn, answer) -> threading.Thread:
    """A child that serves every call with `answer(op)` (which may wait first), until the pipe closes."""
    def handle(op, args):
        return answer(op)

    endpoint = Endpoint(conn, Codec(), handle, lambda: None)

    def serve():
        try:
            while True:
                header, frames = endpoint.receive()
                endpoint.serve_one(header, frames)
        except (Lost, OSError, EOFError):
            return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_a_child_answering_just_in_time_cannot_stretch_an_exercise():
    """Attack: every reply comes just before the old per-reply limit (1 s and 1.5 s of grace here). Each
    reply is in time, so the old trusted side waited 2.4 s a call for as long as the check kept calling;
    the exercise's own deadline (2.5 s) ends the conversation at the second reply, and every later
    request fails at once (a check that catches the error and asks again does not wait again)."""
    ours, theirs = multiprocessing.Pipe()
    served, release = [], threading.Event()

    def answer(op):
        served.append(op)
        release.wait(2.4)
        return 1

    fake_child(theirs, answer)
    session = Session(ours, 1.0, grace=1.5)
    with pytest.raises(Overtime):
        for _ in range(5):
            session.request("call")
    with pytest.raises(Lost):
        session.request("call")
    release.set()
    assert len(served) <= 2, f"the trusted side waited on {len(served)} replies, past the exercise's deadline"
    ours.close()


def test_no_lock_is_held_while_one_learners_child_is_silent():
    """Attack: a child that does not answer (its alarm switched off, asleep in C code). While the trusted side
    waits on it, another learner's exercise is judged; before, the lock every grading shares was held for all
    of the wait, and the honest exercise waited behind it."""
    silent_ours, silent_theirs = multiprocessing.Pipe()
    honest_ours, honest_theirs = multiprocessing.Pipe()
    honest_done, order = threading.Event(), []

    def silent(op):
        honest_done.wait(60)  # answers once the honest learner's exercise is judged, or after a minute
        order.append("hostile")
        return 0

    fake_child(silent_theirs, silent)
    fake_child(honest_theirs, lambda op: 1)

    def hostile_exercise():
        with turn():
            Session(silent_ours, 120).request("call")

    hostile = threading.Thread(target=hostile_exercise)
    hostile.start()
    threading.Event().wait(0.5)  # the hostile exercise holds its turn and waits on its child
    with turn():
        assert Session(honest_ours, 120).request("call") == 1
    order.append("honest")
    honest_done.set()
    hostile.join(70)
    assert order == ["honest", "hostile"]


@CLASS_BATCH
def test_a_learner_who_stops_their_own_clock_delays_no_classmate(tmp_path, monkeypatch):
    """One batch, one worker each: three learners who stop their clock inside a hidden check, and an honest
    classmate. Before, the trusted side waited on each stalled reply holding the lock every grading shares
    (45 s a reply here): the honest classmate finished after them, and a child that answered within each
    reply's limit kept its marks. Now the honest classmate is judged while they stall and finishes first,
    with full marks; each stalled exercise scores nothing, with a message that says why."""
    finished = []
    judge = Pool.judge

    def recorded_judge(self, job):
        verdict = judge(self, job)
        finished.append(job.key)
        return verdict

    monkeypatch.setattr(Pool, "judge", recorded_judge)
    paths = []
    for name, nb in [*((name, stalling(stall)) for name, stall in STALLS.items()), ("honest", notebook())]:
        paths.append(tmp_path / f"{name}.ipynb")
        nbformat.write(nb, paths[-1])
    results = grade_paths([str(p) for p in paths], timeout=30, jobs=len(paths), secret=44)
    honest = results[-1]
    assert honest["score"] == FULL, honest
    for name, result in zip(STALLS, results):
        softmax = result["tests"]["test_softmax"]
        assert softmax["score"] == 0, (name, result)
        assert "limit of one exercise" in (softmax.get("error") or "") + str(result.get("error")), (name, result)
    assert "submission004" in finished[0], f"the honest classmate finished after a stalled learner: {finished}"

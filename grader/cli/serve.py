"""`grader serve`: grading on submit, the hub's grading service (one per class, for this process's life)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from grader.boundary import forkserver, heap
from grader.classroom.onsubmit import servicelock  # os, fcntl and ctypes only
from grader.cli.common import CHECK_OWNER_HELP, exchange_option, limits, ready_sources, sandbox_options

HELP = "grade on submit: the hub's grading service (guides/teaching.md: Grading on submit)"


def add_arguments(p) -> None:
    p.add_argument("--course-dir", default="nbgrader-course")
    exchange_option(p)
    p.add_argument("--instructor", action="append", default=[], help="a user who sees the class page (repeatable)")
    p.add_argument("--grader", action="append", default=[],
                   help="a teaching assistant: the class page, any feedback, answering regrade requests (repeatable)")
    p.add_argument("--jobs", type=int, default=2, help="notebooks graded at once")
    p.add_argument("--poll", type=float, default=1.0, help="seconds between looks at the exchange")
    p.add_argument("--port", type=int, default=None, help="default: the port of $JUPYTERHUB_SERVICE_URL")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT", help="grade on this Dask cluster")
    p.add_argument("--no-check-owner", dest="check_owner", action="store_false", help=CHECK_OWNER_HELP)
    p.add_argument("--hub-pid", type=int, default=None,
                   help="the hub that starts it, its parent: it ends when that process ends (the hub's config "
                        "passes it: a killed hub leaves no service behind)")
    sandbox_options(p)


def run(args) -> int:
    from grader.classroom.policy.term import load_term  # lazy: start-up

    Path(args.course_dir).mkdir(parents=True, exist_ok=True)
    try:
        lock = servicelock.hold(args.course_dir)  # one service per class, for this process's life
    except servicelock.ServiceRunning as err:
        print(f"grader serve: {err}", file=sys.stderr)
        return 1
    hub_alive = servicelock.end_with_parent(args.hub_pid) if args.hub_pid else None  # before the slow start
    if hub_alive and not hub_alive():
        print(f"grader serve: the hub that started it (pid {args.hub_pid}) has ended", file=sys.stderr)
        return 1
    load_term(args.course_dir)  # a bad term.toml stops the service before it grades anything
    ready_sources()  # built once: after a `git pull`, run `grader build` and restart the service
    heap.defer()  # until the imports are done (grader.boundary.heap)
    forkserver.start()
    from grader.classroom.grading.batch import _pool  # lazy: start-up
    from grader.classroom.onsubmit.service import Service  # lazy: start-up
    from grader.classroom.onsubmit.web import serve  # lazy: start-up (jupyterhub, tornado)

    heap.settle()

    with _pool(args.scheduler, args.jobs, args.timeout, limits(args)) as pool:
        pool.start()
        service = Service(args.course_dir, args.exchange, pool, timeout=args.timeout, check_owner=args.check_owner)
        serve(service, set(args.instructor), poll=args.poll, port=args.port, hub_alive=hub_alive,
              graders=set(args.grader))
        cut_short = service.abandon()
    forkserver.stop()  # and with it the sandboxes of the gradings cut short
    os.close(lock)
    if cut_short:
        print(f"grading service: stopped while grading {', '.join(cut_short)}; "
              "graded again when the service next starts", flush=True)
        sys.stderr.flush()
        os._exit(0)  # a normal exit would wait for their threads (concurrent.futures joins its workers at exit)
    return 0

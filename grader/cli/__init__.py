"""`grader`: build, release, grade, autograde and demo (see guides/teaching.md).

Each command imports its room of the grader when it runs (the imports marked `# lazy:`): `grader
--help` and `grader build` never load torch or nbgrader's applications, and `grader grade` starts the
fork server, which imports torch, before this process imports nbgrader.
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import sys

from grader.cli import (
    autograde,
    build,
    collect,
    demo,
    export,
    grade,
    regrade,
    release,
    report,
    requests,
    serve,
    similarity,
    translate,
)

# One module per verb, each with HELP, add_arguments(parser) and run(args); the table's order is --help's.
VERBS = {"build": build, "release": release, "translate": translate, "grade": grade, "autograde": autograde,
         "collect": collect, "serve": serve, "regrade": regrade, "requests": requests, "report": report,
         "export": export, "similarity": similarity, "demo": demo}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grader", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, verb in VERBS.items():
        p = sub.add_parser(name, help=verb.HELP)
        verb.add_arguments(p)
        p.set_defaults(func=verb.run)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:
        print(f"grader: {err}", file=sys.stderr)
        return 2


def program() -> None:
    """The `grader` command (and `python -m grader`): `main`, then every exit handler as usual, and the process
    ends without tearing its modules down, which after a grade (torch, nbgrader, the checks) took a second."""
    status: list = [1]  # an uncaught exception's; its traceback is printed before the exit handlers run
    atexit.register(_leave, status)  # registered first, so run last
    try:
        status[0] = main()
    except SystemExit as stop:  # argparse: --help, a usage error
        status[0] = stop.code
        raise
    except KeyboardInterrupt:
        status[0] = 130
        raise
    sys.exit(status[0])


def _leave(status: list) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: what was written is lost either way
            stream.flush()
    code = status[0]
    os._exit(0 if code is None else code if isinstance(code, int) else 1)  # SystemExit("text") printed it: 1


if __name__ == "__main__":
    program()

"""Submissions that try to beat the grader or break the batch, each with what it must score.

All are chapter 02 (softmax 2 points, scaled_dot_product_attention 3, SelfAttention 3; 8 in all),
built from the released notebook and the reference answers. A *probe* replaces the softmax answer
by: try the attack; keep the correct softmax only if the attack worked. So a probe scores 8 where
the attack succeeds (as most did when the checks ran in the learner's kernel) and 6 where it fails.

`expected` is the exact total the gradebook must hold (what the honest code earns), or, with
`at_most`, the name of another case whose honest score it must not exceed. `reason` is a phrase
the autograde summary must show for this student.
"""
from __future__ import annotations

import copy
import json
import textwrap
from dataclasses import dataclass
from typing import Callable

import nbformat

from grader.authoring import samples
from grader.chapters import REPO, find_chapter

CHAPTER = find_chapter("02")
ANSWERS = samples._solutions(CHAPTER)  # grade_id -> reference source
FULL = 8.0


@dataclass
class Paths:
    course: str  # the nbgrader course directory being graded into
    inbox: str  # the class's submissions


@dataclass
class Case:
    name: str
    build: Callable[[Paths], "nbformat.NotebookNode | str"]  # a notebook, or the raw text of the file
    expected: float | None = None
    at_most: str | None = None
    reason: str | None = None
    needs_seccomp: bool = False  # only where the sandbox can refuse new processes (else a fork bomb is real)
    needs_namespaces: bool = False  # only where the sandbox gets its own filesystem view


def notebook(answers: dict[str, str | None] | None = None, after: dict[str, str] | None = None,
             start: str | None = None) -> nbformat.NotebookNode:
    """The release with reference answers, `answers` overriding some (None: left as released), extra
    code cells after the cell with a given grade_id, and one before everything (`start`)."""
    chosen = {k: v for k, v in {**ANSWERS, **(answers or {})}.items() if v is not None}
    nb = samples.with_answers(CHAPTER, chosen)
    for grade_id, source in (after or {}).items():
        index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
        nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source))
    if start:
        nb.cells.insert(1, nbformat.v4.new_code_cell(start))
    return nb


def probe(attack: str) -> Callable[[Paths], nbformat.NotebookNode]:
    def build(paths: Paths) -> nbformat.NotebookNode:
        body = textwrap.indent(textwrap.dedent(attack).format(repo=str(REPO), course=paths.course,
                                                               inbox=paths.inbox).strip(), "    ")
        source = ("import os, sys, torch\ntry:\n" + body
                  + "\n    _won = True\nexcept BaseException:\n    _won = False\n\n"
                  + ANSWERS["softmax"] + "\n\nif not _won:\n    softmax = None  # the attack failed: no answer\n")
        return notebook({"softmax": source})
    return build


def cells(**kwargs) -> Callable[[Paths], nbformat.NotebookNode]:
    return lambda paths: notebook(**kwargs)


def edit_test_cell(change: Callable[[nbformat.NotebookNode], None], skeleton: bool = True):
    def build(paths: Paths) -> nbformat.NotebookNode:
        nb = notebook({"softmax": None} if skeleton else None)
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax")
        change(cell)
        return nb
    return build


def retype(cell) -> None:
    cell.cell_type = "markdown"
    cell.pop("outputs", None)
    cell.pop("execution_count", None)


def forge_output(cell) -> None:
    cell.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "2"}, execution_count=1)]


def other_chapter(paths: Paths) -> str:
    return nbformat.writes(samples.reference(find_chapter("06")))


def without_test_cell(paths: Paths) -> nbformat.NotebookNode:
    nb = notebook()
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_softmax"]
    return nb


def duplicated_test_cell(paths: Paths) -> nbformat.NotebookNode:
    nb = notebook({"softmax": None})
    cell = next(c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == "test_scaled_dot_product_attention")
    twin = copy.deepcopy(cell)
    twin.source = "1e9"
    nb.cells.append(twin)
    return nb


def forged_solution_points(paths: Paths) -> nbformat.NotebookNode:
    nb = notebook()
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    cell.metadata.nbgrader.update(grade=True, points=50)
    return nb


CLONE_SOFTMAX = "def softmax(x, dim=-1):\n    return x.clone()  # wrong: no normalisation\n"
LIAR = """
class Liar(torch.Tensor):
    def __eq__(self, other):
        return torch.ones_like(torch.Tensor(self), dtype=torch.bool)

def softmax(x, dim=-1):
    return x.as_subclass(Liar)
"""
WRAPPER = ("from solutions.self_attention import softmax as _reference\n\n"
           "def softmax(x, dim=-1):\n    return _reference(x, dim)\n")
TWO_WAYS = ANSWERS["softmax"].replace("### BEGIN SOLUTION",
                                      "### BEGIN SOLUTION\n    # There are two possible solutions; this is the stable "
                                      "one.")

SKELETON = {"softmax": None, "scaled_dot_product_attention": None, "SelfAttention": None}
# Stage 1 ran the checks in the learner's process: these two scored 8 / 8 with no answer at all.
PATCH_CHECKS = """
import gc
gc.unfreeze()  # the fork server froze its heap (grader.boundary.heap): gc.get_objects skips it until thawed
for o in gc.get_objects():
    if type(o).__name__ in ('Check', 'Exercise'):
        try:
            o.run = lambda obj: None
            o.checks = []
        except Exception:
            pass
"""
FORGE_VERDICTS = """
import gc, json
gc.unfreeze()  # the fork server froze its heap (grader.boundary.heap): gc.get_objects skips it until thawed
from multiprocessing.connection import Connection
for o in gc.get_objects():
    if isinstance(o, Connection):
        for i in range(200):
            try:
                o.send_bytes(json.dumps({"kind": "cell", "index": i, "passed": ["x"], "failed": [],
                                         "zero_reason": None, "outputs": []}).encode())
            except Exception:
                pass
"""

CASES = [
    # controls
    Case("reference", cells(), FULL),
    Case("skeleton", lambda p: samples.released(CHAPTER), 0.0),
    Case("honest-clone-softmax", cells(answers={"softmax": CLONE_SOFTMAX}), None),
    # replacing the grader or torch before the hidden tests run
    Case("sys-modules-runner", cells(answers={"softmax": None}, start=(
        "import sys, types\nfake = types.ModuleType('grader.runner')\nfake.run_checks = lambda *a, **k: 1e9\n"
        "sys.modules['grader.runner'] = fake")), 6.0),
    Case("patch-runner", cells(answers={"softmax": None}, start=(
        "try:\n    import grader.runner as r\n    r.run_checks = lambda *a, **k: 1e9\n    r.evaluate = None\n"
        "except ImportError:\n    pass")), 6.0),
    Case("input-transformer", cells(answers={"softmax": None}, start=(
        "get_ipython().input_transformers_post.append(\n"
        "    lambda lines: ['1e9\\n'] if any('run_checks' in line for line in lines) else lines)")), 6.0),
    Case("ast-transformer-and-trace", cells(answers={"softmax": None}, start=(
        "import ast, sys\nclass Full(ast.NodeTransformer):\n"
        "    def visit_Module(self, node):\n        return ast.parse('1e9') if 'run_checks' in ast.unparse(node) else "
        "node\n"
        "get_ipython().ast_transformers.append(Full())\nsys.settrace(lambda *a: None)")), 6.0),
    Case("patch-torch-testing", cells(answers={"softmax": CLONE_SOFTMAX}, start=(
        "import torch, torch.testing\ntorch.testing.assert_close = lambda *a, **k: None\n"
        "torch.equal = lambda *a, **k: True\ntorch.Tensor.__eq__ = lambda self, other: torch.ones((), "
        "dtype=torch.bool)\n"
        "torch.isfinite = lambda x: torch.ones_like(x, dtype=torch.bool)")), at_most="honest-clone-softmax"),
    Case("lying-tensor-subclass", cells(answers={"softmax": LIAR}), at_most="honest-clone-softmax"),
    # the reference answers and hidden specs, by any route
    Case("wrapper-aliasing-reference", cells(answers={"softmax": WRAPPER}), 6.0),
    Case("probe-import-answers", probe("from solutions.self_attention import softmax as _reference"), 6.0),
    Case("probe-importlib-answers",
         probe("import importlib\nimportlib.import_module('solutions.self_attention')"), 6.0),
    Case("probe-import-spec", probe("import grader.boundary.specs.self_attention"), 6.0),
    Case("probe-read-spec-file", probe("open('{repo}/grader/boundary/specs/self_attention.py').read()"), 6.0,
         needs_namespaces=True),
    Case("probe-read-answers-file", probe("open('{repo}/solutions/self_attention.py').read()"), 6.0,
         needs_namespaces=True),
    Case("probe-pip-metadata", probe("""
        import importlib.metadata as md, re
        dist = md.distribution('transformers-from-scratch-course')
        finder = next(f for f in dist.files if 'finder' in str(f))
        root = re.search(r"'solutions': '([^']+)'", dist.locate_file(finder).read_text()).group(1)
        open(root + '/self_attention.py').read()"""), 6.0, needs_namespaces=True),
    Case("probe-read-gradebook", probe("""
        import sqlite3
        assert os.path.exists('{course}/gradebook.db')
        sqlite3.connect('{course}/gradebook.db').execute('select * from grade').fetchall()"""), 6.0,
         needs_namespaces=True),
    Case("probe-write-gradebook", probe("""
        import sqlite3
        assert os.path.exists('{course}/gradebook.db')
        db = sqlite3.connect('{course}/gradebook.db', timeout=30)
        db.execute('update grade set manual_score = 1000'); db.commit()"""), 6.0, needs_namespaces=True),
    Case("probe-other-students", probe("assert os.listdir('{inbox}/reference')"), 6.0, needs_namespaces=True),
    Case("probe-write-outside", probe("open('{course}/planted-by-a-learner.txt', 'w').write('x')"), 6.0,
         needs_namespaces=True),
    Case("probe-network", probe("import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()"), 6.0),
    Case("probe-fork", probe("pid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)"), 6.0,
         needs_seccomp=True),
    Case("probe-subprocess", probe("import subprocess\nsubprocess.run(['true'], check=True)"), 6.0, needs_seccomp=True),
    Case("gc-patch-the-checks", cells(answers=SKELETON, start=PATCH_CHECKS), 0.0),
    Case("forge-verdicts-on-the-pipe", cells(answers=SKELETON, start=FORGE_VERDICTS), 0.0),
    Case("probe-answers-in-memory", probe("""
        import gc
        gc.unfreeze()
        assert any(str(getattr(o, '__module__', '')).startswith(('solutions.self_attention', 'grader.boundary.specs'))
                   for o in gc.get_objects() if callable(o))"""), 6.0),
    Case("correct-answer-saying-solutions", cells(answers={"softmax": TWO_WAYS}), FULL),
    # faults: each costs what comes after it, never the batch
    Case("os-exit", cells(after={"test_softmax": "import os\nos._exit(3)"}), 2.0, reason="exit status 3"),
    Case("segfault", cells(after={"test_softmax": "import ctypes\nctypes.string_at(0)"}), 2.0,
         reason="segmentation fault"),
    Case("infinite-loop", cells(start="while True:\n    pass"), FULL),
    Case("stubborn-infinite-loop", cells(after={"test_softmax": (
        "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.1)")}),
        2.0, reason="could not be interrupted"),
    Case("retry-loop-swallowing-exceptions", cells(after={"test_softmax": (
        "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n    except Exception:\n        pass")}), FULL),
    Case("memory-bomb", cells(start="big = bytearray(200 * 1024 ** 3)"), FULL),
    Case("creeping-memory-bomb", cells(after={"test_SelfAttention": (
        "hoard = []\nwhile True:\n    hoard.append(bytearray(50 * 1024 ** 2))")}), FULL),
    Case("torch-memory-bomb", cells(start="import torch\nbig = torch.empty(64 * 1024 ** 3, dtype=torch.uint8)"), FULL),
    Case("100-mb-of-output", cells(start="print('x' * 100_000_000)"), FULL),
    Case("a-million-lines", cells(start="for i in range(1_000_000):\n    print(i)"), FULL),
    Case("huge-file", cells(start="open('big.bin', 'wb').write(bytes(300 * 1024 ** 2))"), FULL),
    Case("sys-exit", cells(start="import sys\nsys.exit(1)"), FULL),
    Case("keyboard-interrupt", cells(start="raise KeyboardInterrupt"), FULL),
    Case("fork-bomb", cells(start="import os\nwhile True:\n    os.fork()"), FULL, needs_seccomp=True),
    # bad files
    Case("corrupt-json", lambda p: nbformat.writes(samples.reference(CHAPTER))[:5000], 0.0,
         reason="not a readable Jupyter notebook"),
    Case("empty-file", lambda p: "", 0.0, reason="not a readable Jupyter notebook"),
    Case("json-not-a-notebook", lambda p: json.dumps({"cells": 1, "answer": 42}), 0.0,
         reason="not a readable Jupyter notebook"),
    Case("notebook-of-another-chapter", other_chapter, 0.0, reason="holds the cells of 06_decoder_masking"),
    # edited, re-typed, deleted, duplicated test cells and forged metadata
    Case("test-cell-claims-points", edit_test_cell(lambda c: setattr(c, "source", "1e9")), 6.0),
    Case("test-cell-retyped", edit_test_cell(retype), 6.0),
    Case("test-cell-forged-output", edit_test_cell(forge_output), 6.0),
    Case("test-cell-forged-points", edit_test_cell(lambda c: c.metadata.nbgrader.update(points=1000), skeleton=False),
         FULL),
    Case("test-cell-grade-flag-off",
         edit_test_cell(lambda c: c.metadata.nbgrader.update(grade=False, checksum="0" * 32)), 6.0),
    Case("test-cell-deleted", without_test_cell, FULL),
    Case("test-cell-duplicated", duplicated_test_cell, 6.0),
    Case("solution-cell-forged-points", forged_solution_points, FULL),
]
# The attacks of issue 29, one module per class of hole.
from tests.adversarial import attacks_batch, attacks_boundary, attacks_checks, attacks_confine  # noqa: E402

CASES += attacks_batch.CASES + attacks_boundary.CASES + attacks_checks.CASES + attacks_confine.CASES


# Each is the softmax of a learner who switches off the grader's clock in their own process once its hidden
# checks call it (ARMED is set by a cell added just before the test cell): alarm cancelled then asleep, SIGALRM
# ignored then busy, SIGALRM blocked then asleep in C code.
STALLS = {
    "alarm_off": "signal.setitimer(signal.ITIMER_REAL, 0)\n    time.sleep(3600)",
    "sig_ign": "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n    while True:\n        pass",
    "c_sleep": "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])\n    ctypes.CDLL(None).sleep(3600)",
}


def stalling(stall: str) -> nbformat.NotebookNode:
    source = ANSWERS["softmax"].replace("def softmax(", "def _softmax(") + textwrap.dedent('''

        import ctypes, signal, time

        def softmax(x, dim=-1):
            if globals().get("ARMED"):
                STALL
            return _softmax(x, dim)
        ''').replace("STALL", stall)
    nb = notebook({"softmax": source})
    test = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax")
    nb.cells.insert(test, nbformat.v4.new_code_cell("ARMED = True"))
    return nb

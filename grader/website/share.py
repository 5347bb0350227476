"""Inside the site's reference kernels only (grader.website.execute installs it; a learner's or a grader's
kernel never has it): a slow statement's results shared between the two editions' runs of a chapter.

The editions run the same code with the same seeds: a translation changes only a code cell's strings and
comments. So the first run of a chapter (English, scheduled first) records each slow top-level statement
that prints nothing (a training loop, a fine-tuning call): the values it changed, the random generators'
states after it and its seconds, under a key made of the code so far with its strings left out, the
course's modules and PyTorch's version. The other edition's run, reaching the same statement with the same
numbers in what the statement reads, puts those values in place (the strings of the cell mapped to its own
translation) instead of running it, and its clock (`time.perf_counter`) moves on by the recorded seconds:
every cell prints as it would have, in its own language, the numbers of the recorded run. Where anything
differs, or a value could not be kept, the statement simply runs.
"""
from __future__ import annotations

import ast
import hashlib
import os
import pickle
import sys
import time
import types
from pathlib import Path

import torch

from grader.website import share_code, share_values
from grader.website.share_code import (
    constants,
    first_uses,
    may_be_slow,
    names_in,
    neutral_dump,
    parse,
    read_before_bound,
)
from grader.website.share_values import (
    fingerprint,
    is_code,
    neutral_text,
    opaque,
    put_back,
    random_states,
    set_random_states,
    strings_of,
    translate,
)

MIN_SECONDS = 1.0  # a statement quicker than this is run in both editions: not worth a file
NAME = "_course_site_share"  # the kernel's name for the installed Share
_real_perf_counter = time.perf_counter


class Share:
    """The AST transformer IPython runs on each cell, and what the wrapped statements call."""

    def __init__(self, folder: Path, cells: list[str], library: str, log: Path, namespace: dict, shell):
        self.folder, self.log_file, self.namespace, self.shell = Path(folder), Path(log), namespace, shell
        self.cells = [parse(shell.transform_cell(source)) for source in cells]
        self.dumps = [None if cell is None else neutral_dump(cell) for cell in self.cells]
        # The key: the course's modules, PyTorch's version, the share's own code (what a share holds, how it is
        # compared), then the cells so far.
        self.chain = hashlib.sha256(f"{library}\0torch {torch.__version__}\0".encode())
        for module in (__file__, share_code.__file__, share_values.__file__):
            self.chain.update(Path(module).read_bytes())
        self.cell = -1
        self.offset = 0.0
        self.min_seconds = MIN_SECONDS
        self.pending: dict = {}
        time.perf_counter = self.perf_counter

    def perf_counter(self) -> float:
        return _real_perf_counter() + self.offset

    # -- the transformer --------------------------------------------------------------------------
    def visit(self, module: ast.Module) -> ast.Module:
        dump = neutral_dump(module)
        following = [j for j in range(self.cell + 1, len(self.cells)) if self.dumps[j] == dump]
        if not following:
            return module  # not one of the notebook's cells
        self.cell = following[0]
        self.chain.update(dump.encode())
        body, last = [], len(module.body) - 1
        for index, statement in enumerate(module.body):
            if (index == last and isinstance(statement, ast.Expr)) or not may_be_slow(statement):
                body.append(statement)
                continue
            wrapper = ast.parse(f"if not {NAME}.replay({self.cell}, {index}):\n"
                                f"    try:\n        pass\n    except BaseException:\n"
                                f"        {NAME}.abandon()\n        raise\n"
                                f"    {NAME}.record({self.cell}, {index})\n").body[0]
            wrapper.body[0].body[0] = statement
            body.append(ast.fix_missing_locations(ast.copy_location(wrapper, statement)))
        module.body = body
        return module

    # -- what a statement touches -----------------------------------------------------------------
    def _touched(self, cell: int, index: int, inputs: bool = False) -> list[str]:
        """The names the statement uses, and those the notebook's own functions it calls use; its inputs
        only: not those it binds before it reads them (their earlier values are of no matter)."""
        names, todo = set(), list(names_in(self.cells[cell].body[index]))
        while todo:
            name = todo.pop()
            if name in names:
                continue
            names.add(name)
            value = self.namespace.get(name)
            if isinstance(value, types.FunctionType) and value.__module__ == "__main__":
                todo += list(value.__code__.co_names)
        if inputs:
            names -= {n for n, read in first_uses([self.cells[cell].body[index]]).items() if not read}
        return sorted(n for n in names if n in self.namespace and n != NAME
                      and not is_code(self.namespace[n]))

    def _read_later(self, cell: int, index: int) -> set[str]:
        later = self.cells[cell].body[index + 1:]
        for module in self.cells[cell + 1:]:
            later += module.body if module is not None else []
        return read_before_bound(later)

    def _path(self, cell: int, index: int) -> Path:
        digest = self.chain.copy()
        digest.update(f"{cell}:{index}".encode())
        return self.folder / f"{digest.hexdigest()[:24]}.pickle"

    def _snapshot(self, names: list[str]) -> dict:
        """Each value as pickled bytes (cheap to take, compared later), or its fingerprint."""
        kept = {}
        for name in names:
            try:
                kept[name] = pickle.dumps(self.namespace[name])
            except Exception:  # noqa: BLE001 - whatever pickle refuses: compared by what can be read of it
                kept[name] = repr(fingerprint(self.namespace[name], lambda s: None))
        return kept

    # -- replay or record ---------------------------------------------------------------------------
    def replay(self, cell: int, index: int) -> bool:
        """True when the statement's recorded results were put in place (the statement is not run)."""
        entered = _real_perf_counter()
        try:
            names = self._touched(cell, index, inputs=True)
            path = self._path(cell, index)
            if path.exists():
                saved = pickle.loads(path.read_bytes())
                if self._put_in_place(saved, names, cell, index):
                    self.offset += saved["seconds"]
                    return True
            self.pending = {"names": names, "before": self._snapshot(names), "random": random_states(),
                            "ids": {n: id(self.namespace[n]) for n in names},
                            "counter": _Counter.install(self.shell)}
            return False
        finally:  # the share's own work is no part of the notebook's time, in either edition
            now = _real_perf_counter()
            self.offset -= now - entered
            if self.pending:
                self.pending["start"] = now

    def _put_in_place(self, saved: dict, names: list[str], cell: int, index: int) -> bool:
        ours = constants(self.cells[cell])
        theirs = saved["constants"]
        if len(theirs) != len(ours):
            return self._ran(cell, index, "the cell's strings do not line up")
        mapping, twofold = {}, set()
        for their, our in zip(theirs, ours):
            if mapping.setdefault(their, our) != our:
                twofold.add(their)  # a word in two sentences: translated two ways, no value may hold it
        if saved["names"] != names:
            return self._ran(cell, index, "the statement touches other names")
        neutral = {n: repr(fingerprint(self.namespace[n], lambda s: None)) for n in names}
        if neutral != saved["neutral"]:
            differ = sorted(n for n in names if neutral[n] != saved["neutral"][n])
            return self._ran(cell, index, f"what the statement reads differs: {', '.join(differ)}")
        if not torch.equal(torch.get_rng_state(), saved["random_before"]["torch"]):
            return self._ran(cell, index, "PyTorch's random generator is elsewhere")
        values = pickle.loads(saved["values"])
        held = set().union(*map(strings_of, values.values())) & twofold
        if held:
            return self._ran(cell, index, f"{sorted(held)[0]!r} is translated two ways")
        for name, value in values.items():
            put_back(self.namespace, name, translate(value, mapping), name in saved["rebound"])
        set_random_states(saved["random_before"], saved["random_after"])
        self.log(f"cell {cell} statement {index}: replayed ({saved['seconds']:.1f} s)")
        return True

    def log(self, line: str) -> None:
        """What happened to a slow statement: the runner reports it."""
        with open(self.log_file, "a", encoding="utf-8") as log:
            log.write(line + "\n")

    def _ran(self, cell: int, index: int, why: str) -> bool:
        self.log(f"cell {cell} statement {index}: ran, {why}")
        return False

    def abandon(self) -> None:
        """The statement raised: nothing to record."""
        pending, self.pending = self.pending, {}
        if pending:
            pending["counter"].remove()

    def record(self, cell: int, index: int) -> None:
        entered = _real_perf_counter()
        try:
            self._record(cell, index, entered)
        finally:
            self.offset -= _real_perf_counter() - entered

    def _record(self, cell: int, index: int, entered: float) -> None:
        pending, self.pending = self.pending, {}
        seconds = entered - pending["start"]
        if pending["counter"].remove():
            if seconds >= self.min_seconds:
                self._ran(cell, index, "not shared: it prints")
            return
        if seconds < self.min_seconds:
            return
        before = pending["before"]
        names = self._touched(cell, index)  # now with the names the statement bound
        after = self._snapshot(names)
        later, allowed = self._read_later(cell, index), set(constants(self.cells[cell]))
        values = {}
        for name in names:
            value = self.namespace[name]
            if isinstance(after[name], str) or opaque(value):  # pickle refused it: it cannot be kept
                if name in later and (after[name] != before.get(name) or "opaque" in after[name]):
                    return self._ran(cell, index, f"not shared: {name} cannot be kept and is read later") and None
                continue
            if after[name] == before.get(name):
                continue
            foreign = {s for s in strings_of(value) if s not in allowed and not neutral_text(s)}
            if foreign:
                return self._ran(cell, index, f"not shared: {name} holds other strings {sorted(foreign)[:3]}") and None
            values[name] = value
        neutral = {}
        for name in pending["names"]:
            kept = before[name]
            value = pickle.loads(kept) if isinstance(kept, bytes) else None
            neutral[name] = repr(fingerprint(value, lambda s: None)) if isinstance(kept, bytes) else kept
        saved = {"constants": list(constants(self.cells[cell])), "names": pending["names"], "neutral": neutral,
                 "random_before": pending["random"], "random_after": random_states(), "seconds": seconds,
                 "values": pickle.dumps(values),
                 "rebound": [n for n in values if id(self.namespace[n]) != pending["ids"].get(n)]}
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(cell, index)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_bytes(pickle.dumps(saved))
        partial.replace(path)  # never a half-written share; the other edition's run may be reading
        self.log(f"cell {cell} statement {index}: recorded ({seconds:.1f} s)")


class _Counter:
    """Counts what a statement prints (stdout) and displays other than a progress bar's widget."""

    def __init__(self, shell):
        self.count, self.shell = 0, shell
        self.stdout, self.publish = sys.stdout, shell.display_pub.publish

    @classmethod
    def install(cls, shell) -> _Counter:
        counter = cls(shell)
        stdout = counter.stdout

        class Counting:
            def write(self, text):
                counter.count += bool(text)
                return stdout.write(text)

            def __getattr__(self, name):
                return getattr(stdout, name)

        def publish(data, *args, **kwargs):
            if "application/vnd.jupyter.widget-view+json" not in data:
                counter.count += 1
            return counter.publish(data, *args, **kwargs)

        sys.stdout, shell.display_pub.publish = Counting(), publish
        return counter

    def remove(self) -> int:
        sys.stdout, self.shell.display_pub.publish = self.stdout, self.publish
        return self.count


def install(folder: str, cells: list[str], library: str, log: str, min_seconds: float = MIN_SECONDS) -> Share:
    """Called by the site's runner (grader.website.execute) before the notebook's first cell."""
    from IPython import get_ipython

    shell = get_ipython()
    share = Share(Path(folder), cells, library, Path(log), shell.user_ns, shell)
    share.min_seconds = min_seconds
    shell.user_ns[NAME] = share
    shell.ast_transformers.append(share)
    return share

"""Which cells a grading run may leave out: course-authored cells no score depends on.

A chapter's demo, plot and experiment cells take most of a grading run, and no hidden check reads
what they print or draw. A grading run therefore leaves out a code cell when all of these hold:

- the course wrote it: its text is, unchanged, a code cell of the release (matched in order), and
  it is neither an exercise (solution) cell nor a test cell; a cell the learner added or edited
  always runs, and so does every solution and test cell;
- nothing that runs needs it: it binds no name, and reads no object other than a module, function
  or class (it might change that object in place), that a running cell reads after it; a test
  cell reads its exercise, and a function or class body reads its globals whenever it is called,
  so at any time. Cells kept for this are running cells too (the closure is taken);
- it has no effect beyond its own names: plain Python (no IPython magics), no attribute or item
  assignment on a module, class or function, no `global`, no star import, and none of the calls
  and names that reach process state or files (`setattr`, `exec`, `open`, `sys`, `os`,
  `torch.set_default_dtype`, `.save(...)`, ...).

Random-number state is the one shared effect left: the hidden checks seed every input they make
and load parameters by name, so they do not depend on it; `tests/test_skipping.py` checks that
the scores are those of a full run for every chapter's reference, untouched and wrong answers.
Leaving cells out gives a learner nothing: they may delete any such cell from their notebook.
"""
from __future__ import annotations

import ast
import difflib
import functools
import symtable
from dataclasses import dataclass, field, fields, replace

# Names whose mere use lets a cell reach beyond its own variables.
GLOBAL_NAMES = frozenset({
    "globals", "locals", "vars", "exec", "eval", "compile", "setattr", "delattr", "__import__", "__builtins__",
    "get_ipython", "open", "input", "breakpoint", "sys", "os", "builtins", "importlib", "ctypes", "gc",
    "subprocess", "shutil", "pathlib", "Path", "tempfile", "pickle", "signal", "threading", "atexit",
    "multiprocessing", "socket", "inspect",
})
# Calls (the last name of a dotted call) that change process-wide state or write files (the others
# that do are reached through the names above).
GLOBAL_CALLS = frozenset({
    "set_default_dtype", "set_default_device", "set_default_tensor_type", "use_deterministic_algorithms",
    "set_flush_denormal", "set_grad_enabled", "set_anomaly_enabled", "set_printoptions", "set_float32_matmul_precision",
    "save", "savez", "savefig", "write_text", "write_bytes", "to_csv", "register_module_forward_hook",
    "register_module_forward_pre_hook", "register_module_full_backward_hook",
})


# The longest code cell of any chapter is about 4,000 characters; parsing a learner's cell of many
# megabytes would take the trusted process's memory, and such a cell always runs anyway.
MAX_ANALYSED = 100_000


@dataclass
class Facts:
    """What one cell binds, reads and may change, from its syntax alone."""

    binds: set[str] = field(default_factory=set)  # names the cell (re)binds in the notebook's namespace
    uses_now: set[str] = field(default_factory=set)  # names it reads from the namespace when it runs
    uses_later: set[str] = field(default_factory=set)  # ... inside function and class bodies (when called)
    stores_into: set[str] = field(default_factory=set)  # names whose object it assigns attributes or items of
    imports: set[str] = field(default_factory=set)  # names it binds by import
    defines: set[str] = field(default_factory=set)  # names it binds by def or class
    unsafe: str | None = None  # why the cell may have effects beyond its names


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


class _Scan(ast.NodeVisitor):
    def __init__(self, facts: Facts):
        self.facts = facts
        self.depth = 0  # > 0 inside a function, lambda or class body (names bound there are local)

    def _bind(self, name: str) -> None:
        if self.depth == 0:
            self.facts.binds.add(name)

    def _target(self, node: ast.AST) -> None:
        """An assignment or deletion target: names are bound, attributes and items are stores into objects."""
        if isinstance(node, ast.Name):
            self._bind(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                self._target(element)
        elif isinstance(node, ast.Starred):
            self._target(node.value)
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            root = _root_name(node)
            if root is not None:
                self.facts.stores_into.add(root)
            self.visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load) and self.depth == 0:
            self.facts.binds.add(node.id)  # stores in comprehensions and the like, to be safe

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._target(target)
        self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target)
        self.visit(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._target(node.target)
        if node.value is not None:
            self.visit(node.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._target(target)

    def visit_For(self, node: ast.For) -> None:
        self._target(node.target)
        self.visit(node.iter)
        for child in node.body + node.orelse:
            self.visit(child)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        self.visit(node.context_expr)
        if node.optional_vars is not None:
            self._target(node.optional_vars)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.facts.binds.add(node.target.id)  # a walrus binds in the enclosing scope, even in a comprehension
        self.visit(node.value)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            name = alias.asname or alias.name.split(".")[0]
            self._bind(name)
            if self.depth == 0:
                self.facts.imports.add(name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if (node.module or "").split(".")[0] in GLOBAL_NAMES:
            self.facts.unsafe = f"an import from {node.module}"
        for alias in node.names:
            if alias.name == "*":
                self.facts.unsafe = "a star import"
                continue
            self._bind(alias.asname or alias.name)
            if self.depth == 0:
                self.facts.imports.add(alias.asname or alias.name)

    def visit_Global(self, node: ast.Global) -> None:
        self.facts.unsafe = "a `global` statement"

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.facts.unsafe = "a `nonlocal` statement"

    def _scope(self, node: ast.AST, name: str | None) -> None:
        if name is not None:
            self._bind(name)
            if self.depth == 0:
                self.facts.defines.add(name)
        for decorator in getattr(node, "decorator_list", []):
            self.visit(decorator)
        args = getattr(node, "args", None)
        if isinstance(args, ast.arguments):
            for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
                self.visit(default)
        for base in getattr(node, "bases", []) + [k.value for k in getattr(node, "keywords", [])]:
            self.visit(base)
        self.depth += 1
        body = node.body if isinstance(node.body, list) else [node.body]
        for child in body:
            self.visit(child)
        self.depth -= 1

    def visit_FunctionDef(self, node) -> None:
        self._scope(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scope(node, node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._scope(node, None)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)

    def visit_MatchAs(self, node) -> None:
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node) -> None:
        if node.name:
            self._bind(node.name)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name in GLOBAL_CALLS:
            self.facts.unsafe = f"a call to {name}()"
        self.generic_visit(node)


COMPREHENSIONS = ("listcomp", "setcomp", "dictcomp", "genexpr")


def _global_reads(table: symtable.SymbolTable, now: set[str], later: set[str], deferred: bool = False) -> None:
    """Sort the names the code reads from the notebook's namespace (globals; parameters and locals
    are not) into those read when the cell runs and those read inside function and class bodies,
    whenever they are called. A comprehension at the top level runs with the cell."""
    for child in table.get_children():
        late = deferred or child.get_name() not in COMPREHENSIONS
        (later if late else now).update(s.get_name() for s in child.get_symbols() if s.is_referenced()
                                        and s.is_global())
        _global_reads(child, now, later, late)


def facts(source: str) -> Facts:
    """The facts of one code cell; a cell that is not plain Python is unsafe (it always runs). A copy of what
    the text gave before, when it did: a class's notebooks hold the same course cells (one parse and one
    symbol table for each, not one per learner). Only short texts are kept (a learner's long cells would
    hold their text in memory)."""
    known = _analysed(source) if len(source) <= KEPT_TEXT else _analysis(source)
    return replace(known, **{f.name: set(getattr(known, f.name)) for f in fields(known) if f.name != "unsafe"})


KEPT_TEXT = 10_000  # characters of a cell text whose facts are kept: the course's cells are shorter (4942 at most)


def _analysis(source: str) -> Facts:
    result = Facts()
    if len(source) > MAX_ANALYSED:
        result.unsafe = f"over {MAX_ANALYSED} characters (not analysed)"
        return result
    try:
        tree = ast.parse(source)
        _Scan(result).visit(tree)
        table = symtable.symtable(source, "<cell>", "exec")
        result.uses_now = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
        _global_reads(table, result.uses_now, result.uses_later)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        result.unsafe = f"not plain Python ({type(err).__name__})"
        return result
    reached = (result.uses_now | result.uses_later) & GLOBAL_NAMES
    if reached and result.unsafe is None:
        result.unsafe = f"it uses {sorted(reached)[0]}"
    return result


_analysed = functools.lru_cache(maxsize=512)(_analysis)  # at most 5 MB of texts


def course_cells(sources: list[str | None], released: list[str]) -> set[int]:
    """Indices of `sources` (None: not a candidate) that are, unchanged and in order, one of the
    `released` cells' texts."""
    candidates = [(i, s) for i, s in enumerate(sources) if s is not None]
    matcher = difflib.SequenceMatcher(None, [s for _, s in candidates], released, autojunk=False)
    matched = set()
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            matched.add(candidates[block.a + k][0])
    return matched


def left_out(cells: list[dict], course: set[int]) -> set[int]:
    """Which of the job's cells (grader.classroom.grading.batch.job_cells) need not run. `course` holds the indices of
    the course-authored code cells (the only candidates)."""
    info = {i: facts(c["source"]) for i, c in enumerate(cells) if c["kind"] == "code"}
    kept = {i for i in info if i not in course or info[i].unsafe}
    # What each running cell reads: at its own turn (top level) or at any later time (function bodies,
    # which the hidden checks call). A test cell reads its exercise at its turn.
    reads_now = {i: info[i].uses_now for i in info}
    reads_now.update({i: {c["exercise"]} for i, c in enumerate(cells) if c["kind"] == "test"})
    reads_later = {i: info[i].uses_later for i in info}
    running = kept | {i for i, c in enumerate(cells) if c["kind"] == "test"}
    # How each name is bound anywhere: a module (import) or a function or class (def) may be called
    # by a left-out cell; any other object might be changed in place by one that reads it.
    imported, defined, data = set(), set(), set()
    for f in info.values():
        imported |= f.imports
        defined |= f.defines
        data |= f.binds - f.imports - f.defines

    def needed(index: int) -> bool:
        f = info[index]
        if f.stores_into & (imported | defined):
            return True  # patches a module, class or function
        touched = f.binds | f.stores_into | ((f.uses_now | f.uses_later) & data)
        return any(touched & reads_later.get(k, set()) or (k > index and touched & reads_now[k]) for k in running)

    changed = True
    while changed:
        changed = False
        for index in sorted(set(info) - kept):
            if needed(index):
                kept.add(index)
                running.add(index)
                changed = True
    return set(info) - kept

"""The grader package's layout, read from its source (issue 26): the import graph goes one way.

- No import cycle among grader's modules, counting imports inside functions too.
- At most six levels: a module's level is one more than the highest level among the grader modules it
  imports when it is imported (imports inside functions and under `if TYPE_CHECKING:` do not run
  then, so they do not count).
- An import of a grader module inside a function says why, with a `# lazy: ...` comment on its line
  or the line above (the command line's start-up, the child's entry point, the checks loaded while
  the fork server starts).
- The trust boundary (grader/boundary) imports nothing of the class (grader/classroom) or of authoring
  (grader/authoring), and the class nothing of authoring; the class's shared types and locks import
  nothing else of the class; only `python -m grader` imports the command line.
- The class's rooms (grader/classroom/<room>/, issue 47) go one way when imported: each imports only the
  rooms below it and the class's bottom modules; an import inside a function that goes back up is one of
  the two named in BACK (and in its room's docstring); each room's docstring says what it owns, what it
  may import and who uses it.
- The first docstring line of each module of the trust boundary says which side it runs on.
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader.chapters import REPO

PACKAGE = REPO / "grader"
MAX_LEVELS = 6
SIDES = ("Trusted side", "Child side", "Both sides", "Kernel side")


@dataclass
class Module:
    name: str
    path: Path
    on_import: set[str] = field(default_factory=set)  # grader modules imported when this one is
    in_functions: list[tuple[str, int, bool]] = field(default_factory=list)  # (module, line, says why)


def _name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))
            if not p.relative_to(PACKAGE).parts[0].startswith("source") and "__pycache__" not in p.parts}


def _targets(node: ast.Import | ast.ImportFrom, here: str, is_package: bool, known: dict) -> set[str]:
    """The grader modules an import statement names (its parent packages import none of them)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = here.split(".") if is_package else here.split(".")[:-1]
            parts = parts[:len(parts) - node.level + 1]
            base = ".".join(parts + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    found = set()
    for name in names:
        parts = name.split(".")
        while parts and ".".join(parts) not in known:
            parts.pop()
        if parts:
            found.add(".".join(parts))
    return found


@functools.cache
def graph() -> dict[str, Module]:
    known = _modules()
    modules = {}
    for name, path in known.items():
        text = path.read_text()
        lines = text.splitlines()
        module = modules[name] = Module(name, path)

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    targets = _targets(child, name, path.name == "__init__.py", known) - {name}
                    if in_function:
                        module.in_functions += [(t, child.lineno, _says_why(lines, child)) for t in sorted(targets)]
                    else:
                        module.on_import |= targets
                visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(ast.parse(text), False)
    return modules


def _says_why(lines: list[str], node: ast.stmt) -> bool:
    """A `# lazy:` comment on the import's lines, or above it, over comments and other imports."""
    said = lines[node.lineno - 1:node.end_lineno]
    above = node.lineno - 2
    while above >= 0 and lines[above].strip().startswith(("#", "from ", "import ")):
        said.append(lines[above])
        above -= 1
    return any("# lazy:" in line for line in said)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def levels(edges: dict[str, set[str]]) -> dict[str, int]:
    @functools.cache
    def level(name: str) -> int:
        return 1 + max((level(d) for d in edges[name]), default=0)
    return {name: level(name) for name in edges}


def test_no_import_cycle():
    modules = graph()
    every = {n: m.on_import | {t for t, _, _ in m.in_functions} for n, m in modules.items()}
    assert cycles(every) == []


def test_at_most_six_levels():
    found = levels({n: m.on_import for n, m in graph().items()})
    deepest = max(found.values())
    assert deepest <= MAX_LEVELS, sorted((lv, n) for n, lv in found.items() if lv > MAX_LEVELS)


def test_imports_inside_functions_say_why():
    unexplained = [f"{m.path.relative_to(REPO)}:{line} imports {target}"
                   for m in graph().values() for target, line, why in m.in_functions if not why]
    assert unexplained == []


def _room(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else None


def test_rooms_import_one_way():
    below = {"boundary": {"classroom", "authoring"}, "classroom": {"authoring"}}
    wrong = []
    for m in graph().values():
        forbidden = below.get(_room(m.name), set())
        for target in m.on_import | {t for t, _, _ in m.in_functions}:
            if _room(target) in forbidden:
                wrong.append(f"{m.name} imports {target}")
    assert wrong == []


def test_the_class_rests_on_its_shared_types_and_locks():
    """Submission (grader.classroom.submissions), the locks, the ledger and the phrasebook are the bottom of
    the class: they import no other module of it, so every room can use them without a cycle."""
    for name in sorted(f"grader.classroom.{b}" for b in CLASS_BOTTOM):
        module = graph()[name]
        imported = module.on_import | {t for t, _, _ in module.in_functions}
        assert {t for t in imported if _room(t) == "classroom"} == set(), name


# The class's rooms, bottom first; rooms of one rank import nothing of each other. The bottom modules stay
# in grader/classroom/ itself.
CLASS_ROOMS = {"intake": 1, "policy": 2, "grades": 3, "lti": 4, "similarity": 4, "grading": 5, "onsubmit": 6}
CLASS_BOTTOM = {"submissions", "locks", "ledger", "phrasebook"}
BACK = {("grader.classroom.intake.sanitise", "grader.classroom.grades.written"),  # is_rubric_box
        ("grader.classroom.policy.timelimit", "grader.classroom.grading.batch")}  # job_cells


def _class_room(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["grader", "classroom"] else None


def test_the_class_has_rooms_and_a_small_bottom():
    loose = sorted(n for n in graph() if _class_room(n) and _class_room(n) not in CLASS_ROOMS
                   and _class_room(n) not in CLASS_BOTTOM)
    assert loose == []


def test_the_class_rooms_import_one_way():
    def rank(name: str) -> int:
        return CLASS_ROOMS.get(_class_room(name), 0)

    wrong = []
    for m in graph().values():
        here = _class_room(m.name)
        if here not in CLASS_ROOMS:
            continue
        deferred = {t for t, _, _ in m.in_functions}
        for target in m.on_import | deferred:
            there = _class_room(target)
            if there is None or there == here or rank(target) < rank(m.name):
                continue
            if target in m.on_import or (m.name, target) not in BACK:
                wrong.append(f"{m.name} imports {target}")
    assert wrong == []


def test_each_class_room_says_what_it_owns_may_import_and_who_uses_it():
    silent = []
    for room in CLASS_ROOMS:
        doc = ast.get_docstring(ast.parse((PACKAGE / "classroom" / room / "__init__.py").read_text())) or ""
        if ("May import:" not in doc or "Used by:" not in doc):
            silent.append(room)
    for module, target in BACK:  # an import going back up is named in its room's docstring
        doc = ast.get_docstring(ast.parse(graph()[module].path.with_name("__init__.py").read_text()))
        if ".".join(target.split(".")[2:]) not in doc:
            silent.append(f"{module} -> {target}")
    assert silent == []


def test_the_command_line_is_on_top():
    """Only `python -m grader` imports the command line (its verbs import one another's shared options)."""
    importers = sorted(m.name for m in graph().values() if _room(m.name) != "cli"
                       and any(t == "grader.cli" or t.startswith("grader.cli.")
                               for t in m.on_import | {t for t, _, _ in m.in_functions}))
    assert importers == ["grader.__main__"]


def test_each_command_is_a_module_of_the_command_line():
    """grader/cli/ is a dispatcher (issue 47): one module per verb, each with its help, add_arguments(parser)
    and run(args), and nothing else in the package but the verbs' shared options (common)."""
    from grader import cli

    assert all(verb.__name__ == f"grader.cli.{name}" and verb.HELP and callable(verb.add_arguments)
               and callable(verb.run) for name, verb in cli.VERBS.items())
    modules = {p.stem for p in (PACKAGE / "cli").glob("*.py")} - {"__init__", "common"}
    assert modules == set(cli.VERBS)


def test_each_boundary_module_says_its_side():
    silent = []
    for m in graph().values():
        if _room(m.name) != "boundary" or m.name.startswith("grader.boundary.specs."):
            continue
        doc = ast.get_docstring(ast.parse(m.path.read_text())) or ""
        if not doc.startswith(SIDES):
            silent.append(f"{m.path.relative_to(REPO)}: {doc.splitlines()[0] if doc else '(no docstring)'}")
    assert silent == []


def figures() -> str:
    """The graph's figures (python tests/test_layout.py): modules, cycles, levels, imports in functions."""
    modules = graph()
    on_import = {n: m.on_import for n, m in modules.items()}
    every = {n: m.on_import | {t for t, _, _ in m.in_functions} for n, m in modules.items()}
    loops = cycles(every)
    one = {n: min(c) for c in loops for n in c}  # each cycle counted as one module
    condensed = {}
    for n, targets in every.items():
        condensed.setdefault(one.get(n, n), set()).update(one.get(t, t) for t in targets
                                                          if one.get(t, t) != one.get(n, n))
    inside = [t for m in modules.values() for t in m.in_functions]
    statements = {(m.name, line) for m in modules.values() for _, line, _ in m.in_functions}
    return "\n".join([
        f"modules: {len(modules)}",
        f"import cycles (imports inside functions counted): {loops or 'none'}",
        f"import cycles (at import time): {cycles(on_import) or 'none'}",
        f"levels (at import time): {max(levels(on_import).values())}",
        f"levels (imports inside functions counted, a cycle as one module): {max(levels(condensed).values())}",
        f"imports of grader modules inside functions: {len(statements)} statements, {len(inside)} modules named, "
        f"{sum(1 for _, _, why in inside if not why)} without a `# lazy:` reason",
    ])


if __name__ == "__main__":
    print(figures())


@pytest.mark.parametrize("guide", ["guides/maintaining.md", "guides/zh/maintaining.md"])
def test_the_maintainers_guide_names_every_module_where_it_lives(guide):
    """The guide's layout block follows the tree: each top-level module and folder of grader/ by its path, each
    module of a room by its name (a chapter's specs and a verb of the command line go by their folder's line)."""
    text = (REPO / guide).read_text()
    start = text.index("grader/cli/ ")
    block = text[start:text.index("```", start)]
    words = set(re.findall(r"[A-Za-z0-9_]+", block))
    missing = [f"grader/{p.name}" for p in sorted(PACKAGE.iterdir())
               if (p.suffix == ".py" or (p / "__init__.py").exists()) and not p.name.startswith("_")
               and f"grader/{p.name}" not in block]
    for room in ("authoring", "boundary", "classroom", "website"):
        for module in sorted((PACKAGE / room).rglob("*.py")):
            name = module.parent.name if module.stem == "__init__" else module.stem
            if module.parent.name != "specs" and not name.startswith("_") and name not in words:
                missing.append(str(module.relative_to(REPO)))
    assert missing == [], f"{guide}'s layout section does not name these: say where they belong"

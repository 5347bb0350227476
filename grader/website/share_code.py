"""What grader.website.share reads from a cell's code: the code less its strings (what the two editions
share), its strings in order (how one edition's translate the other's), which names a statement reads
before it binds them."""
from __future__ import annotations

import ast
import copy


def neutral_dump(node: ast.AST) -> str:
    """The code with every string constant blanked: what the two editions share."""
    class Blank(ast.NodeTransformer):
        def visit_Constant(self, constant):
            return ast.copy_location(ast.Constant(""), constant) if isinstance(constant.value, str) else constant

    return ast.dump(Blank().visit(copy.deepcopy(node)))


def constants(node: ast.AST) -> list[str]:
    """The string constants of the code, in order; not a format's spec (`:>19`), which no value holds and a
    translation may set apart (a Chinese column is wider)."""
    specs = {id(n) for f in ast.walk(node) if isinstance(f, ast.FormattedValue) and f.format_spec is not None
             for n in ast.walk(f.format_spec)}
    return [n.value for n in ast.walk(node)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in specs]


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class _InOrder(ast.NodeVisitor):
    """Each name's first use, in the order Python evaluates a statement: a read, or a binding."""

    def __init__(self):
        self.first: dict[str, bool] = {}  # name -> whether its first use reads it

    def visit_Name(self, node):
        self.first.setdefault(node.id, isinstance(node.ctx, ast.Load))

    def _in_order(self, *parts):
        for part in parts:
            for node in part if isinstance(part, list) else [part]:
                if node is not None:
                    self.visit(node)

    def visit_Assign(self, node):
        self._in_order(node.value, node.targets)

    def visit_AnnAssign(self, node):
        self._in_order(node.value, node.target)

    def visit_AugAssign(self, node):
        if isinstance(node.target, ast.Name):
            self.first.setdefault(node.target.id, True)
        self._in_order(node.target, node.value)

    def visit_NamedExpr(self, node):
        self._in_order(node.value, node.target)

    def visit_For(self, node):
        self._in_order(node.iter, node.target, node.body, node.orelse)


def first_uses(statements: list[ast.stmt]) -> dict[str, bool]:
    """Each name these statements use: whether they read it before they bind it."""
    order = _InOrder()
    for statement in statements:
        order.visit(statement)
    return order.first


def read_before_bound(statements: list[ast.stmt]) -> set[str]:
    """The names these statements read before they bind them: what they take from the code before."""
    return {name for name, read in first_uses(statements).items() if read}


def parse(source: str):
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def may_be_slow(statement: ast.stmt) -> bool:
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom,
                              ast.Global, ast.Nonlocal)):
        return False
    return any(isinstance(n, ast.Call) for n in ast.walk(statement))

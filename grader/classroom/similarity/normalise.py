"""What `grader similarity` compares: a learner's code and prose reduced to what copying does not change.

Code goes through Python's `ast`: docstrings and comments gone (the tree has none), the names a function
binds (arguments, locals) and a class's own attributes made placeholders, as is a helper's name; top-level
definitions and a class's methods sorted, `xs = []; for ...: xs.append(e)` made the comprehension it
equals, generator expressions made list comprehensions; then the tree is written as one token per node
(JPlag's way), each token remembering the learner's line. Code that does not parse falls back to Python's
tokenizer (names made one placeholder, comments dropped), and text it cannot tokenise to its words: a
broken cell is compared less well, never stops the report. Prose: lowercase words, crude suffix stemming,
common words dropped. Both become k-gram hashes winnowed as MOSS does (Schleimer et al., 2003).
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import io
import keyword
import re
import tokenize
from dataclasses import dataclass, field

CODE_K, CODE_WINDOW = 8, 4  # tokens per k-gram; winnowing window (every match of k+w-1 tokens is seen)
PROSE_K, PROSE_WINDOW = 2, 2  # content words per shingle: paraphrase keeps few longer runs
FIXED = set(dir(builtins)) | {"self", "cls"}
STOP = set("""a an the of to in on at by for with from and or but nor so as is are was were be been being it its
this that these those there here then than which who whom whose what when where why how not no do does did
has have had will would can could should may might must shall we you they he she i our your their his her
them us me my also just only very more most much many any each every all both either neither one two into
over under about because since while if else so such same other own out up down""".split())
SKIP = (ast.expr_context, ast.Load, ast.Store, ast.Del)
SUFFIXES = ("ations", "ation", "ings", "ing", "ness", "ments", "ment", "ies", "ied", "ed", "es", "ly", "s")


@dataclass
class Text:
    """One learner's answer to one exercise: its units as shown (lines of code, words of prose), and
    its fingerprints, each with the units it covers (to highlight a match)."""
    units: list[str]
    prose: bool
    prints: dict[int, set[int]] = field(default_factory=dict)


def _hash(tokens) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(tokens).encode(), digest_size=8).digest(), "big")


def winnow(tokens: list[tuple[str, int]], k: int, window: int) -> dict[int, set[int]]:
    """MOSS's winnowing: hash every k-gram, keep the rightmost smallest hash of each window of `window`
    hashes; hash -> the units (lines, words) its k-grams cover. A text shorter than k is one k-gram."""
    if not tokens:
        return {}
    grams = [tokens[i:i + k] for i in range(max(1, len(tokens) - k + 1))]
    hashes = [_hash(t for t, _ in gram) for gram in grams]
    chosen = set()
    for start in range(max(1, len(hashes) - window + 1)):
        span = hashes[start:start + window]
        low = min(span)
        chosen.add(start + max(i for i, h in enumerate(span) if h == low))
    prints: dict[int, set[int]] = {}
    for i in chosen:
        prints.setdefault(hashes[i], set()).update(unit for _, unit in grams[i])
    return prints


# --- code ------------------------------------------------------------------------------------------


def _drop_docstring(body: list) -> list:
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return body[1:] or [ast.Pass()]
    return body


def _append_loop(assign, loop) -> ast.Assign | None:
    """`xs = []` then `for t in it: [if c:] xs.append(e)` as `xs = [e for t in it [if c]]`; else None."""
    if not (isinstance(assign, ast.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name)
            and isinstance(assign.value, ast.List) and not assign.value.elts
            and isinstance(loop, ast.For) and not loop.orelse and len(loop.body) == 1):
        return None
    name, inner, conditions = assign.targets[0].id, loop.body[0], []
    if isinstance(inner, ast.If) and not inner.orelse and len(inner.body) == 1:
        conditions, inner = [inner.test], inner.body[0]
    call = inner.value if isinstance(inner, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "append"
            and isinstance(call.func.value, ast.Name) and call.func.value.id == name and len(call.args) == 1):
        return None
    comp = ast.ListComp(call.args[0], [ast.comprehension(loop.target, loop.iter, conditions, 0)])
    return ast.copy_location(ast.Assign([assign.targets[0]], ast.copy_location(comp, loop)), assign)


class _Canonical(ast.NodeTransformer):
    """Docstrings out, append loops and generators as list comprehensions, bodies' definitions sorted."""

    def _body(self, body: list, sort: bool) -> list:
        body = [self.visit(stmt) for stmt in _drop_docstring(body)]
        out = []
        for stmt in body:
            merged = _append_loop(out[-1], stmt) if out else None
            out[-1:] = [merged] if merged else [out[-1], stmt] if out else [stmt]
        if sort:  # definitions in a canonical order, each where the first definition stood
            defs = sorted((s for s in out if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)),
                          key=_shape)
            slots = iter(defs)
            out = [next(slots) if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else s
                   for s in out]
        return out

    def generic_visit(self, node):
        for name in ("body", "orelse", "finalbody"):
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                setattr(node, name, self._body(value, sort=isinstance(node, ast.Module | ast.ClassDef)
                                               and name == "body"))
        for name, value in ast.iter_fields(node):
            if name in ("body", "orelse", "finalbody") and isinstance(value, list):
                continue
            if isinstance(value, list):
                setattr(node, name, [self.visit(v) if isinstance(v, ast.AST) else v for v in value])
            elif isinstance(value, ast.AST):
                setattr(node, name, self.visit(value))
        return node

    def visit_GeneratorExp(self, node):
        return ast.copy_location(ast.ListComp(self.visit(node.elt), [self.visit(g) for g in node.generators]), node)


def _shape(node) -> str:
    """A definition's structure without its names: the order in which definitions are sorted."""
    def named(n) -> str:  # a library's attribute is structure; one the learner set on self is a name
        own = isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
        return n.attr if isinstance(n, ast.Attribute) and not own else ""

    return " ".join(type(n).__name__ + named(n) for n in ast.walk(node) if not isinstance(n, SKIP))


def _renamed(tree, fixed: frozenset = frozenset()):
    """The tree, changed in place: the names a function binds (arguments, assigned names) and the attributes
    a class sets on `self` all made one placeholder each, as JPlag's tokens carry no names (a renamed or
    rebound variable changes nothing); a definition the release does not have (a learner's helper) called
    `helper`. What stays named: the library's functions and attributes, the release's definitions."""
    everything = list(ast.walk(tree))
    for func in [n for n in everything if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)]:
        nodes = list(ast.walk(func))
        bound = {n.arg for n in ast.walk(func.args) if isinstance(n, ast.arg)}
        if not isinstance(func, ast.Lambda):
            bound |= {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        bound -= {"self", "cls"}
        for node in nodes:
            if isinstance(node, ast.arg) and node.arg in bound:
                node.arg = "v"
            elif isinstance(node, ast.Name) and node.id in bound:
                node.id = "v"
    for cls in [n for n in everything if isinstance(n, ast.ClassDef)]:
        on_self = [n for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                   and n.value.id == "self"]
        stored = {n.attr for n in on_self if isinstance(n.ctx, ast.Store)}
        for node in on_self:
            if node.attr in stored:
                node.attr = "attr"
    helpers = {n.name for n in everything if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
               and n.name not in fixed and not n.name.startswith("__")}
    for node in everything:  # the helper's definition, and every call of it (a function's, or a method's)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name in helpers:
            node.name = "helper"
        elif isinstance(node, ast.Name) and node.id in helpers:
            node.id = "helper"
        elif isinstance(node, ast.Attribute) and node.attr in helpers and isinstance(node.value, ast.Name) \
                and node.value.id == "self":
            node.attr = "helper"
    return tree


def _tokens_of(tree) -> list[tuple[str, int]]:
    """The tree in pre-order, one token per node (its kind and the name, attribute or constant it holds)."""
    out, line = [], 1

    def walk(node):
        nonlocal line
        if isinstance(node, SKIP):
            return
        line = getattr(node, "lineno", line)
        kind = type(node).__name__
        detail = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                  else node.arg if isinstance(node, ast.arg) else getattr(node, "name", "") or "")
        if isinstance(node, ast.Constant):
            detail = "str" if isinstance(node.value, str) else repr(node.value)[:20]
        out.append((f"{kind}:{detail}", line))
        for child in ast.iter_child_nodes(node):
            walk(child)

    for stmt in tree.body:
        walk(stmt)
    return out


def _fallback_tokens(source: str) -> list[tuple[str, int]]:
    """Code that does not parse: Python's tokens (names one placeholder, comments out); from where the
    tokenizer gives up, the words and signs of each line."""
    out, last = [], 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            last = tok.start[0]
            if tok.type == tokenize.NAME:
                out.append((tok.string if keyword.iskeyword(tok.string) or tok.string in FIXED else "NAME", last))
            elif tok.type in (tokenize.OP, tokenize.NUMBER):
                out.append((tok.string, last))
            elif tok.type == tokenize.STRING:
                out.append(("STR", last))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        for number, line in enumerate(source.splitlines()[last:], last + 1):
            out += [(word, number) for word in re.findall(r"\w+|[^\w\s]", line.split("#", 1)[0])]
    return out


def code_tokens(source: str, fixed: frozenset = frozenset()) -> list[tuple[str, int]]:
    """A code cell's tokens after normalisation, each with its line (1-based) in `source`. `fixed`: the
    names the release defines (an exercise's own function or class keeps its name)."""
    lines = [("pass" if line.lstrip().startswith(("%", "!")) else line) for line in source.splitlines()]
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return _fallback_tokens(source)
    try:
        return _tokens_of(_renamed(_Canonical().visit(tree), fixed))
    except RecursionError:  # nesting deep enough to exhaust the stack: its tokens will do
        return _fallback_tokens(source)


def code_text(source: str, fixed: frozenset = frozenset()) -> Text:
    text = Text(source.splitlines() or [""], prose=False)
    text.prints = {h: {u - 1 for u in units} for h, units in winnow(code_tokens(source, fixed), CODE_K,
                                                                       CODE_WINDOW).items()}
    return text


# --- prose -----------------------------------------------------------------------------------------


def stem(word: str) -> str:
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def prose_tokens(markdown: str) -> list[tuple[str, int]]:
    """Content words, lowercased and stemmed, each with its index among the answer's words as shown."""
    words = markdown.split()
    out = []
    for i, word in enumerate(words):
        for part in re.findall(r"[^\W_]+", word.casefold()):
            if part not in STOP:
                out.append((stem(part), i))
    return out


def prose_text(markdown: str) -> Text:
    text = Text(markdown.split() or [""], prose=True)
    text.prints = winnow(prose_tokens(markdown), PROSE_K, PROSE_WINDOW)
    return text

"""`grader similarity CHAPTER`: pairs of learners ranked by how alike their answers are, for the instructor.

Each learner's graded code cells (nbgrader `grade_id`s of the release's solution cells) and written answers
are reduced to fingerprints (grader.classroom.similarity.normalise: renaming, reordering, comments,
docstrings, loops against comprehensions and light paraphrase change none). What the release itself holds
(skeleton, signatures, questions) is taken out, and each fingerprint two learners share is weighed by how
rare it is in the class, w = ln((N+1)/df) for a fragment df of the N learners wrote: a fragment most of the
class writes counts little, so short exercises that honest learners write alike (a softmax) do not flag
everybody. A pair's score for an exercise is the weight of what they share over what the same fingerprints
would weigh if only this pair had written them: 1 when the two share everything and nobody else writes
it, 0 when they share nothing rare. The overall score is the same over all exercises together.

Reads the course directory only (the learners' own notebooks first: originals/, submitted/, autograded/,
lms/); writes nothing but the --html page the instructor names.
"""
from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import numpy as np

from grader.chapters import Chapter, is_answer_cell
from grader.classroom.intake.collect import admitted
from grader.classroom.similarity.normalise import Text, code_text, prose_text

FOLDERS = ("originals", "submitted", "autograded", "lms")  # where a learner's notebook is looked for, in order
MAX_BYTES = 20_000_000  # a notebook larger than this is not read (noted)
GROUP_SHARE = 0.5  # a group is shown when at least this share of its members' answers is theirs alone
MAX_ANSWER = 100_000  # characters of one answer compared (the rest noted): one learner cannot stop the report
WEIGHTING = ("Shared fragments are weighed by rarity: a fragment written by df of the N learners counts "
             "ln((N+1)/df), so what most of the class writes (the skeleton is removed first) counts little; "
             "1.0 means the two share everything and nobody else wrote it.")


@dataclass
class Learner:
    name: str
    texts: dict[str, Text] = field(default_factory=dict)


@dataclass
class Pair:
    a: str
    b: str
    score: float
    exercises: dict[str, float]


@dataclass
class Group:
    """Three or more learners who hand in the same fragments nobody else wrote (rarity weighting scores
    each of their pairs lower the more of them there are: the group is shown as a group)."""
    members: tuple[str, ...]
    share: float  # of what each member wrote (beyond the release), on average, the part exactly these wrote
    exercises: tuple[str, ...]  # where they share it


@dataclass
class Result:
    chapter: Chapter
    items: dict[str, str]  # grade_id -> "code" or "written", in notebook order
    learners: dict[str, Learner]
    pairs: list[Pair]
    weights: dict[str, dict[int, float]]  # grade_id -> fingerprint -> weight (0..1 of the pair-only weight)
    notes: list[str]
    groups: list[Group] = field(default_factory=list)


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(map(str, source)) if isinstance(source, list) else str(source)


def _grade_id(cell) -> str | None:
    meta = cell.get("metadata", {}) if isinstance(cell.get("metadata", {}), dict) else {}
    nb_meta = meta.get("nbgrader", {})
    return nb_meta.get("grade_id") if isinstance(nb_meta, dict) and nb_meta.get("solution") else None


def release_notebook(root: Path, chapter: Chapter) -> Path:
    """The notebook the learners were given: the course directory's release, else the course's own."""
    for path in (root / "release" / chapter.assignment / chapter.notebook_name, chapter.course_notebook):
        if path.is_file():
            return path
    raise ValueError(f"no release of {chapter.assignment}: neither {root / 'release' / chapter.assignment} "
                     f"nor {chapter.course_notebook} holds {chapter.notebook_name}")


@dataclass
class Release:
    items: dict[str, str]
    fixed: frozenset  # the names the release defines: an exercise's function keeps its name
    prints: dict[str, set[int]]  # "code"/"written" -> fingerprints of all the release's text of that kind


def read_release(path: Path) -> Release:
    nb = nbformat.read(path, as_version=4)
    items, fixed, code, prose = {}, set(), [], []
    for cell in nb.cells:
        grade_id = _grade_id(cell)
        if cell.cell_type == "code":
            code.append(cell.source)
            if grade_id:
                items[grade_id] = "code"
            try:
                fixed |= {n.name for n in ast.walk(ast.parse(cell.source))
                          if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
            except SyntaxError:
                pass
        elif cell.cell_type == "markdown":
            prose.append(cell.source)
            if grade_id and is_answer_cell(cell):
                items[grade_id] = "written"
    fixed = frozenset(fixed | set(items))
    prints = {"code": set().union(*(code_text(s, fixed).prints for s in code)),
              "written": set().union(*(prose_text(s).prints for s in prose))}
    return Release(items, fixed, prints)


def _notebook_of(folder: Path, chapter: Chapter) -> Path | None:
    found = sorted(p for p in folder.glob("*.ipynb") if p.is_file() and not p.is_symlink())
    return next((p for p in found if p.name == chapter.notebook_name), found[0] if found else None)


def find_notebooks(root: Path, chapter: Chapter) -> tuple[dict[str, Path], list[str]]:
    """student -> their notebook of `chapter`, from the first of FOLDERS that has one; links never followed."""
    found, notes = {}, []
    for kind in FOLDERS:
        base = root / kind
        if not base.is_dir() or base.is_symlink():
            continue
        students, refused = admitted(sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")))
        notes += [f"{kind}/{note}" for note in refused]  # names learners chose, never shown as learners
        for student in students:
            folder = student / chapter.assignment
            if student.name in found or not folder.is_dir():
                continue
            if student.is_symlink() or folder.is_symlink():
                notes.append(f"{kind}/{student.name}: a link, not read")
                continue
            notebook = _notebook_of(folder, chapter)
            if notebook:
                found[student.name] = notebook
    return found, notes


def read_learner(name: str, path: Path, release: Release) -> tuple[Learner | None, list[str]]:
    """A learner's answers as Texts; a notebook that cannot be read gives None and a note, never an error."""
    learner = Learner(name)
    try:
        if path.stat().st_size > MAX_BYTES:
            return None, [f"{name}: {path.name} is over {MAX_BYTES // 1_000_000} MB, not read"]
        # the JSON as it is, not nbformat's validated node: one odd cell must not cost the whole notebook
        cells = json.loads(path.read_text(encoding="utf-8", errors="replace"))["cells"]
        if not isinstance(cells, list):
            raise TypeError("cells is not a list")
    except Exception as err:  # noqa: BLE001 (any broken notebook: the report goes on without it)
        return None, [f"{name}: {path.name} unreadable ({type(err).__name__}), left out"]
    notes = []
    for cell in cells:
        grade_id = None
        try:
            grade_id = _grade_id(cell) if isinstance(cell, dict) else None
            kind = release.items.get(grade_id)
            if kind is None or grade_id in learner.texts:
                continue
            wanted = {"code": "code", "written": "markdown"}[kind]
            if cell.get("cell_type") != wanted:
                continue
            source = _source(cell)
            if len(source) > MAX_ANSWER:
                notes.append(f"{name}: {grade_id} is {len(source):,} characters; only its first {MAX_ANSWER:,} "
                             "compared")
                source = source[:MAX_ANSWER].rsplit("\n", 1)[0]
            learner.texts[grade_id] = code_text(source, release.fixed) if kind == "code" else prose_text(source)
        except Exception as err:  # noqa: BLE001 (one odd cell: that answer left out, the rest read)
            known = isinstance(grade_id, str) and grade_id in release.items  # never the learner's own text
            where = grade_id if known else "a cell"
            notes.append(f"{name}: {where} could not be read ({type(err).__name__}), left out")
    for text in learner.texts.values():
        for printed in release.prints["written" if text.prose else "code"]:
            text.prints.pop(printed, None)
    return learner, notes


def compare(learners: dict[str, Learner], items: dict[str, str]) -> tuple[list[Pair], dict[str, dict[int, float]],
                                                                       list[Group]]:
    """Every pair's score per item and overall (see the module's docstring), highest first; the groups.

    An inverted index (fingerprint -> the learners who wrote it), not a learners x fingerprints matrix:
    memory grows with the fingerprints that exist. A fingerprint one learner wrote adds to that learner's
    mass only; the others are summed per set of learners who share them, so the pair sums cost the
    sets, not the fingerprints."""
    names = sorted(learners)
    n = len(names)
    best = math.log((n + 1) / 2) if n > 1 else 1.0  # the weight of a fragment only one pair wrote
    shared_total, mass_total, written = np.zeros((n, n)), np.zeros((n, n)), np.zeros(n)
    per_item, weights, together = {}, {}, {}
    for item in items:
        holders: dict[int, list[int]] = {}
        sizes = np.zeros(n)
        for row, name in enumerate(names):
            text = learners[name].texts.get(item)
            if text is not None:
                sizes[row] = len(text.prints)
                for printed in text.prints:
                    holders.setdefault(printed, []).append(row)
        sets: dict[tuple[int, ...], float] = {}
        weights[item] = {}
        for printed, rows in holders.items():
            w = math.log((n + 1) / len(rows))
            weights[item][printed] = w / best
            if len(rows) > 1:
                sets[tuple(rows)] = sets.get(tuple(rows), 0.0) + w
            if 3 <= len(rows) <= max(6, n // 10):  # a group, not what much of the class writes
                counts = together.setdefault(tuple(rows), {})
                counts[item] = counts.get(item, 0) + 1
        shared = np.zeros((n, n))
        for rows, w in sets.items():
            shared[np.ix_(rows, rows)] += w
        mass = best * (sizes[:, None] + sizes[None, :]) / 2
        per_item[item] = np.divide(shared, mass, out=np.zeros_like(shared), where=mass > 0)
        shared_total += shared
        mass_total += mass
        written += sizes
    overall = np.divide(shared_total, mass_total, out=np.zeros_like(shared_total), where=mass_total > 0)
    pairs = [Pair(names[i], names[j], round(min(1.0, float(overall[i, j])), 4),
                  {item: round(min(1.0, float(per_item[item][i, j])), 4) for item in items})
             for i in range(n) for j in range(i + 1, n)]
    pairs.sort(key=lambda p: (-p.score, p.a, p.b))
    return pairs, weights, _groups(names, together, written)


def _groups(names: list[str], together: dict[tuple[int, ...], dict[str, int]], written) -> list[Group]:
    """The sets of learners who alone wrote at least GROUP_SHARE of what each wrote, largest sets first,
    a set inside a larger one shown left out; highest share first."""
    found = []
    for rows, counts in sorted(together.items(), key=lambda kv: -len(kv[0])):
        mean = float(np.mean([written[r] for r in rows]))
        share = sum(counts.values()) / mean if mean else 0.0
        if share >= GROUP_SHARE and not any(set(rows) <= set(g) for g, _, _ in found):
            found.append((rows, share, tuple(counts)))
    return sorted((Group(tuple(names[r] for r in rows), round(min(1.0, share), 4), items)
                   for rows, share, items in found), key=lambda g: (-g.share, g.members))


def similarity(course_dir: str | Path, chapter: Chapter) -> Result:
    root = Path(course_dir)
    if not root.is_dir():
        raise ValueError(f"{root}: no such course directory (give --course-dir)")
    release = read_release(release_notebook(root, chapter))
    if not release.items:
        raise ValueError(f"{chapter.assignment}: its release has no graded answer cells to compare")
    paths, notes = find_notebooks(root, chapter)
    if not paths:
        raise ValueError(f"no submissions of {chapter.assignment} in {root} (looked in "
                         + ", ".join(f"{f}/<student>/{chapter.assignment}/" for f in FOLDERS) + ")")
    learners = {}
    for name, path in paths.items():
        learner, said = read_learner(name, path, release)
        notes += said
        if learner is not None:
            learners[name] = learner
    pairs, weights, groups = compare(learners, release.items)
    return Result(chapter, release.items, learners, pairs, weights, notes, groups)


def as_json(result: Result) -> dict:
    return {"pairs": [{"a": p.a, "b": p.b, "score": p.score, "exercises": p.exercises} for p in result.pairs],
            "groups": [{"members": list(g.members), "share": g.share, "exercises": list(g.exercises)}
                       for g in result.groups],
            "notes": result.notes}


GROUPS = (f"Groups: three or more learners who alone wrote at least {GROUP_SHARE:.0%} of what each of them wrote "
          "(beyond the release); rarity weighting scores each of their pairs lower the more of them there are.")


def format_groups(result: Result) -> list[str]:
    return ["", GROUPS] + [f"  share {g.share:.2f}: {', '.join(map(_printable, g.members))} "
                           f"({', '.join(g.exercises)})" for g in result.groups] if result.groups else []


def _printable(name: str) -> str:
    """A learner's folder name for a terminal: a control character (an escape sequence) shown as '?'."""
    return "".join(c if c.isprintable() else "?" for c in name)


def format_table(result: Result, top: int = 20) -> str:
    items = list(result.items)
    width = max([len("learner a")] + [len(n) for p in result.pairs[:top] for n in (p.a, p.b)])
    lines = [f"{result.chapter.assignment}: {len(result.learners)} learners, {len(result.pairs)} pairs; "
             f"the {min(top, len(result.pairs))} most alike (columns: {', '.join(items)})", WEIGHTING, "",
             f"{'learner a':<{width}}  {'learner b':<{width}}  score  " + "  ".join(f"{i[:10]:>10}" for i in items)]
    for p in result.pairs[:top]:
        lines.append(f"{_printable(p.a):<{width}}  {_printable(p.b):<{width}}  {p.score:5.2f}  "
                     + "  ".join(f"{p.exercises[i]:>10.2f}" for i in items))
    return "\n".join(lines + format_groups(result) + [f"note: {_printable(n)}" for n in result.notes])

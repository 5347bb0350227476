"""`grader report`: one chapter across the class, as an HTML page with its figures embedded.

Per exercise and per check, how many learners passed; the most frequent failures, named by the
check that caught them (each check is written against a catalogued mistake); the score
distribution; the submissions that failed to grade, with the reason. A check that nobody passes is
flagged (a broken check?), and one that everybody passes once the class is large enough for that to
mean something (a check that tests nothing?): in a small class most checks are passed by everyone.

The per-check results are read from the autograded notebooks' test-cell outputs (grader.boundary.runner's
report: "ok    <check>", "FAIL  <check>: <why>", "no credit: <reason>"); the scores from the
gradebook; the grading errors from `grading-notes.json`, written at every grading run.
"""
from __future__ import annotations

import base64
import html
import io
import json
import re
import textwrap
from collections import Counter
from pathlib import Path

import nbformat

from grader.boundary.specs import exercises
from grader.chapters import TEST_PREFIX, Chapter, is_test_cell
from grader.classroom.grades.export import require_gradebook
from grader.classroom.grades.total import chapter_total, late_policy
from grader.coursedir import database_of

NOTES_FILE = "grading-notes.json"
UNFINISHED = "not implemented yet"  # grader.boundary.runner's message for a skeleton left as handed out
EVERYBODY_FROM = 20  # learners: below this, "everybody passes" is what most checks show, not a warning
CHECK_LINE = re.compile(r"^\s*(ok|FAIL)\s{2,}(.+)$")


def save_notes(course, submissions) -> None:
    """Each submission's error and notes of this run, by assignment and student (replacing older ones)."""
    path = course.root / NOTES_FILE
    notes = load_notes(course.root)
    for sub in submissions:
        assignment = sub.chapter.assignment if sub.chapter else "unknown chapter"
        # graded: False where the learner's file never reached the sandbox (unreadable, of another
        # chapter, a set-aside duplicate): a regrade must not grade the release staged in its place
        entry = {"notebook": sub.path.name, "error": sub.error, "notes": sub.notes, "graded": sub.verdict is not None}
        if sub.error and sub.error.startswith("not graded:"):  # a set-aside duplicate: keep the graded one's entry
            notes.setdefault(assignment, {}).setdefault(f"{sub.student} ({sub.path.name})", entry)
            continue
        notes.setdefault(assignment, {})[sub.student] = entry
    path.write_text(json.dumps(notes, indent=1))


def load_notes(course_root: Path) -> dict:
    try:
        return json.loads((course_root / NOTES_FILE).read_text())
    except (OSError, ValueError):
        return {}


def check_results(notebook: Path, known: list[str] = ()) -> dict[str, dict[str, str | None]]:
    """exercise (grade_id) -> {check: None if it passed, else why it failed}; {"": reason} for no credit.
    `known`: the checks' descriptions, which may hold ": " themselves."""
    nb = nbformat.read(notebook, as_version=4)
    results = {}
    for cell in nb.cells:
        if not is_test_cell(cell):
            continue
        checks = results.setdefault(cell.metadata.nbgrader["grade_id"], {})
        text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        for line in text.splitlines():
            found = CHECK_LINE.match(line)
            if line.strip().startswith("no credit:"):
                checks[""] = line.strip().removeprefix("no credit:").strip()
            elif found and found[1] == "ok":
                checks[found[2].strip()] = None
            elif found:
                rest = line.strip().removeprefix("FAIL").strip()
                name = max((d for d in known if rest == d or rest.startswith(d + ": ")), key=len, default=None)
                name = name or rest.split(": ", 1)[0]
                checks[name] = rest[len(name):].removeprefix(": ") or "failed"
    return results


def collect(course_root: Path, db_url: str, chapter: Chapter) -> dict:
    from nbgrader.api import Gradebook, MissingEntry

    require_gradebook(db_url)
    with Gradebook(db_url) as gb:
        try:
            assignment = gb.find_assignment(chapter.assignment)
        except MissingEntry:
            raise ValueError(f"the gradebook has no {chapter.assignment}: grade it first") from None
        late = late_policy(course_root)  # the course's one total (grader.classroom.grades.total)
        found = [chapter_total(gb, s.student.id, chapter.assignment, late) for s in assignment.submissions]
        scores = {t.student: (t.raw, t.penalty) for t in found}
        pending = {t.student: len(t.pending) for t in found if t.pending}
        max_score = float(assignment.max_score)
    notes = load_notes(course_root).get(chapter.assignment, {})
    failed = {student: entry["error"] for student, entry in notes.items() if entry.get("error")}
    spec = {TEST_PREFIX + name: [c.description for c in ex.checks] for name, ex in exercises(chapter.name).items()}
    checks = {(exercise, check): [0, 0] for exercise, names in spec.items() for check in names}
    failures: Counter = Counter()
    unfinished: Counter = Counter()
    examples: dict[tuple[str, str], str] = {}
    for student in sorted(scores):
        notebook = course_root / "autograded" / student / chapter.assignment / chapter.notebook_name
        if student in failed or not notebook.exists():
            continue  # nothing ran: counted under "failed to grade", not as failed checks
        results = check_results(notebook, [c for names in spec.values() for c in names])
        for exercise, names in spec.items():
            said = results.get(exercise, {})
            for check in names:
                passed = check in said and said[check] is None
                checks[(exercise, check)][0 if passed else 1] += 1
            # a no-credit exercise (unfinished, a forbidden call) is one failure, named by its reason
            wrong = [(c, w) for c, w in said.items() if w is not None]
            if wrong and all(UNFINISHED in w or "NotImplementedError" in w for c, w in wrong if c):
                unfinished[exercise] += 1  # the exercise left undone: not a mistake to rank
                continue
            for check, why in ([(f"no credit: {said[''][:60]}", said[""])] if "" in said else wrong):
                failures[(exercise, check)] += 1
                examples.setdefault((exercise, check), why)
    return {"scores": scores, "pending": pending, "max_score": max_score, "failed": failed, "checks": checks,
            "failures": failures, "examples": examples, "unfinished": unfinished,
            "notes": {s: e["notes"] for s, e in notes.items() if e.get("notes")}}


def _figure(draw) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = draw(plt)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def figures(data: dict) -> dict[str, str]:
    def pass_rates(plt):
        # whole check names, wrapped (cut at a width they lost their ends, which tell checks apart)
        labels = [textwrap.fill(f"{e.removeprefix('test_')}: {c}", 60) for e, c in data["checks"]]
        rates = [p / (p + f) for p, f in data["checks"].values()]
        lines = sum(label.count("\n") + 1 for label in labels)
        fig, ax = plt.subplots(figsize=(11, 0.26 * lines + 0.12 * len(labels) + 1.2))
        exercises = list(dict.fromkeys(e for e, _ in data["checks"]))  # one colour per exercise
        palette = plt.get_cmap("tab10")
        colours = [palette(exercises.index(e) % 10) for e, _ in data["checks"]]
        ax.barh(range(len(labels)), rates, color=colours, height=0.8)
        ax.set_yticks(range(len(labels)), labels=labels)
        ax.set_ylim(len(labels) - 0.5, -0.5)  # the first check on top
        ax.grid(axis="x", alpha=0.4)
        ax.set(xlim=(0, 1), xlabel="share of learners passing", ylabel="")
        return fig

    def distribution(plt):
        totals = [score - penalty for score, penalty in data["scores"].values()]
        fig, ax = plt.subplots(figsize=(7, 3))
        ax.hist(totals, bins=min(20, max(5, len(totals))), range=(0, data["max_score"] or 1), edgecolor="white")
        ax.grid(axis="y", alpha=0.4)
        ax.set(xlabel=f"score after late penalty (of {data['max_score']:g})", ylabel="learners")
        ax.yaxis.get_major_locator().set_params(integer=True)
        return fig

    out = {"distribution": _figure(distribution)}
    if data["checks"]:
        out["checks"] = _figure(pass_rates)
    return out


def _flag(passed: int, failed: int) -> str:
    if passed == 0:
        return f"nobody passes (0 of {failed} learners)"
    if failed == 0 and passed >= EVERYBODY_FROM:
        return f"every one of {passed} learners passes"
    return ""


def render(chapter: Chapter, data: dict) -> str:
    esc = html.escape
    pics = figures(data)
    graded = len(data["scores"]) - len(data["failed"])
    rows, flags = [], []
    for (exercise, check), (passed, failed) in data["checks"].items():
        flag = _flag(passed, failed)
        if flag:
            flags.append(f"<li><b>{esc(exercise)}</b> &middot; {esc(check)}: {flag}</li>")
        rows.append(f"<tr class='{'flag' if flag else ''}'><td>{esc(exercise)}</td><td>{esc(check)}</td>"
                    f"<td>{passed} / {passed + failed}</td><td>{esc(flag)}</td></tr>")
    common = "".join(f"<tr><td>{n}</td><td>{esc(e)}</td><td>{esc(c)}</td>"
                     f"<td>{esc(data['examples'][(e, c)][:200])}</td></tr>"
                     for (e, c), n in data["failures"].most_common(10))
    failed = "".join(f"<li><b>{esc(s)}</b>: {esc(why)}</li>" for s, why in sorted(data["failed"].items()))
    pending = data.get("pending", {})
    scores = "".join(f"<tr><td>{esc(s)}</td><td>{raw:g}</td><td>{pen:g}</td><td>{max(0.0, raw - pen):g} / "
                     f"{data['max_score']:g}" + (f" · {pending[s]} written answer(s) pending" if s in pending else "")
                     + "</td></tr>"
                     for s, (raw, pen) in sorted(data["scores"].items()))

    def img(key: str, alt: str) -> str:
        return f"<img alt='{alt}' src='data:image/png;base64,{pics[key]}'>" if key in pics else ""

    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(chapter.assignment)}: class report</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}
tr.flag{{background:#fff3cd}}img{{max-width:100%}}
.flags{{background:#fff3cd;padding:.5em 2em;border-left:4px solid #e0a800}}</style></head>
<body><h1>{esc(chapter.assignment)}: class report</h1>
<p>{len(data['scores'])} submission(s) in the gradebook; {graded} graded, {len(data['failed'])} failed to grade.</p>
<h2>Checks to look at</h2>
{f"<ul class='flags'>{''.join(flags)}</ul>" if flags else "<p>No check flagged.</p>"}
{"" if graded >= EVERYBODY_FROM else f"<p>With {graded} graded learner(s), a check that every one of them passes is "
 f"not flagged: that takes at least {EVERYBODY_FROM} learners to suggest a check that tests nothing.</p>"}
<h2>Score distribution</h2>{img("distribution", "histogram of the class's scores")}
<h2>Passes per check</h2>{img("checks", "share of learners passing each check")}
<table><tr><th>exercise</th><th>check</th><th>passed</th><th>flag</th></tr>{''.join(rows)}</table>
<h2>Most frequent failures</h2>
<table><tr><th>learners</th><th>exercise</th><th>check (the mistake it catches)</th><th>a message</th></tr>
{common}</table>
{"".join(f"<p>{n} learner(s) left <b>{esc(e)}</b> unfinished (not counted above).</p>"
         for e, n in data["unfinished"].items())}
<h2>Failed to grade</h2>{f"<ul>{failed}</ul>" if failed else "<p>None.</p>"}
<h2>Scores</h2><table><tr><th>learner</th><th>raw</th><th>late penalty</th><th>score</th></tr>{scores}</table>
</body></html>"""


def write_report(course_dir: str | Path, chapter: Chapter, out: str | Path | None = None,
                 db_url: str | None = None) -> Path:
    root = Path(course_dir).resolve()
    if not root.is_dir():
        raise ValueError(f"{root}: no such course directory")
    data = collect(root, db_url or database_of(root), chapter)
    path = Path(out) if out else root / "reports" / f"{chapter.assignment}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(chapter, data))
    return path

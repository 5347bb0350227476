"""`grader similarity --html OUT`: the most alike pairs side by side, what they share highlighted.

Everything a learner wrote (names, code, prose) is escaped data; the page runs no script and loads
nothing (a strict CSP, as the feedback pages: grader.classroom.grading.recording). For the instructor only: it is
written where the instructor says, never into the exchange.
"""
from __future__ import annotations

import html
from pathlib import Path

from grader.classroom.similarity.normalise import Text
from grader.classroom.similarity.pairs import GROUPS, WEIGHTING, Result

CSP = ("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
       "img-src data:; base-uri 'none'; form-action 'none'\">")
RARE = 0.5  # a shared fragment weighing at least this (of the pair-only weight) is marked strongly
STYLE = """body { font-family: sans-serif; margin: 1.5em; } table { border-collapse: collapse; }
td, th { border: 1px solid #bbb; padding: .2em .5em; vertical-align: top; } .side { width: 50%; }
pre { white-space: pre-wrap; font-size: 85%; margin: 0; } mark.rare { background: #ffb347; }
mark.common { background: #fff1c9; } h2 { margin-top: 2em; } p.prose { font-size: 90%; }"""


def _marked(text: Text, units: dict[int, bool]) -> str:
    """The learner's text, escaped, each unit (line or word) that is part of a shared fragment marked."""
    parts = []
    for i, unit in enumerate(text.units):
        shown = html.escape(unit)
        if i in units:
            shown = f'<mark class="{"rare" if units[i] else "common"}">{shown}</mark>'
        parts.append(shown)
    return f'<p class="prose">{" ".join(parts)}</p>' if text.prose else f"<pre>{chr(10).join(parts)}</pre>"


def _shared_units(mine: Text, theirs: Text, weights: dict[int, float]) -> dict[int, bool]:
    units: dict[int, bool] = {}
    for printed in mine.prints.keys() & theirs.prints.keys():
        rare = weights.get(printed, 0.0) >= RARE
        for unit in mine.prints[printed]:
            units[unit] = units.get(unit, False) or rare
    return units


def render(result: Result, top: int = 20) -> str:
    esc = html.escape
    pairs = [p for p in result.pairs if p.score > 0][:top]
    rows = "".join(f'<tr><td><a href="#pair{n}">{esc(p.a)}</a></td><td>{esc(p.b)}</td><td>{p.score:.2f}</td>'
                   + "".join(f"<td>{p.exercises[i]:.2f}</td>" for i in result.items) + "</tr>"
                   for n, p in enumerate(pairs))
    out = [f"<!DOCTYPE html>\n<html><head>{CSP}<meta charset=\"utf-8\"><title>Similarity: "
           f"{esc(result.chapter.assignment)}</title><style>{STYLE}</style></head><body>",
           f"<h1>Similarity: {esc(result.chapter.assignment)}</h1>",
           f"<p>{len(result.learners)} learners; the {len(pairs)} most alike pairs. {esc(WEIGHTING)} "
           f"Marked: the fragments a pair shares (strong: rare in the class, light: common). A high score is a "
           f"reason to look, not a finding.</p>",
           "<table><tr><th>learner a</th><th>learner b</th><th>score</th>"
           + "".join(f"<th>{esc(i)}</th>" for i in result.items) + f"</tr>{rows}</table>"]
    if result.groups:
        out.append(f'<h2 id="groups">Groups</h2><p>{esc(GROUPS)}</p><ul>' + "".join(
            f"<li>share {g.share:.2f}: {esc(', '.join(g.members))} ({esc(', '.join(g.exercises))})</li>"
            for g in result.groups) + "</ul>")
    for n, p in enumerate(pairs):
        a, b = result.learners[p.a], result.learners[p.b]
        out.append(f'<h2 id="pair{n}">{esc(p.a)} and {esc(p.b)}: {p.score:.2f}</h2><table>')
        for item in result.items:
            if p.exercises[item] <= 0 or item not in a.texts or item not in b.texts:
                continue
            mine, theirs, weights = a.texts[item], b.texts[item], result.weights[item]
            out.append(f"<tr><th colspan=2>{esc(item)}: {p.exercises[item]:.2f}</th></tr><tr>"
                       f'<td class="side">{_marked(mine, _shared_units(mine, theirs, weights))}</td>'
                       f'<td class="side">{_marked(theirs, _shared_units(theirs, mine, weights))}</td></tr>')
        out.append("</table>")
    if result.notes:
        out.append("<h2>Notes</h2><ul>" + "".join(f"<li>{esc(n)}</li>" for n in result.notes) + "</ul>")
    return "\n".join(out + ["</body></html>\n"])


def write_html(result: Result, out: str | Path, top: int = 20) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(result, top), encoding="utf-8")
    return out

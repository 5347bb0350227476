"""Every CSV the course writes goes through here: a cell a spreadsheet would read as a formula is
neutralised as OWASP's CSV-injection guidance says (a leading `=`, `+`, `-`, `@`, tab or carriage
return gets a `'` in front). Beyond OWASP's list: a trigger after leading spaces or line breaks (a
spreadsheet may trim them on import) and the full-width forms some spreadsheets read as the ASCII
ones. Numbers stay numbers: a negative score is written as a number, not as text, because it came
from the grader, not from a learner."""
from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path

TRIGGERS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
LEADING = " \n\u00a0\u3000\ufeff"  # what a spreadsheet may drop before it reads the first character


def neutralise(cell):
    """A cell as it is safe to write: numbers and None unchanged, text that a spreadsheet would run
    prefixed with a single quote (the prefix shows in the cell; the formula never runs)."""
    if cell is None or isinstance(cell, (bool, int, float)):
        return cell
    text = str(cell)
    return "'" + text if text.startswith(TRIGGERS) or text.lstrip(LEADING).startswith(TRIGGERS) else text


def write_rows(path: Path, fieldnames: list[str], rows: Iterable[Mapping]) -> None:
    """A CSV with a header, every cell (header included) neutralised."""
    with Path(path).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[neutralise(f) for f in fieldnames], extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({neutralise(k): neutralise(v) for k, v in row.items()})

"""Every CSV the course writes goes through here: a cell a spreadsheet would read as a formula is
neutralised as OWASP's CSV-injection guidance says (a leading `=`, `+`, `-`, `@`, tab or carriage
return gets a `'` in front). Numbers stay numbers: a negative score is
written as a number, not as text, because it came from the grader, not from a learner."""
from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def neutralise(cell):
    """A cell as it is safe to write: numbers and None unchanged, text that a spreadsheet would run
    prefixed with a single quote (the prefix shows in the cell; the formula never runs)."""
    if cell is None or isinstance(cell, (bool, int, float)):
        return cell
    text = str(cell)
    return "'" + text if text.startswith(TRIGGERS) else text


def write_rows(path: Path, fieldnames: list[str], rows: Iterable[Mapping]) -> None:
    """A CSV with a header, every cell (header included) neutralised."""
    with Path(path).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[neutralise(f) for f in fieldnames], extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({neutralise(k): neutralise(v) for k, v in row.items()})

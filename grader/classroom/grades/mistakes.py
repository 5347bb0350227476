"""What the class gets wrong: per chapter, the named mistakes (grader.boundary.diagnosis: "Likely mistake
(from the notebook's own check): ...") the autograded notebooks record, by how many learners made each and
in which exercise, most frequent first, for the class page (grader.classroom.onsubmit.pages)."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from grader.boundary.score import LIKELY_MISTAKE
from grader.chapters import CHAPTERS, LANGUAGES, TEST_PREFIX
from grader.classroom.phrasebook import phrasebook

TOP = 5  # mistakes listed per chapter
_read: dict[Path, tuple[int, list[tuple[str, str]]]] = {}  # notebook -> (mtime, its named mistakes)


def _prefixes() -> tuple[str, ...]:
    """How the likely-mistake line starts in each edition."""
    return tuple(phrasebook(lang).say(LIKELY_MISTAKE, mistake="\0").split("\0")[0].strip()
                 for lang in ("en", *LANGUAGES))


def _likely_mistake(text: str, prefixes: tuple[str, ...]) -> str | None:
    """The mistake a report names: only the first likely-mistake line of an output, the one Result.report writes
    before any check's line (a check's message, which may hold what the learner's code raised, is one line
    there and comes later: grader.boundary.score.one_line)."""
    for line in text.splitlines():
        for prefix in prefixes:
            if line.strip().startswith(prefix):
                return line.strip()[len(prefix):].strip()
    return None


def named_in(notebook: Path) -> list[tuple[str, str]]:
    """(exercise, mistake) for each test cell of an autograded notebook whose report names a mistake; read
    again only when the notebook changed (the class page is drawn often)."""
    stamp = notebook.stat().st_mtime_ns
    if notebook in _read and _read[notebook][0] == stamp:
        return _read[notebook][1]
    found = []
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError):
        cells = []
    prefixes = _prefixes()
    for cell in cells:
        grade_id = str(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", ""))
        if cell.get("cell_type") != "code" or not grade_id.startswith(TEST_PREFIX):
            continue
        for output in cell.get("outputs", []):
            text = output.get("text", "") if output.get("output_type") == "stream" else ""
            said = _likely_mistake(text if isinstance(text, str) else "".join(text), prefixes)
            if said is not None:
                found.append((grade_id.removeprefix(TEST_PREFIX), said))
    _read[notebook] = (stamp, found)
    return found


def class_mistakes(course_dir: str | Path, top: int = TOP) -> dict[str, list[tuple[str, str, int]]]:
    """assignment -> [(exercise, mistake, learners)], the `top` most frequent, from `autograded/`."""
    result = {}
    for chapter in CHAPTERS:
        counts: Counter = Counter()
        for notebook in sorted(Path(course_dir).glob(f"autograded/*/{chapter.assignment}/{chapter.notebook_name}")):
            if notebook.is_symlink() or not notebook.is_file():
                continue
            counts.update(set(named_in(notebook)))  # a learner counts once per mistake
        if counts:
            result[chapter.assignment] = [(ex, said, n) for (ex, said), n in
                                          sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
    return result

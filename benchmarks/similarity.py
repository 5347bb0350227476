"""`grader similarity` on synthetic classes: does every planted copy rank above every independent pair,
and how long does a class of 200 take?

    .venv/bin/python benchmarks/similarity.py [--chapters 02 04] [--learners 200]

benchmarks/similarity_corpus/<chapter>/ holds, per chapter, five answers written independently
(<author>.py: the code cells, `# %% <grade_id>` before each; <author>.md: the written answers, `## <grade_id>`
before each), genuinely different as different people write them, and disguised copies of some of them
(copy-of-<author>.py/.md: names changed, definitions reordered, comments changed, loops made
comprehensions and back, the prose paraphrased). The copies were written by hand, not generated, so
the normaliser is not tested against its own inverse.

1. The ranking: a class of the authors and the copiers; copy pairs are (author, copy-of-author), every
   other pair is independent; printed: whether every copy pair scores above every independent pair,
   and the margin (lowest copy pair minus highest independent pair).
2. The time: a class of N learners, each exercise drawn at random from the authors (and the copies),
   written as nbgrader's submitted/<student>/<assignment>/ notebooks, then `similarity` timed, reading
   included.
"""
from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.chapters import Chapter, find_chapter
from grader.classroom.similarity import _grade_id, similarity

CORPUS = Path(__file__).resolve().parent / "similarity_corpus"
COPY = "copy-of-"


def _sections(text: str, marker: str) -> dict[str, str]:
    parts = re.split(rf"^{re.escape(marker)} (\w+)\s*$", text, flags=re.M)[1:]
    return {name: body.strip("\n") + "\n" for name, body in zip(parts[::2], parts[1::2])}


def corpus(chapter: Chapter) -> dict[str, dict[str, str]]:
    """author (or copy-of-author) -> grade_id -> the cell's source, from the corpus's files."""
    folder = CORPUS / chapter.assignment
    answers: dict[str, dict[str, str]] = {}
    for path in sorted(folder.glob("*.py")) + sorted(folder.glob("*.md")):
        marker = "# %%" if path.suffix == ".py" else "##"
        answers.setdefault(path.stem, {}).update(_sections(path.read_text(encoding="utf-8"), marker))
    return answers


def write_class(root: Path, chapter: Chapter, learners: dict[str, dict[str, str]]) -> None:
    """Each learner's notebook: the course's learner notebook with their answers in its answer cells, as
    nbgrader's submitted/<student>/<assignment>/<notebook>."""
    release = nbformat.read(chapter.course_notebook, as_version=4)
    for name, answers in learners.items():
        nb = nbformat.from_dict(release)
        for cell in nb.cells:
            if _grade_id(cell) in answers:
                cell.source = answers[_grade_id(cell)]
        folder = root / "submitted" / name / chapter.assignment
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / chapter.notebook_name)


def ranking(chapter: Chapter) -> dict:
    """The authors-and-copiers class: lowest copy score, highest independent score, and the pairs."""
    learners = corpus(chapter)
    with tempfile.TemporaryDirectory() as tmp:
        write_class(Path(tmp), chapter, learners)
        result = similarity(tmp, chapter)
    copies = {frozenset((name, name.removeprefix(COPY))) for name in learners if name.startswith(COPY)}
    copied = [p for p in result.pairs if frozenset((p.a, p.b)) in copies]
    independent = [p for p in result.pairs if frozenset((p.a, p.b)) not in copies]
    low, high = min(copied, key=lambda p: p.score), max(independent, key=lambda p: p.score)
    return {"ok": low.score > high.score, "lowest_copy": low, "highest_independent": high,
            "copies": len(copied), "independent": len(independent), "result": result}


def sampled_class(chapter: Chapter, n: int, seed: int = 0) -> dict[str, dict[str, str]]:
    """n learners, each answer drawn from the corpus's authors and copies (seeded)."""
    answers, rng = corpus(chapter), random.Random(seed)
    authors = sorted(answers)
    items = sorted({item for a in answers.values() for item in a})
    return {f"learner{i:03d}": {item: answers[author][item] for item in items
                                for author in [rng.choice([a for a in authors if item in answers[a]])]}
            for i in range(n)}


def timing(chapter: Chapter, n: int) -> tuple[float, float, list]:
    """Wall-clock and CPU seconds of `similarity` on a sampled class of n, and its pairs."""
    with tempfile.TemporaryDirectory() as tmp:
        write_class(Path(tmp), chapter, sampled_class(chapter, n))
        start, cpu = time.perf_counter(), time.process_time()
        result = similarity(tmp, chapter)
        return time.perf_counter() - start, time.process_time() - cpu, result.pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chapters", nargs="+", default=["02", "04"])
    parser.add_argument("--learners", type=int, default=200)
    args = parser.parse_args(argv)
    failed = False
    for chapter in map(find_chapter, args.chapters):
        found = ranking(chapter)
        low, high = found["lowest_copy"], found["highest_independent"]
        failed |= not found["ok"]
        print(f"{chapter.assignment}: {len(found['result'].learners)} learners, {found['copies']} copy pairs, "
              f"{found['independent']} independent pairs; every copy pair above every independent pair: "
              f"{'yes' if found['ok'] else 'NO'}; lowest copy {low.a}/{low.b} {low.score:.3f}, highest "
              f"independent {high.a}/{high.b} {high.score:.3f}, margin {low.score - high.score:+.3f}")
        seconds, cpu, pairs = timing(chapter, args.learners)
        print(f"{chapter.assignment}: {args.learners} learners ({len(pairs)} pairs), reading included: {seconds:.2f} s "
              f"wall clock, {cpu:.2f} s CPU (one process); highest score {pairs[0].score:.3f} (answers drawn from "
              f"{len(corpus(chapter))} writers: many learners hand in the same text, which the weighting discounts)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

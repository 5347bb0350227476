"""`grader similarity` on synthetic classes: does every planted copy rank above every independent pair,
and how long does a class of 200 take?

    .venv/bin/python benchmarks/similarity.py [--chapters 02 04] [--learners 200] [--huge-mb 17]

benchmarks/similarity_corpus/<chapter>/ holds, per chapter, five answers written independently
(<author>.py: the code cells, `# %% <grade_id>` before each; <author>.md: the written answers, `## <grade_id>`
before each), genuinely different as different people write them, and disguised copies of some of them
(copy-of-<author>.py/.md: names changed, definitions reordered, comments changed, loops made
comprehensions and back, the prose paraphrased). The copies were written by hand, not generated, so
the normaliser is not tested against its own inverse.

1. The ranking: a class of the authors and the copiers; copy pairs are (author, copy-of-author), every
   other pair is independent; printed: whether every copy pair scores above every independent pair,
   and the margin (lowest copy pair minus highest independent pair).
2. A group: the same class and GROUP learners more who hand in one author's text word for word (the
   author and they: a group of GROUP + 1, and a disguised copy of the author's, if the corpus has one);
   printed: the group's pair scores, whether it is shown as one group, the highest pair outside it, and
   any other group found.
3. The time: a class of N learners, each exercise drawn at random from the authors (and the copies),
   written as nbgrader's submitted/<student>/<assignment>/ notebooks, then `similarity` timed, reading
   included. With --huge-mb M, one of them hands in an answer cell of M MB of distinct constants (a
   notebook under the 20 MB limit that nobody else shares): the time and the process's peak memory say
   whether one learner can stop the report for the class.
"""
from __future__ import annotations

import argparse
import random
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.chapters import Chapter, find_chapter
from grader.classroom.similarity.pairs import _grade_id, similarity

CORPUS = Path(__file__).resolve().parent / "similarity_corpus"
COPY = "copy-of-"
GROUP, COPIED = 4, "ben"  # four learners hand in ben's text: a group of five


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


def group_class(chapter: Chapter) -> dict:
    """The authors-and-copiers class and GROUP learners who hand in COPIED's text: the group's scores."""
    learners = corpus(chapter)
    learners.update({f"group-{i}": dict(learners[COPIED]) for i in range(1, GROUP + 1)})
    members = {COPIED} | {f"group-{i}" for i in range(1, GROUP + 1)}
    with tempfile.TemporaryDirectory() as tmp:
        write_class(Path(tmp), chapter, learners)
        result = similarity(tmp, chapter)
    inside = [p.score for p in result.pairs if {p.a, p.b} <= members]
    outside = max(p.score for p in result.pairs if not {p.a, p.b} <= members)
    shown = [g for g in result.groups if members <= set(g.members)]  # with a disguised copy of COPIED, if any
    others = [g for g in result.groups if not members <= set(g.members)]
    return {"inside": inside, "outside": outside, "shown": shown, "others": others, "learners": len(learners)}


def sampled_class(chapter: Chapter, n: int, seed: int = 0) -> dict[str, dict[str, str]]:
    """n learners, each answer drawn from the corpus's authors and copies (seeded)."""
    answers, rng = corpus(chapter), random.Random(seed)
    authors = sorted(answers)
    items = sorted({item for a in answers.values() for item in a})
    return {f"learner{i:03d}": {item: answers[author][item] for item in items
                                for author in [rng.choice([a for a in authors if item in answers[a]])]}
            for i in range(n)}


def huge_answer(megabytes: float) -> str:
    """Python code of about `megabytes` MB of distinct constants, long lines (the notebook file is about as
    large): every k-gram a fragment nobody else writes."""
    lines, size, i = [], 0, 0
    while size < megabytes * 1_000_000:
        lines.append(f"x{i} = (" + ", ".join(str(i * 40 + j) for j in range(40)) + ")")
        size += len(lines[-1]) + 1
        i += 1
    return "\n".join(lines)


def timing(chapter: Chapter, n: int, huge_mb: float = 0) -> tuple[float, float, list]:
    """Wall-clock and CPU seconds of `similarity` on a sampled class of n (one learner's answer `huge_mb`
    MB of distinct constants, if given), and its pairs."""
    with tempfile.TemporaryDirectory() as tmp:
        learners = sampled_class(chapter, n)
        if huge_mb:
            first = next(iter(learners.values()))
            first[next(iter(first))] = huge_answer(huge_mb)
        write_class(Path(tmp), chapter, learners)
        start, cpu = time.perf_counter(), time.process_time()
        result = similarity(tmp, chapter)
        return time.perf_counter() - start, time.process_time() - cpu, result.pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chapters", nargs="+", default=["02", "04"])
    parser.add_argument("--learners", type=int, default=200)
    parser.add_argument("--huge-mb", type=float, default=0,
                        help="one learner's answer cell of this many MB of distinct constants")
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
        group = group_class(chapter)
        failed |= not group["shown"] or bool(group["others"])
        print(f"{chapter.assignment}: {group['learners']} learners, {GROUP + 1} of them hand in {COPIED}'s text word "
              f"for word: their {len(group['inside'])} pairs score {min(group['inside']):.3f} to "
              f"{max(group['inside']):.3f}; shown as one group: "
              + (f"yes ({len(group['shown'][0].members)} learners, share {group['shown'][0].share:.2f})"
                 if group["shown"] else "NO")
              + f"; highest pair outside it {group['outside']:.3f}; other groups found: {len(group['others'])}")
        seconds, cpu, pairs = timing(chapter, args.learners, args.huge_mb)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2  # kB -> GB
        huge = f", one of them {args.huge_mb:g} MB of distinct constants" if args.huge_mb else ""
        print(f"{chapter.assignment}: {args.learners} learners{huge} ({len(pairs)} pairs), reading included: "
              f"{seconds:.2f} s wall clock, {cpu:.2f} s CPU (one process), peak memory {peak:.2f} GB; highest score "
              f"{pairs[0].score:.3f} (answers drawn from "
              f"{len(corpus(chapter))} writers: many learners hand in the same text, which the weighting discounts)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

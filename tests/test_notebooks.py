"""Invariant 5 and "a released chapter stands on its own": every chapter folder, copied away from
the repository with the reference answers filled in, runs top to bottom under `pytest --nbval-lax`
in a kernel that has the third-party packages but cannot import `course`, `solutions` or `grader`
(conftest.standalone): whatever the notebook imports comes from its own folder. Where a chapter
trains a model, the result its narrative states is reached. (The hidden tests' full marks on the
reference are checked through nbgrader itself, in test_nbgrader_e2e.py.)"""
import json
import re
import shutil
import subprocess
import sys
import time

import nbformat
import pytest

from course.toolkit import GRADING_ENV
from grader.authoring import samples
from grader.chapters import CHAPTERS

# chapter name -> [(a line the notebook prints, the least value its number may take)]; for LOSSES the most.
# Where training is stochastic, the bound sits below every run of the distribution the chapter states, with
# margin: the runs are in benchmarks/results/ (README there: the commands), made by benchmarks/training_robustness.py.
STATED_RESULTS = {
    "multi_head_attention": [(r"H = 2: [\d,]+ attention parameters, accuracy left neighbour ([\d.]+)%", 99.0)],
    "add_and_norm": [(r"Pre-LN, no warm-up\s+final loss [\d.]+\s+accuracy on \d+ new sequences ([\d.]+)%", 85.0)],
    # 06 trains until 10 fresh batches in a row are all right (at most 1200 steps). The text states: seeds 0-4,
    # each on one thread, on two threads and with tests/learner_style.py, all 15 stopped by themselves (the
    # second line), after 252-409 steps, at >= 99.7% (benchmarks/results/ch06.jsonl).
    "decoder_masking": [(r"exact-match accuracy on \d+ held-out sequences: ([\d.]+)%", 98.0),
                        (r"the last (\d+) batches \(\d+ fresh sequences\) were all right", 10)],
    "bert_pretraining": [(r"held-out masked-token accuracy ([\d.]+)% \(most-frequent-token baseline", 45.0)],
    "gpt_generation": [(r"held-out exact match: ([\d.]+)% of \d+ problems never seen in training", 99.0)],
    # 09 (zero-digit hint, cosine decay, clipping): the text states both models end at 90% or more. Every run
    # did, at >= 99.3%: ablation.json's 2017 and llama rows (seeds 0-4, one thread) and
    # benchmarks/results/ch09.jsonl (seeds 0-4 on two threads and with tests/learner_style.py).
    "llama_modern": [(r"2017-style .* exact match on \d+ held-out problems: ([\d.]+)%", 90.0),
                     (r"LLaMA-style .* exact match on \d+ held-out problems: ([\d.]+)%", 90.0)],
}
# The writer of chapter 08 is worth decoding only well below letter frequencies (about 3.4 nats).
STATED_LOSSES = {
    "gpt_generation": (r"trained \d+ steps in [\d.]+ s; validation loss ([\d.]+) nats per character", 2.3),
}

# Loaded by the inner pytest run: keeps what each cell printed, for STATED_RESULTS, and gives nbval
# more patience for output messages.
RECORDER = '''
import json, os


def pytest_collection_modifyitems(items):
    # nbval waits only 5 s for each output message after a cell finishes; a loaded 2-core CI
    # machine can take longer to deliver a figure, which failed a correct notebook once.
    for item in items:
        if hasattr(item, "output_timeout"):
            item.output_timeout = 60

def pytest_runtest_teardown(item, nextitem):
    outputs = getattr(item, "test_outputs", None) or []
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    with open(os.environ["NBVAL_PRINTED"], "a") as sink:
        sink.write(json.dumps({"cell": item.name, "text": text}) + "\\n")
'''


def filled_release(chapter, root):
    """A copy of the chapter's release folder, its exercise cells holding the reference answers."""
    folder = root / chapter.assignment
    shutil.copytree(chapter.course_dir, folder, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    nbformat.write(samples.reference(chapter), folder / chapter.notebook_name)
    return folder / chapter.notebook_name


def printed_number(text: str, pattern: str) -> tuple[float, str]:
    found = re.search(pattern, text)
    assert found, f"the notebook did not print a line matching {pattern!r}"
    print(found.group(0))
    return float(found.group(1)), found.group(0)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.assignment for c in CHAPTERS])
def test_chapter_runs_with_solutions(chapter, standalone, tmp_path):
    run_edition(chapter, standalone, tmp_path)


def run_edition(chapter, standalone, tmp_path):
    """Runs one edition of a chapter with the reference answers; checks the English run's stated results."""
    notebook = filled_release(chapter, tmp_path)
    (tmp_path / "conftest.py").write_text(RECORDER)
    printed = tmp_path / "printed.jsonl"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
               "--nbval-kernel-name", standalone.kernel, "--nbval-cell-timeout", "600", str(notebook)]
    start = time.perf_counter()
    env = dict(standalone.env, NBVAL_PRINTED=str(printed))
    if chapter.lang != "en":  # its trainings shortened, as in grading: their results are read from the English run
        env[GRADING_ENV] = "1"
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, f"{' '.join(command)}\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    text = "".join(json.loads(line)["text"] for line in printed.read_text().splitlines())
    if chapter.lang == "en" and chapter.name in STATED_RESULTS:
        for pattern, least in STATED_RESULTS[chapter.name]:
            value, line = printed_number(text, pattern)
            assert value >= least, line
    if chapter.lang == "en" and chapter.name in STATED_LOSSES:
        pattern, most = STATED_LOSSES[chapter.name]
        value, line = printed_number(text, pattern)
        assert value <= most, line
    print(f"{chapter.assignment}: {proc.stdout.strip().splitlines()[-1]} ({seconds:.1f} s with kernel start)")

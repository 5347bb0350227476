"""`make site` from nothing (issue 47), printed, not asserted: the whole build's wall and CPU seconds, the
reference runs' share of it, and where each reference run spends its time (its slowest cells, from the
timings nbclient keeps in the executed notebook's metadata), and the translation's runs' cells against
the English runs', side by side in one build (grader.website.share puts the English trainings in place in
the translation's runs).

    .venv/bin/python benchmarks/website.py            # removes site/ (the cached runs too), then builds it
    .venv/bin/python benchmarks/website.py --warm     # keeps site/_cache/: a rebuild with nothing changed
    .venv/bin/python benchmarks/website.py --profile  # builds nothing: the profile of the cached runs

The CPU seconds are this process's reaped children (the build, its workers, their kernels and the two
sphinx-builds): on a shared machine they say more than the wall clock does.
"""
from __future__ import annotations

import argparse
import re
import resource
import shutil
import subprocess
import sys
import time
from datetime import datetime

import nbformat

from grader.chapters import REPO
from grader.website import execute

SITE = REPO / "site"
TOP_CELLS = 3


def cell_seconds(cell) -> float:
    """The kernel's time for one cell: from its execute_input to its execute_reply."""
    timing = cell.get("metadata", {}).get("execution", {})
    try:
        start = datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return 0.0
    return (end - start).total_seconds()


def profile_runs() -> None:
    """Per cached reference run: its cells' total and its slowest cells."""
    print(f"\n{'reference run':<26} {'cells (s)':>9}  slowest cells (s, first line)")
    everything, slowest, editions = 0.0, 0.0, {}
    for path in sorted(execute.CACHE.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        timed = sorted(((cell_seconds(c), c.source.strip().split("\n")[0][:60]) for c in nb.cells
                        if c.cell_type == "code"), reverse=True)
        name = "-".join(path.stem.split("-")[:2])
        total = sum(seconds for seconds, _ in timed)
        everything, slowest = everything + total, slowest + sum(seconds for seconds, _ in timed[:TOP_CELLS])
        editions[name.split("-")[0]] = editions.get(name.split("-")[0], 0.0) + total
        print(f"{name:<26} {total:>9.1f}  " + "; ".join(f"{s:.1f} {line!r}" for s, line in timed[:TOP_CELLS]))
    print(f"all runs' cells: {everything:.0f} s, of which each run's {TOP_CELLS} slowest: {slowest:.0f} s")
    # Side by side in one build, so the machine's load counts alike: what the share saves the translation.
    for lang, total in editions.items():
        if lang != "en" and editions.get("en"):
            print(f"{lang} runs' cells: {total:.0f} s, {100 * total / editions['en']:.0f}% of the English runs' "
                  f"{editions['en']:.0f} s (grader.website.share: their trainings come from the English runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--warm", action="store_true", help="keep site/_cache/ (the reference runs)")
    parser.add_argument("--profile", action="store_true", help="build nothing: profile the cached runs")
    args = parser.parse_args()
    if args.profile:
        return profile_runs()
    if args.warm:
        shutil.rmtree(SITE / "_build", ignore_errors=True)
    else:
        shutil.rmtree(SITE, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "grader.website"], cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"the build failed:\n{done.stdout}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    load = open("/proc/loadavg").read().split()[:3] if sys.platform == "linux" else ["?"]
    runs = re.search(r"reference runs: (\d+) s", done.stdout)
    print(f"make site ({'warm' if args.warm else 'from nothing'}): {wall:.0f} s wall, {cpu:.0f} CPU-s "
          f"(load average {' '.join(load)} at the end)")
    print(f"  reference runs: {runs.group(1) if runs else 0} s wall; the rest (pages, two sphinx-builds): "
          f"{wall - (int(runs.group(1)) if runs else 0):.0f} s")
    for line in done.stdout.splitlines():
        if line.startswith("  ran "):
            print(line)
    profile_runs()


if __name__ == "__main__":
    main()

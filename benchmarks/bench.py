"""Figures the issues ask for, printed (not asserted): notebook run time and `grader grade` time.

    .venv/bin/python benchmarks/bench.py            # every chapter
    .venv/bin/python benchmarks/bench.py 02         # one chapter
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from grader.authoring import samples
from grader.authoring.execute import execute_source
from grader.chapters import CHAPTERS, find_chapter


def main(keys: list[str]) -> None:
    chapters = [find_chapter(k) for k in keys] or CHAPTERS
    print(f"{os.cpu_count()} CPU cores, python {sys.version.split()[0]}")
    print(f"{'chapter':<26} {'notebook run (s)':>17} {'grader grade (s)':>17}")
    for chapter in chapters:
        _, run_seconds = execute_source(chapter)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / chapter.notebook_name
            nbformat.write(samples.reference(chapter), path)
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "grader", "grade", str(path)], check=True,
                           capture_output=True)
            grade_seconds = time.perf_counter() - start
        print(f"{chapter.assignment:<26} {run_seconds:>17.1f} {grade_seconds:>17.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

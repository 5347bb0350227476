"""Every chapter's notebook, answered with the reference solutions, run on a GPU: do the training cells pick
CUDA, and does everything run there (no tensor left on the CPU beside a model on the GPU)?

Two steps, since the GPU machine has PyTorch but not the course's environment (nbgrader, Jupyter):

    .venv/bin/python benchmarks/on_gpu.py export .gpu     # here: each chapter's reference as a script
    python3 benchmarks/on_gpu.py run .gpu                  # there: run each in its learner folder, print figures

`run` prints, per chapter, the wall time, the device the notebook chose, the peak CUDA memory and the exit
status; it exits 1 if any chapter failed or did not use CUDA. It also runs on a CPU-only machine (then every
chapter says `cpu` and the run fails, as it should: there is nothing to check there).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Appended to each script: what the notebook chose and what CUDA held at its peak.
REPORT = """
import torch as _torch
_peak = _torch.cuda.max_memory_allocated() / 2**20 if _torch.cuda.is_available() else 0.0
print(f"GPU-CHECK device={globals().get('device', 'none')} cuda_peak_mib={_peak:.1f}")
"""


def export(folder: Path) -> None:
    """Each chapter's reference notebook (its code cells, in order) as `folder`/NN_name.py."""
    sys.path.insert(0, str(REPO))
    from grader.authoring import samples
    from grader.chapters import CHAPTERS

    folder.mkdir(parents=True, exist_ok=True)
    for chapter in CHAPTERS:
        cells = [c.source for c in samples.reference(chapter).cells if c.cell_type == "code"]
        script = "\n\n".join(cells) + "\n" + REPORT
        (folder / f"{chapter.number}_{chapter.name}.py").write_text(script)
        print(f"{chapter.number} {chapter.name}: {len(cells)} code cells")


def run(folder: Path, timeout: float) -> int:
    """Each exported script in its chapter's learner folder (course/NN_name: its data and its copy of the
    course package); one line of figures per chapter."""
    failed = 0
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1", TQDM_DISABLE="1")
    print(f"{'chapter':28} {'seconds':>8} {'device':>7} {'peak MiB':>9}  status")
    for script in sorted(folder.glob("[0-9][0-9]_*.py")):
        chapter_dir = REPO / "course" / script.stem
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, str(script.resolve())], cwd=chapter_dir,
                                  env=dict(env, PYTHONPATH=str(chapter_dir)),  # its own copy, as the notebook finds it
                                  capture_output=True, text=True, timeout=timeout)
            output, status = done.stdout + done.stderr, "ok" if done.returncode == 0 else f"exit {done.returncode}"
        except subprocess.TimeoutExpired as err:
            output = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
            status = f"past {timeout:.0f} s"
        seconds = time.perf_counter() - start
        line = next((row for row in output.splitlines() if row.startswith("GPU-CHECK ")), "")
        fields = dict(part.split("=", 1) for part in line.split()[1:])
        device, peak = fields.get("device", "?"), fields.get("cuda_peak_mib", "?")
        if device == "none" and status == "ok":
            status = "ok (chooses no device: nothing to train)"
        elif status != "ok" or not device.startswith("cuda") or peak in ("?", "0.0"):
            failed += 1
            tail = "\n    ".join(output.strip().splitlines()[-8:])
            status += f"\n    {tail}" if status != "ok" else " (no CUDA used)"
        print(f"{script.stem:28} {seconds:8.1f} {device:>7} {peak:>9}  {status}", flush=True)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["export", "run"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per chapter (run)")
    args = parser.parse_args()
    if args.step == "export":
        export(args.folder)
        return 0
    return run(args.folder, args.timeout)


if __name__ == "__main__":
    sys.exit(main())

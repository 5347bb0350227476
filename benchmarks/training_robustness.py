"""Do the training results chapters 06 and 09 state hold on another machine? What differs between
machines is the order in which floats are added up: the number of threads, PyTorch's vectorised
kernels (AVX2 here, AVX-512 on many Intel CPUs), MKL's code path, and a learner's own (equal, but
differently ordered) code. This script trains each chapter's own training cell, read from the released
notebook, under every combination of those it can make on one machine, and prints one row per run:

    nice -n 15 .venv/bin/python benchmarks/training_robustness.py --seeds 5 --out /tmp/robust.jsonl
    .venv/bin/python benchmarks/training_robustness.py one --chapter 06 --seed 3 --threads 2 --impl learner
    .venv/bin/python benchmarks/training_robustness.py table benchmarks/results/ch06.jsonl  # a Markdown table

Perturbations (each run is a fresh process, since the environment variables act at start-up):
    threads     torch.set_num_threads in the training cell: 1 (as the chapters) or 2
    capability  native (no setting), ATEN_CPU_CAPABILITY=default (no vectorised kernels) or avx2
    mkl         MKL_ENABLE_INSTRUCTIONS=SSE4_2 with MKL_CBWR=COMPATIBLE, or MKL's default path
    impl        reference (solutions/) or learner (tests/learner_style.py: same mathematics, other order)
    seed        the torch.manual_seed(...) of the training cell
(env "passive" sets OMP_WAIT_POLICY=PASSIVE: it changes no sum, only how idle threads wait.)
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import io
import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CHAPTERS = {  # chapter -> (released notebook, a name its training cell defines, the line of its result)
    "06": ("06_decoder_masking/decoder_masking.ipynb", "SMOOTHING",
           r"exact-match accuracy on \d+ held-out sequences: ([\d.]+)%"),
    "09": ("09_llama_modern/llama_modern.ipynb", "model_llama",
           r"LLaMA-style .* exact match on \d+ held-out problems: ([\d.]+)%"),
}
ENVIRONMENTS = {
    "native": {},  # what this machine picks
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},  # idle threads sleep: same sums, less waste on a loaded CPU
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "default": {"ATEN_CPU_CAPABILITY": "default"},
    "avx2+mkl-sse4": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "MKL_CBWR": "COMPATIBLE"},
    "default+mkl-sse4": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                         "MKL_CBWR": "COMPATIBLE"},
}


class _Perturb(ast.NodeTransformer):
    """torch.manual_seed(x) -> torch.manual_seed(seed); torch.set_num_threads(1) -> (threads)."""

    def __init__(self, seed: int, threads: int):
        self.values = {"manual_seed": seed, "set_num_threads": threads}

    def visit_Call(self, node):
        self.generic_visit(node)
        name = getattr(node.func, "attr", None)
        if name in self.values and node.args and isinstance(node.args[0], ast.Constant):
            node.args = [ast.Constant(self.values[name])]
        return node


def training_cell(chapter: str, seed: int, threads: int, root: Path) -> tuple[str, str]:
    """The chapter's import cell and its training cell, the latter with the seed and threads put in."""
    path, defines, _ = CHAPTERS[chapter]
    code = [c.source for c in nbformat.read(root / path, as_version=4).cells if c.cell_type == "code"]
    cell = next(src for src in code if re.search(rf"\b{defines}\b\s*[=(,]", src) and "train" in src)
    tree = _Perturb(seed, threads).visit(ast.parse(cell))
    return code[0], ast.unparse(ast.fix_missing_locations(tree))


def run_one(chapter: str, seed: int, threads: int, impl: str, root: Path = REPO / "course") -> dict:
    imports, cell = training_cell(chapter, seed, threads, root)
    import solutions.decoder_masking as ch06
    import solutions.llama_modern as ch09
    namespace: dict = {}
    exec(imports, namespace)
    namespace.update({k: v for module in (ch06, ch09) for k, v in vars(module).items() if not k.startswith("_")})
    namespace["device"] = torch.device("cpu")
    stack = contextlib.ExitStack()
    if impl == "learner":
        from tests import learner_style
        stack.enter_context(learner_style.patched())
    out = io.StringIO()
    start = time.perf_counter()
    with stack, contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        exec(cell, namespace)
    printed = out.getvalue()
    found = re.search(CHAPTERS[chapter][2], printed)
    return {"chapter": chapter, "seed": seed, "threads": threads, "impl": impl,
            "capability": torch.backends.cpu.get_cpu_capability(),
            "mkl": os.environ.get("MKL_ENABLE_INSTRUCTIONS", "auto"),
            "result": float(found.group(1)) if found else None, **_details(chapter, printed),
            "seconds": round(time.perf_counter() - start, 1), "printed": printed[-600:]}


def _details(chapter: str, printed: str) -> dict:
    """06: the steps trained; 09: each model's exact match and the step it first reached 90%."""
    if chapter == "06":
        found = re.search(r"trained (\d+) steps in ([\d.]+) s", printed)
        return {"steps": int(found.group(1)), "train_seconds": float(found.group(2))} if found else {}
    rows = re.findall(r"^(\S+-style) .*final loss ([\d.]+), 90% first reached at step (\w+), "
                      r"exact match on \d+ held-out problems: ([\d.]+)%", printed, re.M)
    return {"models": {name: {"final_loss": float(loss), "step_90": None if step == "None" else int(step),
                              "exact_match": float(match)} for name, loss, step, match in rows}}


def table(rows: list[dict]) -> None:
    """One Markdown row per run, then each chapter's range over every run."""
    print("| chapter | seed | threads | impl | capability | env | steps | exact match % | seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        models = r.get("models") or {}
        steps = r.get("steps") or " / ".join(f"90% at {m['step_90']}" for m in models.values())
        result = " / ".join(f"{name} {m['exact_match']}" for name, m in models.items()) or r["result"]
        print(f"| {r['chapter']} | {r['seed']} | {r['threads']} | {r['impl']} | {r['capability']} | "
              f"{r.get('env', '')} | {steps} | {result} | {r['seconds']} |")
    for chapter in sorted({r["chapter"] for r in rows}):
        mine = [r for r in rows if r["chapter"] == chapter]
        results = [m["exact_match"] for r in mine
                   for m in (r.get("models") or {"": {"exact_match": r["result"]}}).values()]
        steps = [r["steps"] for r in mine if r.get("steps")]
        print(f"\n{chapter}: {len(mine)} runs, exact match {min(results)}-{max(results)}%"
              + (f", {min(steps)}-{max(steps)} steps" if steps else "")
              + f", {min(r['seconds'] for r in mine)}-{max(r['seconds'] for r in mine)} s each")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="grid", choices=("grid", "one", "table"))
    parser.add_argument("files", nargs="*", type=Path, help="table: the JSON-lines files to summarise")
    parser.add_argument("--chapter", default="06,09")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", default="5", help="grid: N for seeds 0 .. N-1, or a list: 1,3,4 (one seed: 3,)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--impl", default="reference,learner")
    parser.add_argument("--env", default=",".join(ENVIRONMENTS))
    parser.add_argument("--root", type=Path, default=REPO / "course",
                        help="the folder of the chapters' notebooks (default: the release, course/; "
                             "grader/source has the same training cells)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/training_robustness.jsonl"))
    args = parser.parse_args(argv)
    if args.mode == "one":
        print(json.dumps(run_one(args.chapter, args.seed, int(args.threads), args.impl, args.root)), flush=True)
        os._exit(0)  # skip the interpreter's teardown: on a loaded machine it took minutes
    if args.mode == "table":
        return table([json.loads(line) for path in args.files for line in path.read_text().splitlines()])
    seeds = [int(s) for s in args.seeds.split(",") if s] if "," in args.seeds else range(int(args.seeds))
    grid = itertools.product(args.chapter.split(","), seeds, args.env.split(","),
                             [int(t) for t in args.threads.split(",")], args.impl.split(","))
    for chapter, seed, env, threads, impl in grid:
        command = [sys.executable, __file__, "one", "--chapter", chapter, "--seed", str(seed),
                   "--threads", str(threads), "--impl", impl, "--root", str(args.root)]
        proc = subprocess.run(command, env={**os.environ, **ENVIRONMENTS[env]}, capture_output=True, text=True,
                              cwd=REPO)
        if proc.returncode:
            raise SystemExit(proc.stderr[-3000:])
        row = json.loads(proc.stdout.splitlines()[-1]) | {"env": env}
        with args.out.open("a") as sink:
            sink.write(json.dumps(row) + "\n")
        print(f"{chapter} seed {seed} {env:<17} {threads} thread(s) {impl:<9} -> {row['result']}% "
              f"({row['seconds']} s)", flush=True)


if __name__ == "__main__":
    main()

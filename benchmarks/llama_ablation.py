"""One-at-a-time ablation of chapter 09's section 8: which of the six differences between the 2017-style
and the LLaMA-style decoder changes how fast (and whether) a model learns the addition task.

    nice -n 5 .venv/bin/python benchmarks/llama_ablation.py --workers 4      # 5 seeds, the chapter's steps
    .venv/bin/python benchmarks/llama_ablation.py --seeds 1 --steps 1 --variants llama --out /tmp/a.json
    .venv/bin/python benchmarks/llama_ablation.py --variants norm+ffn,2017 --out /tmp/pairs.json  # two at once

Every run trains what section 8 trains, with its data, batch, learning rate, warm-up and evaluation
(`kit.train_addition`; held-out exact match on the 1000 held-out problems every 50 steps: after the last step,
and the first step at which it reached 90%): the two builders `model_2017` and `model_llama`, the sizes and
the task are read from the chapter's notebook cell itself, so this script cannot drift from it. Besides the
two endpoints it trains the LLaMA-style model with ONE of the six differences reverted to its 2017 form, the
2017 piece taken from a 2017-style model built by the chapter's own `model_2017`:

    positions   sinusoids added to the input (the 2017 PositionalEncoding), RoPE off (cos = 1, sin = 0)
    norm        LayerNorm (mean, shift, eps 1e-5) instead of RMSNorm, in both blocks and at the end
    kv_heads    4 key/value heads (one per query head) instead of 2
    ffn         the ReLU feed-forward block of 4D instead of SwiGLU of 8D/3 (its biases removed)
    biases      biases on every linear layer of the blocks, initialised as nn.Linear's
    embedding   the 2017 TokenEmbedding (x sqrt(D), std D^-1/2) instead of nn.Embedding (std 1)

All six reverted together give a model that computes exactly what the 2017-style model computes
(tests/test_ablation.py checks it with shared weights): these are all the differences there are. A seed s is
`torch.manual_seed(s)` before a model is built; the data stream and held-out problems are the chapter's
(AdditionTask seed 0) for every run. Seed 0 gives the chapter's own two runs on this machine with this code,
but not on another CPU or with a learner's equal code (the chapter says so and compares a learner's run with
the distribution over seeds instead). One torch thread per run, as in the chapter; --workers trains several
runs at once, each in its own process. Prints one line per run and a table; writes every run's result as JSON
(rewritten after each run, so a long run can be watched; --resume continues it, and adds seeds to it, without
training again what it holds).
"""
from __future__ import annotations

import argparse
import ast
import concurrent.futures
import datetime
import json
import platform
import resource
import shlex
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import torch
import torch.nn as nn

from solutions.llama_modern import GroupedQueryAttention, LlamaBlock, RMSNorm

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "course" / "09_llama_modern" / "llama_modern.ipynb"  # the release, as a learner runs it
OUT = REPO / "chapters" / "09_llama_modern" / "ablation.json"  # authored data: `grader build` carries it on
BUILDERS = ("model_2017", "model_llama")


def chapter_setup(notebook: Path = NOTEBOOK) -> SimpleNamespace:
    """Section 8's configuration, taken from the notebook: the constants and the two builders of the
    cell that defines model_2017 and model_llama, its AdditionTask(...) call, and the names the
    chapter's import cell brings (the exercises from the reference, as a learner's would be)."""
    nb = nbformat.read(notebook, as_version=4)
    code = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    namespace: dict = {"RMSNorm": RMSNorm, "LlamaBlock": LlamaBlock}
    imports = [node for node in ast.parse(code[0]).body if isinstance(node, (ast.Import, ast.ImportFrom))]
    exec(compile(ast.Module(imports, type_ignores=[]), str(notebook), "exec"), namespace)
    cell = next((src for src in code if all(f"def {name}(" in src for name in BUILDERS)), None)
    if cell is None:
        raise ValueError(f"no code cell of {notebook} defines {' and '.join(BUILDERS)}")
    tree = ast.parse(cell)
    kept = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in BUILDERS:
            kept.append(node)
        elif isinstance(node, ast.Assign):
            try:
                ast.literal_eval(node.value)  # constants only: D, H, LAYERS = 32, 4, 2 and the like
            except ValueError:
                continue
            kept.append(node)
    exec(compile(ast.Module(kept, type_ignores=[]), str(notebook), "exec"), namespace)
    (task_call,) = {ast.unparse(node) for node in ast.walk(tree)
                    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "AdditionTask"}
    return SimpleNamespace(**{k: namespace[k] for k in ("D", "H", "STEPS", "BATCH", "LR", *BUILDERS)},
                           kit=namespace["kit"], task_call=task_call,
                           make_task=lambda: eval(task_call, namespace))


# ---------------------------------------------------------------- the six reverts


def _blocks(model, ref):
    return zip(model.blocks, ref.blocks)


def revert_kv_heads(model, ref, c):
    for block, _ in _blocks(model, ref):
        block.attn = GroupedQueryAttention(c.D, c.H, c.H, block.attn.cos.shape[0])  # Hkv = H: multi-head


def revert_ffn(model, ref, c):
    for block, old in _blocks(model, ref):
        block.ffn = old.ffn  # PositionwiseFeedForward(D, 4D), ReLU
        block.ffn.linear1.bias = block.ffn.linear2.bias = None  # biases are a difference of their own


def revert_biases(model, ref, c):
    for block, _ in _blocks(model, ref):
        for linear in block.modules():
            if isinstance(linear, nn.Linear) and linear.bias is None:
                linear.bias = nn.Linear(linear.in_features, linear.out_features).bias  # nn.Linear's own init


def revert_norm(model, ref, c):
    for block, old in _blocks(model, ref):
        block.attn_norm, block.ffn_norm = old.norm1, old.norm2  # LayerNorm(D)
    model.norm = ref.norm


def revert_positions(model, ref, c):
    model.positions = ref.positions  # PositionalEncoding(D, max_len), added to the input
    for block in model.blocks:
        block.attn.cos.fill_(1.0)  # a rotation by angle 0: apply_rope hands q and k back unchanged
        block.attn.sin.zero_()


def revert_embedding(model, ref, c):
    model.embedding = ref.embedding  # TokenEmbedding: x sqrt(D), initialised with std D^-1/2


# key -> (label, the 2017 form it puts back, revert); applied in this order when combined (the
# attention and the feed-forward block are replaced before biases are added and RoPE is switched off).
REVERTS = {
    "kv_heads": ("4 kv heads", "one key/value head per query head (4) instead of 2", revert_kv_heads),
    "ffn": ("ReLU 4D", "the ReLU feed-forward block of 4D instead of SwiGLU of 8D/3", revert_ffn),
    "biases": ("biases", "biases in every linear layer of the blocks", revert_biases),
    "norm": ("LayerNorm", "LayerNorm instead of RMSNorm", revert_norm),
    "positions": ("sinusoids", "sinusoids added to the input instead of RoPE", revert_positions),
    "embedding": ("2017 embedding", "the embedding scaled by sqrt(D), std D^-1/2, instead of std 1",
                  revert_embedding),
}


def build(variant: str, c: SimpleNamespace, task, seed: int) -> nn.Module:
    """The model of one variant: '2017', 'llama', or 'llama' with the REVERTS keys in `variant`
    (joined by '+') put back to their 2017 form."""
    torch.manual_seed(seed)
    if variant == "2017":
        return c.model_2017(task.vocab_size, task.block_size)
    model = c.model_llama(task.vocab_size, task.block_size)
    if variant == "llama":
        return model
    ref = c.model_2017(task.vocab_size, task.block_size)  # the 2017 pieces to put back
    keys = variant.split("+")
    unknown = set(keys) - set(REVERTS)
    if unknown:
        raise ValueError(f"unknown variant part(s) {sorted(unknown)}; choose from {list(REVERTS)}")
    for key, (_, _, revert) in REVERTS.items():
        if key in keys:
            revert(model, ref, c)
    return model


def label(variant: str) -> str:
    """The table's name of a variant: 'LLaMA, LayerNorm' or, for two reverts, 'LLaMA, LayerNorm + ReLU 4D'."""
    if variant in ("2017", "llama"):
        return {"2017": "2017-style", "llama": "LLaMA-style"}[variant]
    return "LLaMA, " + " + ".join(REVERTS[key][0] for key in variant.split("+"))


def variants() -> dict[str, str]:
    """key -> label, in the order of the table: the two endpoints and the six single reverts."""
    return {key: label(key) for key in ("2017", "llama", *REVERTS)}


# ---------------------------------------------------------------- running and reporting


def train_one(variant: str, seed: int, steps: int, notebook: Path = NOTEBOOK) -> dict:
    """Train one variant with one seed on one thread, as section 8 trains; the result as ablation.json keeps it."""
    c = chapter_setup(notebook)
    torch.set_num_threads(1)
    task = c.make_task()
    model = build(variant, c, task, seed)
    run = c.kit.train_addition(model, task, steps, c.BATCH, c.LR, torch.device("cpu"), desc=f"{variant} seed {seed}")
    return {"variant": variant, "seed": seed, "exact_match": round(run["exact_match"][-1], 2),
            "reached_90_at": c.kit.first_step_reaching(run, 90.0),
            "curve": [[s, round(e, 2)] for s, e in zip(run["eval_steps"], run["exact_match"])],
            "final_loss": round(sum(run["losses"][-20:]) / len(run["losses"][-20:]), 4),
            "parameters": c.kit.count_parameters(model), "seconds": round(run["seconds"], 2)}


def _children_cpu() -> float:
    """CPU seconds of the finished worker processes (time.process_time counts this process only)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        names = [ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                 if ln.startswith("model name")]
        cpu, cores = (names[0], len(names)) if names else (cpu, None)
    except OSError:
        cores = None
    return {"cpu": cpu, "cores": cores or torch.get_num_threads(), "system": platform.platform()}


def table(record: dict) -> str:
    rows = [f"{'variant':<30} {'seeds':>5} {'>= 90%':>6} {'median %':>8} {'min %':>6} {'90% at step: median':>19} "
            f"{'max':>5} {'params':>7} {'s/run':>6}"]
    for key in record["variants"]:
        runs = [r for r in record["runs"] if r["variant"] == key]
        if not runs:
            continue
        acc = [r["exact_match"] for r in runs]
        steps = [r["reached_90_at"] or record["steps"] + 1 for r in runs]  # never: after the last step
        rows.append(f"{label(key):<30} {len(runs):>5} {sum(a >= 90 for a in acc):>6} {statistics.median(acc):>8.1f} "
                    f"{min(acc):>6.1f} {statistics.median(steps):>19.0f} {max(steps):>5} {runs[0]['parameters']:>7,} "
                    f"{statistics.mean(r['seconds'] for r in runs):>6.1f}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="variants: " + ", ".join(f"{k} ({v})" for k, v in variants().items()))
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0 .. N-1 (default 5)")
    parser.add_argument("--steps", type=int, help="training steps (default: the chapter's STEPS)")
    parser.add_argument("--variants", default=",".join(variants()),
                        help="comma-separated, of the keys below; a '+' joins reverts, e.g. norm+ffn "
                             "(default: the two endpoints and the six single reverts)")
    parser.add_argument("--out", type=Path, default=OUT, help="the JSON file (default: the chapter's ablation.json)")
    parser.add_argument("--notebook", type=Path, default=NOTEBOOK,
                        help="the chapter's notebook (default: the release, course/09_llama_modern)")
    parser.add_argument("--workers", type=int, default=1,
                        help="train this many runs at once, each in its own process on one thread (default 1)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the runs that --out already holds from the same configuration and train only "
                             "the missing ones (one thread on the same torch gives the same numbers again)")
    args = parser.parse_args(argv)
    c = chapter_setup(args.notebook)
    args.steps = args.steps or c.STEPS
    chosen = [v for v in args.variants.split(",") if v]
    for v in chosen:
        if v not in ("2017", "llama"):
            build(v, c, c.make_task(), 0)  # an unknown key fails now, not after an hour
    argv_used = sys.argv[1:] if argv is None else argv
    record = {
        "command": shlex.join([".venv/bin/python", "benchmarks/llama_ablation.py", *argv_used]),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "torch": torch.__version__, "python": platform.python_version(), "machine": machine(), "threads": 1,
        "steps": args.steps, "batch": c.BATCH, "lr": c.LR, "d_model": c.D, "task": c.task_call,
        "seeds": list(range(args.seeds)),
        "metric": "held-out exact match (%) after the last step; reached_90_at: the first evaluated step at which "
                  "it was >= 90% (null: never)",
        "variants": {v: label(v) for v in chosen}, "eval_every": 50,
        "runs": [], "wall_s": 0.0, "cpu_s": 0.0, "sessions": [],
    }
    done = {}
    if args.resume and args.out.exists():
        earlier = json.loads(args.out.read_text())
        same = ("steps", "batch", "lr", "d_model", "task", "torch", "threads", "eval_every")
        if any(earlier.get(k) != record[k] for k in same):
            parser.error(f"{args.out} was written with another configuration ({', '.join(same)}); drop --resume")
        done = {(r["variant"], r["seed"]): r for r in earlier["runs"]
                if r["variant"] in chosen and r["seed"] in record["seeds"]}
        record["sessions"] = earlier.get("sessions") or [
            {k: earlier[k] for k in ("command", "date", "wall_s", "cpu_s")} | {"runs": len(earlier["runs"])}]
        record["wall_s"] = sum(s["wall_s"] for s in record["sessions"])
        record["cpu_s"] = sum(s["cpu_s"] for s in record["sessions"])
    session = {"command": record["command"], "date": record["date"], "wall_s": 0.0, "cpu_s": 0.0, "runs": 0}
    record["sessions"].append(session)
    before_wall, before_cpu = record["wall_s"], record["cpu_s"]
    print(f"{record['machine']['cpu']}, torch {record['torch']}, 1 thread; {args.steps} steps, batch {c.BATCH}, "
          f"lr {c.LR}, seeds 0..{args.seeds - 1}, task {c.task_call}", flush=True)
    threads = torch.get_num_threads()
    wall, cpu = time.perf_counter(), time.process_time()
    total = len(chosen) * args.seeds
    # seed-major: a stopped run still has every variant at the first seeds
    todo = [(v, seed) for seed in range(args.seeds) for v in chosen]
    results = {key: done[key] for key in todo if key in done}
    record["runs"] = [results[key] for key in todo if key in results]
    pool = concurrent.futures.ProcessPoolExecutor(args.workers) if args.workers > 1 else None
    try:
        if pool is None:
            finished = (train_one(v, seed, args.steps, args.notebook) for v, seed in todo if (v, seed) not in done)
        else:
            futures = [pool.submit(train_one, v, seed, args.steps, args.notebook)
                       for v, seed in todo if (v, seed) not in done]
            finished = (f.result() for f in concurrent.futures.as_completed(futures))
        for result in finished:
            results[result["variant"], result["seed"]] = result
            record["runs"] = [results[key] for key in todo if key in results]
            session["runs"] += 1
            session["wall_s"] = round(time.perf_counter() - wall, 1)
            session["cpu_s"] = round(time.process_time() - cpu + _children_cpu(), 1)
            record["wall_s"] = round(before_wall + session["wall_s"], 1)
            record["cpu_s"] = round(before_cpu + session["cpu_s"], 1)
            args.out.write_text(json.dumps(record, indent=1) + "\n")
            print(f"[{len(record['runs']):>3}/{total}] {record['variants'][result['variant']]:<30} seed "
                  f"{result['seed']}: exact match {result['exact_match']:5.1f}%, 90% at step "
                  f"{result['reached_90_at']}, final loss {result['final_loss']:.3f}, {result['seconds']:.1f} s",
                  flush=True)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)  # the workers exit, and their CPU time is counted now
            session["cpu_s"] = round(time.process_time() - cpu + _children_cpu(), 1)
            record["cpu_s"] = round(before_cpu + session["cpu_s"], 1)
        torch.set_num_threads(threads)
    args.out.write_text(json.dumps(record, indent=1) + "\n")  # also when --resume found every run done
    print(table(record))
    print(f"trained {session['runs']} runs in wall {session['wall_s']:.0f} s, CPU {session['cpu_s']:.0f} s "
          f"(all {len(record['runs'])} runs: wall {record['wall_s']:.0f} s, CPU {record['cpu_s']:.0f} s); "
          f"written to {args.out}")
    return record


if __name__ == "__main__":
    main()

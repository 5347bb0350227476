"""KV-cache timing, printed (not asserted): the reference GPT and generate write 256 new tokens with and
without the cache, with the same generator; the tokens must be identical.

    .venv/bin/python benchmarks/kv_cache.py            # the default sizes
    .venv/bin/python benchmarks/kv_cache.py --threads 2

A model only shows the gain when recomputing the prefix costs more than the fixed per-step overhead:
the rows go from the notebook's timing model (D = 192, 4 blocks) to a GPT-2-small-shaped block stack.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from solutions.gpt_generation import GPT, generate

SIZES = [(192, 4, 4), (384, 6, 6), (768, 4, 12)]  # (d_model, n_layer, n_head)


def timed(model, prompt, new_tokens, use_cache):
    start = time.perf_counter()
    out = generate(model, prompt, new_tokens, generator=torch.Generator().manual_seed(0), use_cache=use_cache)
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{os.cpu_count()} CPU cores, {args.threads} torch thread(s), python {sys.version.split()[0]}, "
          f"torch {torch.__version__}")
    print(f"{args.new_tokens} new tokens after a prompt of {args.prompt}, sampling at temperature 1, vocabulary 100")
    print(f"{'d_model':>7} {'layers':>6} {'heads':>5} {'no cache (s)':>13} {'KV cache (s)':>13} {'speed-up':>9} "
          f"{'identical tokens':>17}")
    for d_model, n_layer, n_head in SIZES:
        torch.manual_seed(0)
        model = GPT(100, args.prompt + args.new_tokens, n_layer, n_head, d_model).eval()
        prompt = torch.randint(0, 100, (1, args.prompt), generator=torch.Generator().manual_seed(1))
        generate(model, prompt, 4)
        generate(model, prompt, 4, use_cache=True)  # warm up both paths
        plain, t_plain = timed(model, prompt, args.new_tokens, use_cache=False)
        cached, t_cached = timed(model, prompt, args.new_tokens, use_cache=True)
        print(f"{d_model:>7} {n_layer:>6} {n_head:>5} {t_plain:>13.2f} {t_cached:>13.2f} {t_plain / t_cached:>8.1f}x "
              f"{str(torch.equal(plain, cached)):>17}", flush=True)


if __name__ == "__main__":
    main()

"""The JetStream engine's prefill of judge prompts, with and without kept prefixes
(serving/prefix_cache.py), side by side in one process: what `--prefix_cache_entries`
saves before any decoding.

Workload: the judge prompts of benchmarks/judge_throughput.py's cells (T tasks x K criteria
x J responses, the judge's own order: task, criterion, response), token ids as
JetStreamClient sends them, padded as JetStream's orchestrator pads them. Model: the default
SmolLM2-135M-Instruct, float32. For each engine, one pass over other cells to compile every
shape, then `--repeats` timed passes of `prefill` alone (each result blocked on, then
deleted as JetStream deletes a prefix after insert); medians. The kept-prefix engine's
cache is emptied before each pass, so a pass reuses only what its own cells share.

  python benchmarks/serving_prefill.py [--tasks 4 --responses 2 --criteria 6 --repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time


# pylint: disable=g-import-not-at-top,wrong-import-position
from harnessrl_jax.serving import engine as engine_lib  # installs JetStream's shims first
import jax
import numpy as np
from jetstream.engine import token_utils

from judge_throughput import workload   # the same cells
from harnessrl_jax.experiment import machine
from harnessrl_jax.judges import prompt as prompt_lib
from harnessrl_jax.models.loading import load_model
from harnessrl_jax.serving.prefix_cache import PrefixCache
# pylint: enable=g-import-not-at-top,wrong-import-position


def cell_prompts(pb, args, tag: str) -> list[np.ndarray]:
  tasks, responses = workload(args.tasks, args.responses, tag, args.criteria)
  return [np.asarray(pb.encode_chat(prompt_lib.judge_messages(t.prompt, c, r)), np.int32)
          for t, group in zip(tasks, responses) for c in t.criteria for r in group]


def prefill_pass(engine, params, prompts, tok, max_prefill: int) -> float:
  if engine.prefix_cache is not None:   # a pass reuses only what its own cells share
    engine.prefix_cache = PrefixCache(engine.prefix_cache.max_entries,
                                      engine.prefix_cache.block)
  t0 = time.perf_counter()
  for ids in prompts:
    padded, true_len = token_utils.pad_tokens(ids, tok.bos_id, tok.pad_id, is_bos=True,
                                              max_prefill_length=max_prefill, jax_padding=True)
    prefix = engine.prefill(params=params, padded_tokens=padded, true_length=true_len)
    jax.block_until_ready(prefix["k"])
    jax.tree.map(lambda x: x.delete() if isinstance(x, jax.Array) else None, prefix)
  return time.perf_counter() - t0


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--tasks", type=int, default=4)
  parser.add_argument("--responses", type=int, default=2)
  parser.add_argument("--criteria", type=int, default=6)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--prefill", type=int, default=512, help="max_prefill_length")
  args = parser.parse_args()
  host = machine()
  print(f"machine: {host['cpu']}, {host['usable_cores']} usable cores, jax {jax.__version__} "
        f"on {jax.devices()[0].platform}; load average {host['load_avg']} at start", flush=True)
  loaded = load_model({"source": "smollm2"})
  pb = loaded.prompt_builder
  engines = {name: engine_lib.DecoderEngine(loaded.model, pb, max_prefill_length=args.prefill,
                                            max_decode_length=64, prefix_cache_entries=entries)
             for name, entries in (("kept", 16), ("rows", 0))}
  warm = cell_prompts(pb, args, "warm-up")
  timed = [cell_prompts(pb, args, f"run {r}") for r in range(args.repeats)]
  print(f"{len(warm)} cells a pass, prompts {min(map(len, warm))}-{max(map(len, warm))} "
        "tokens", flush=True)
  times = {name: [] for name in engines}
  for name, engine in engines.items():
    params = engine.load_params()
    tok = engine.build_tokenizer(engine.get_tokenizer())
    print(f"{name}: compile pass {prefill_pass(engine, params, warm, tok, args.prefill):.1f}s",
          flush=True)
  for prompts in timed:   # alternating, so load drift hits both
    for name, engine in engines.items():
      params = engine.load_params()
      tok = engine.build_tokenizer(engine.get_tokenizer())
      times[name].append(prefill_pass(engine, params, prompts, tok, args.prefill))
  stats = engines["kept"].prefix_cache.stats
  for name, ts in times.items():
    print(f"{name}: " + ", ".join(f"{t:.2f}" for t in ts) + f" s; median "
          f"{statistics.median(ts):.2f} s = {1000 * statistics.median(ts) / len(warm):.0f} ms "
          "a cell", flush=True)
  print(f"kept, last pass: {stats.hits} of {stats.lookups} prefills on a kept prefix, "
        f"{stats.tokens_reused} of {stats.tokens_looked_up} context tokens reused")
  print(f"load average at end: {machine()['load_avg']}")
  print(f"RESULT prefill kept prefixes / rows: "
        f"{statistics.median(times['rows']) / statistics.median(times['kept']):.2f}x")


if __name__ == "__main__":
  main()

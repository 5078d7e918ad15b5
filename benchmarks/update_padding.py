"""The CPU default's GRPO update on the rollout's prompt bucket, on the batch's longest real
prompt (`rl.prompt_pad_multiple`, rl/batch.trim_prompt_padding), and with each group's
shared prompt packed once (`rl.share_prompts`, rl/train_step.py), side by side.

Batches as the default run builds them (configs/default.py): tasks_per_step x J rows, the
bundled training prompts rendered with SmolLM2's chat template and tokenizer, left-padded to
the 128-token bucket, then max_new_tokens response slots, full (the trained policy writes
to the limit; the token ids are random, which costs what real ones cost). The step is the
run's own: `rl.build_step` over the default's rl section (micro-batches of 8, beta 0.001,
so the reference forward runs inside the step, as in a run). For each of `--draws` task
draws: the step on the full-width batch, on the trimmed one, and on the trimmed one packed
by group, from the same state, first once each to compile (a width compiles once) and to
compare loss and gradient norm, then `--repeats` timed calls each, alternating. Reported:
the machine, each draw's widths, medians, the ratios, and the token positions each
computes.

  python benchmarks/update_padding.py [--draws 3] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
  from configs import default  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.experiment import machine  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.models import loading  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl import mesh as rl_mesh  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl import train_step as ts  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl.batch import trim_prompt_padding  # pylint: disable=g-import-not-at-top

  cfg = default.get_config()
  print("machine:", machine(), flush=True)
  loaded, graphdef, params = loading.load_model_split(cfg.model)
  j = int(cfg.rollout.num_samples)
  forward = ts.decoder_forward(graphdef)
  temperature = cfg.rollout.temperature
  tx, rows_step = ts.build_step(forward, cfg.rl, temperature=temperature, donate=False)
  _, packed_step = ts.build_step(forward, cfg.rl, temperature=temperature, tx=tx, donate=False,
                                 group_size=j)
  state, _ = rl_mesh.init_state(params, tx, None, params)
  multiple = int(cfg.rl.prompt_pad_multiple)
  arms = ("full", "trimmed", "packed")
  seconds = {a: [] for a in arms}
  positions = {a: 0 for a in arms}
  for d, full in enumerate(draw_batches(cfg, loaded.prompt_builder, args.draws, args.seed)):
    trimmed = trim_prompt_padding(full, multiple)
    runs = {"full": (rows_step, full), "trimmed": (rows_step, trimmed),
            "packed": (packed_step, trimmed)}
    metrics = {}
    for name, (step, batch) in runs.items():
      _, m = step(state, batch)
      metrics[name] = f"{float(m['loss']):.6g} / {float(m['grad_norm']):.6g}"
    times = {a: [] for a in arms}
    for _ in range(args.repeats):
      for name, (step, batch) in runs.items():
        t = time.perf_counter()
        jax.block_until_ready(step(state, batch))
        times[name].append(time.perf_counter() - t)
    b, width = full.tokens.shape
    p, n = trimmed.prompt_len, full.loss_mask.shape[1]
    computed = {"full": b * width, "trimmed": b * (p + n), "packed": b // j * (p + j * n)}
    for a in arms:
      seconds[a] += times[a]
      positions[a] += computed[a]
    print(f"draw {d}: width {width} -> {p + n} (real tokens "
          f"{int(np.asarray(full.attention_mask).sum())}); step s "
          + "; ".join(f"{a} {[round(x, 2) for x in times[a]]}" for a in arms)
          + "; loss / grad norm " + ", ".join(f"{a} {metrics[a]}" for a in arms), flush=True)
  med = {a: float(np.median(seconds[a])) for a in arms}
  print(f"median step: full bucket {med['full']:.2f} s, trimmed (multiple {multiple}) "
        f"{med['trimmed']:.2f} s ({med['full'] / med['trimmed']:.2f}x), packed by group of "
        f"{j} {med['packed']:.2f} s ({med['full'] / med['packed']:.2f}x full, "
        f"{med['trimmed'] / med['packed']:.2f}x trimmed); positions computed "
        + ", ".join(f"{a} {positions[a]}" for a in arms) + f"; load after {os.getloadavg()}")


if __name__ == "__main__":
  main()

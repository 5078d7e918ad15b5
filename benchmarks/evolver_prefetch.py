"""The CPU default's evolver step with the critic's guidance re-samples drawn ahead in one
sampler call (`evolver.prefetch_resamples`, evolver/prefetch.py) and with one call per
candidate, side by side.

Groups as the default run records them (configs/default.py): tasks_per_step bundled
training tasks, J answers each sampled by SmolLM2-135M under H_0 and graded by the run's
judge. For each of `--draws` task draws, the evolver step (the run's own: `build_evolver`
over the default config; for each call a fresh memory holding the pool's criteria, as a
run's after its first step) in both arms from the same inputs,
first once each untimed (the sampler compiles each new shape once per run: 1 prompt, and
the number of prompts drawn ahead), then `--repeats` timed calls each, alternating the
order. Reported: the machine, per draw each arm's seconds, its sampler calls and rows, and
whether the two arms' candidate records are equal; medians and their ratio.

  python benchmarks/evolver_prefetch.py [--draws 4] [--repeats 2]
"""

from __future__ import annotations

import argparse
import copy
import os
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--draws", type=int, default=4)
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()

  # pylint: disable=g-import-not-at-top
  import jax
  from configs import default
  from harnessrl_jax import harness
  from harnessrl_jax.data import loader
  from harnessrl_jax.evolver import build_evolver
  from harnessrl_jax.evolver.measure import sample_groups
  from harnessrl_jax.experiment import machine
  from harnessrl_jax.judges.factory import make_run_judge
  from harnessrl_jax.memory import Memory, embedder_from_config
  from harnessrl_jax.models import loading
  from harnessrl_jax.rollout.sampling import SamplingParams
  from harnessrl_jax.rollout.texts import TextSampler
  # pylint: enable=g-import-not-at-top

  cfg = default.get_config()
  print("machine:", machine(), flush=True)
  loaded, graphdef, params = loading.load_model_split(cfg.model)
  judge = make_run_judge(cfg, loaded)
  texts = TextSampler.from_config(graphdef, loaded.prompt_builder, cfg.rollout)
  policy = texts.resample_fn(params, SamplingParams.from_config(cfg.rollout))
  calls: list[int] = []

  def resample(chats, key, num_samples):
    calls.append(len(chats) * num_samples)
    return policy(chats, key, num_samples)

  tasks = loader.load_tasks(os.path.join(REPO, cfg.data.train))
  h = harness.from_tasks(tasks, cfg.harness)
  embedder = embedder_from_config(cfg.memory)
  arms = {"one call each": False, "drawn ahead": True}
  evolvers = {}
  for name, on in arms.items():
    c = copy.deepcopy(cfg)
    c.evolver.prefetch_resamples = on
    evolvers[name] = build_evolver(
        c, judge=judge, tasks=tasks,
        prompt_tokens=lambda chat: len(loaded.prompt_builder.encode_chat(chat)))
  rng = np.random.default_rng(args.seed)
  j, k = int(cfg.rollout.num_samples), int(cfg.rl.tasks_per_step)
  seconds = {name: [] for name in arms}
  equal = 0
  for d in range(args.draws):
    drawn = [tasks[i] for i in rng.choice(len(tasks), k, replace=False)]
    groups, _ = sample_groups(drawn, h, policy, judge, jax.random.key(100 + d), j)
    key = jax.random.key(d)

    def run(name):
      # A run's memory embeds the pool's criteria once, at its first step: do that here,
      # untimed, so each call embeds only what the step changes, as in a run.
      memory = Memory(cfg.memory, embedder)
      memory.sync_rubrics(h)
      calls.clear()
      t = time.perf_counter()
      res = evolvers[name].step(h, groups, step=d, key=key, memory=memory,
                                resample=resample)
      return time.perf_counter() - t, res, list(calls)

    first = {name: run(name) for name in arms}
    records = {name: [r.to_json() for r in first[name][1].records] for name in arms}
    equal += records["one call each"] == records["drawn ahead"]
    times = {name: [] for name in arms}
    order = list(arms)
    for r in range(args.repeats):
      for name in (order if r % 2 == 0 else order[::-1]):
        times[name].append(run(name)[0])
    for name in arms:
      seconds[name] += times[name]
    print(f"draw {d}: " + "; ".join(
        f"{name}: first {first[name][0]:.2f} s, then {[round(x, 2) for x in times[name]]} s, "
        f"sampler calls (rows) {first[name][2]}" for name in arms)
        + f"; records equal: {records['one call each'] == records['drawn ahead']}",
        flush=True)
  med = {name: float(np.median(seconds[name])) for name in arms}
  print(f"median evolver step: one call each {med['one call each']:.2f} s, drawn ahead "
        f"{med['drawn ahead']:.2f} s ({med['one call each'] / med['drawn ahead']:.2f}x); "
        f"records equal in {equal} of {args.draws} draws; load after "
        f"{[round(x, 2) for x in os.getloadavg()]}")


if __name__ == "__main__":
  main()

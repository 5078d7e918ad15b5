"""How many seeds (and held-out tasks) a paired comparison needs to resolve an effect.

`python -m harnessrl_jax.eval.power --diffs=8.7,4.5,6.7,0.7,1.3,-9.1 --task_se=4.5`
prints, from per-seed paired differences (arm - reference, points), the seed-to-seed sd,
its split into a trajectory part and a held-out-task part, and the seeds needed so that a
two-sided test at `--alpha` finds a `--delta`-point difference with probability `--power`
(and, the same size, that the 95% interval around a true 0 stays below `--delta`), for
several held-out set sizes. `--workdir=DIR --arm=A --reference=R` reads the per-seed,
per-task oracle points of a testbed grid's finished runs instead (eval/testbed.py).

The model (one seed s, m held-out tasks): d_s = mu + a_s + mean_i e_si, with a_s the
seed's training trajectory (variance tau^2) and e_si the task's paired noise (variance
sigma_task^2), so Var(d_s) = tau^2 + sigma_task^2 / m. A task-level interval of one seed
(a bootstrap over its tasks) estimates sigma_task / sqrt(m) (`task_se`); the seed-to-seed
variance of d_s, less that, estimates tau^2. More tasks shrink only the second part, so
with tau^2 > 0 no number of tasks replaces seeds.

Sizes use Student's t: n is the least n >= 2 with
  (t_{1-alpha/2, n-1} + t_{power, n-1}) * sd / sqrt(n) <= delta
(the usual normal-approximation power for a one-sample test on the paired differences).
The t quantile is a Cornish-Fisher expansion (no scipy dependency; within 0.01 of the
exact value for 3+ degrees of freedom, checked in tests/eval/test_power.py).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import sys
from collections.abc import Sequence

from absl import app, flags


def normal_quantile(p: float) -> float:
  """The standard normal quantile (statistics.NormalDist: exact to double precision)."""
  return statistics.NormalDist().inv_cdf(p)


def t_quantile(p: float, df: float) -> float:
  """Student's t quantile, Cornish-Fisher expansion in 1/df to the fourth order."""
  if df <= 0:
    raise ValueError(f"degrees of freedom must be positive, got {df}")
  z = normal_quantile(p)
  g1 = (z ** 3 + z) / 4
  g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
  g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
  g4 = (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160
  return z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4


def seeds_needed(sd: float, delta: float, *, alpha: float = 0.05, power: float = 0.8,
                 max_n: int = 10_000) -> int:
  """The least n (>= 2) of paired seeds whose two-sided level-alpha t test on the mean
  difference finds a true `delta` with probability `power` (sd: of one seed's difference)."""
  if sd < 0 or delta <= 0:
    raise ValueError("sd must be >= 0 and delta > 0")
  for n in range(2, max_n + 1):
    need = (t_quantile(1 - alpha / 2, n - 1) + t_quantile(power, n - 1)) * sd / math.sqrt(n)
    if need <= delta:
      return n
  return max_n


def half_width(sd: float, n: int, alpha: float = 0.05) -> float:
  """The half-width of the t interval of a mean of n paired differences."""
  return t_quantile(1 - alpha / 2, n - 1) * sd / math.sqrt(n)


@dataclasses.dataclass(frozen=True)
class Variance:
  """Per-seed paired differences, and their variance split (module docstring)."""

  n: int
  mean: float
  sd: float          # of one seed's difference, as observed (m tasks)
  task_sd: float     # sigma_task: one task's paired-difference sd within a seed
  tau: float         # the trajectory part's sd (0 when the task part explains it all)
  m: int             # held-out tasks the differences were taken over

  def sd_at(self, m: int | None) -> float:
    """One seed's difference sd with m held-out tasks (None: infinitely many)."""
    task = 0.0 if m is None else self.task_sd ** 2 / m
    return math.sqrt(self.tau ** 2 + task)


def variance(diffs: Sequence[float], task_se: float, m: int) -> Variance:
  """Split the seed-to-seed variance of `diffs` given one seed's task-level standard
  error `task_se` over its m tasks."""
  if len(diffs) < 2:
    raise ValueError("need at least 2 seeds' differences")
  sd = statistics.stdev(diffs)
  tau2 = max(sd ** 2 - task_se ** 2, 0.0)
  return Variance(len(diffs), statistics.fmean(diffs), sd, task_se * math.sqrt(m),
                  math.sqrt(tau2), m)


def task_se_of(per_task: Sequence[Sequence[float]]) -> float:
  """The root-mean-square over seeds of each seed's standard error of its mean paired
  task difference (per_task[s]: the task differences of seed s)."""
  ses = [statistics.stdev(d) / math.sqrt(len(d)) for d in per_task if len(d) > 1]
  if not ses:
    raise ValueError("need a seed with 2+ tasks")
  return math.sqrt(statistics.fmean(s ** 2 for s in ses))


def table(v: Variance, *, delta: float, alpha: float, power: float,
          task_counts: Sequence[int | None]) -> list[dict]:
  """Per held-out set size, one seed's sd and the seeds needed."""
  out = []
  for m in task_counts:
    sd = v.sd_at(m)
    n = seeds_needed(sd, delta, alpha=alpha, power=power)
    out.append({"tasks": m, "sd": sd, "seeds": n, "half_width": half_width(sd, n, alpha)})
  return out


def render(v: Variance, rows: Sequence[dict], *, delta: float, alpha: float,
           power: float) -> str:
  lines = [f"{v.n} seeds: mean paired difference {v.mean:+.2f} points, sd {v.sd:.2f} "
           f"(over {v.m} held-out tasks)",
           f"split: trajectory sd tau {v.tau:.2f}, one task's sd {v.task_sd:.2f} "
           f"(task part of a seed's sd: {v.task_sd / math.sqrt(v.m):.2f})",
           f"seeds for a {delta:g}-point difference, two-sided alpha {alpha:g}, "
           f"power {power:g}:",
           "| held-out tasks | sd of one seed's difference | seeds | 95% half-width there |",
           "|---|---|---|---|"]
  for r in rows:
    m = "infinitely many" if r["tasks"] is None else str(r["tasks"])
    lines.append(f"| {m} | {r['sd']:.2f} | {r['seeds']} | {r['half_width']:.2f} |")
  return "\n".join(lines)


def grid_differences(workdir: str, arm: str, reference: str, truth_path: str,
                     heldout_path: str) -> tuple[list[float], list[list[float]], int]:
  """(per-seed oracle differences at the last common evaluation, per-seed per-task
  differences, tasks) of a testbed grid's seeds that both arms finished."""
  import os  # noqa: PLC0415 (the --diffs path needs none of this)

  from harnessrl_jax.data.loader import load_tasks  # noqa: PLC0415
  from harnessrl_jax.eval import testbed  # noqa: PLC0415
  truth = testbed.load_truth(truth_path)
  tasks = {t.id: t for t in load_tasks(heldout_path)}
  diffs, per_task, m = [], [], 0
  seeds = sorted(int(d[4:]) for d in os.listdir(os.path.join(workdir, arm))
                 if d.startswith("seed") and d[4:].isdigit())
  for s in seeds:
    dirs = [os.path.join(workdir, a, f"seed{s}") for a in (arm, reference)]
    if not all(os.path.isfile(os.path.join(d, "summary.json")) for d in dirs):
      continue
    held = [testbed.run_measures(d, truth, tasks)["heldout"] for d in dirs]
    step = max(set(h["step"] for h in held[0]) & set(h["step"] for h in held[1]))
    a, b = (next(h for h in x if h["step"] == step) for x in held)
    diffs.append(a["oracle"] - b["oracle"])
    common = sorted(set(a["oracle_items"]) & set(b["oracle_items"]))
    per_task.append([a["oracle_items"][t] - b["oracle_items"][t] for t in common])
    m = len(common)
  return diffs, per_task, m


FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags (defined only when it runs: a module that imports this one
  for its functions must not get them)."""
  flags.DEFINE_list("diffs", None, "per-seed paired differences, points")
  flags.DEFINE_float("task_se", None, "one seed's standard error over its held-out tasks")
  flags.DEFINE_integer("tasks", 20, "held-out tasks the differences were taken over")
  flags.DEFINE_string("workdir", None, "a testbed grid: read the differences from its runs")
  flags.DEFINE_string("arm", "harnessrl_transfer", "with --workdir: the arm")
  flags.DEFINE_string("reference", "grpo_static", "with --workdir: the reference arm")
  flags.DEFINE_string("truth", "data/testbed/truth.jsonl", "with --workdir: the truth file")
  flags.DEFINE_string("heldout", "data/testbed/heldout.jsonl", "with --workdir: held-out tasks")
  flags.DEFINE_float("delta", 5.0, "the difference to resolve, points")
  flags.DEFINE_float("alpha", 0.05, "two-sided level")
  flags.DEFINE_float("power", 0.8, "probability of finding delta")


def main(argv: Sequence[str]) -> int:
  del argv
  if FLAGS.workdir:
    diffs, per_task, m = grid_differences(FLAGS.workdir, FLAGS.arm, FLAGS.reference,
                                          FLAGS.truth, FLAGS.heldout)
    print(f"{FLAGS.workdir}: {len(diffs)} paired seeds, differences "
          + ", ".join(f"{d:+.2f}" for d in diffs))
    task_se = FLAGS.task_se if FLAGS.task_se is not None else task_se_of(per_task)
  else:
    if not FLAGS.diffs or FLAGS.task_se is None:
      print("error: give --diffs and --task_se, or --workdir", file=sys.stderr)
      return 2
    diffs, m, task_se = [float(x) for x in FLAGS.diffs], FLAGS.tasks, FLAGS.task_se
  v = variance(diffs, task_se, m)
  rows = table(v, delta=FLAGS.delta, alpha=FLAGS.alpha, power=FLAGS.power,
               task_counts=(m, 2 * m, 4 * m, None))
  print(render(v, rows, delta=FLAGS.delta, alpha=FLAGS.alpha, power=FLAGS.power))
  return 0


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: sys.exit(main(argv)))

"""Replay a run's logged groups through the attributor, offline, in seconds.

  python -m harnessrl_jax.evolver.replay --run=DIR [--run=DIR2 ...] [--truth=FILE]
      [--set=FIELD=VALUE ...]

For every logged step of each run it rebuilds what the attributor saw: the groups of
`oracle_groups.jsonl` (the seed task, its J responses), the rubric H_t held for each task
then (H_0 from the run's config, with the `harness_history.jsonl` records of earlier steps
and the step's own schedule and set-up records, which the driver applies before the
step's rollouts), the judge's verdicts under that rubric (the program checks: every
testbed criterion has one) and memory's time index of the task's earlier draws (when the
run had memory). It runs the run's own attributor on them (its config.evolver, with any
`--set` changes) and:
  - compares each label with the row the run logged in `attributions.jsonl` (the label,
    and the correlational label before the interventional test): with no `--set`, every
    label must match, else the exit status is 1 (a replay that does not reproduce the run
    measures nothing);
  - grades the labels against the testbed's truth classes (eval/testbed.py: the truth
    class of a planted criterion over all of the step's responses to the task), per label
    and, for the spurious label, per planted proxy kind (surface), with 95% percentile
    intervals from a bootstrap over runs and, within each, over (step, task) draws.

Judge verdicts here are the checks' (eval/testbed.py does the same): a criterion without
a check gets no verdict, as under the testbed's program judge.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import sys
import time
import types
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import ml_collections
import numpy as np
from absl import app, flags

from harnessrl_jax import harness
from harnessrl_jax import run_files as rf
from harnessrl_jax.data.splits import load_split
from harnessrl_jax.eval import testbed
from harnessrl_jax.evolver.attributor import make_attributor
from harnessrl_jax.evolver.config import EvolverConfig, evolver_defaults
from harnessrl_jax.evolver.measure import groups_from
from harnessrl_jax.harness.history import read_history
from harnessrl_jax.harness.ops import apply
from harnessrl_jax.judges.grading import grade
from harnessrl_jax.judges.judge import Judge
from harnessrl_jax.memory.time_index import TimeIndex, make_draw

CLASSES = testbed.CLASSES


def _config(run_dir: str) -> ml_collections.ConfigDict:
  with open(os.path.join(run_dir, rf.CONFIG), encoding="utf-8") as f:
    return ml_collections.ConfigDict(json.load(f)[rf.CONFIG_TREE])


def evolver_config(cfg: ml_collections.ConfigDict, changes: dict[str, Any]) -> EvolverConfig:
  """The run's EvolverConfig with `changes` (field -> value) over it; a field the run's
  config predates takes its default (the behaviour it had before the field existed)."""
  known = evolver_defaults().to_dict()
  ev = EvolverConfig.from_config(ml_collections.ConfigDict(
      {**known, **{k: v for k, v in cfg.evolver.to_dict().items() if k in known}}))
  unknown = set(changes) - {f.name for f in dataclasses.fields(ev)}
  if unknown:
    raise ValueError(f"--set: no evolver field {sorted(unknown)}")
  return dataclasses.replace(ev, **changes)


def _rows(path: str) -> list[dict]:
  if not os.path.isfile(path):
    return []
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


@dataclasses.dataclass
class Replayed:
  """One run's replay: labels per (step, task, criterion), as replayed and as logged."""

  run_dir: str
  labels: dict[tuple[int, str, str], tuple[str, str]]     # -> (used, correlational)
  logged: dict[tuple[int, str, str], tuple[str, str]]
  groups: list[testbed._Group]
  # per group drawn under a penalty (a negative-weight criterion with a verdict): (step,
  # task, whether some penalty of it splits the group: incurred by some, not all)
  penalised: list[tuple[int, str, bool]] = dataclasses.field(default_factory=list)


def replay_run(run_dir: str, changes: dict[str, Any] | None = None) -> Replayed:
  """The run's attributor, rerun on its logged groups (module docstring)."""
  cfg = _config(run_dir)
  ev = evolver_config(cfg, changes or {})
  judge = Judge(None, use_checks=True, cache_size=4096)
  attributor = make_attributor(ev, judge=judge,
                               total_weight=float(cfg.harness.total_weight))
  h0 = harness.from_tasks(load_split(cfg.data.train, tuple(cfg.data.domains), field="train"),
                          cfg.harness)
  path = os.path.join(run_dir, rf.HISTORY)
  records = read_history(path) if os.path.exists(path) else []
  memory = types.SimpleNamespace(time=TimeIndex()) if cfg.ablation.memory else None
  problems: list[str] = []
  groups = testbed._groups([(f"{rf.GROUPS}:{n}", r) for n, r in enumerate(
      _rows(os.path.join(run_dir, rf.GROUPS)), 1)], {}, problems)
  if problems:
    raise ValueError(f"{run_dir}: " + "; ".join(problems[:3]))
  by_step: dict[int, list[testbed._Group]] = defaultdict(list)
  for g in groups:
    by_step[g.step].append(g)
  labels = {}
  penalised = []
  h, applied = h0, 0
  for step in sorted(by_step):
    # H_t: every record of earlier steps, and this step's driver records (schedule,
    # set-up), which come before its evolver's in the log
    while applied < len(records) and (records[applied].step < step or (
        records[applied].step == step and rf.SOURCE in dict(records[applied].measurement))):
      h = apply(h, records[applied].op)
      applied += 1
    gs = by_step[step]
    tasks = [g.task for g in gs]
    criteria = [h.criteria(t.id) for t in tasks]
    judged = grade(judge, tasks, [list(g.responses) for g in gs], criteria, check_limit=False)
    for group in groups_from(tasks, criteria, [g.responses for g in gs], judged):
      split = penalty_split(group)
      if split is not None:
        penalised.append((step, group.task_id, split))
      att, _ = attributor.attribute(group, h, memory, step)
      for lab in att.labels:
        before = dict(lab.signals).get(rf.CORRELATIONAL_LABEL, lab.label)
        labels[(step, group.task_id, lab.criterion_id)] = (lab.label, before)
      if memory is not None:
        memory.time.add(make_draw(
            group.task_id, step, [c.id for c in group.criteria],
            [c.weight for c in group.criteria], group.scores, group.scored, group.rewards,
            labels={lab.criterion_id: lab.label for lab in att.labels}))
  logged = {}
  for r in _rows(os.path.join(run_dir, rf.ATTRIBUTIONS)):
    before = (r.get(rf.SIGNALS) or {}).get(rf.CORRELATIONAL_LABEL, r[rf.LABEL])
    logged[(r[rf.STEP], r[rf.TASK_ID], r[rf.CRITERION_ID])] = (r[rf.LABEL], before)
  return Replayed(run_dir, labels, logged, groups, penalised)


def penalty_split(group) -> bool | None:
  """None when the group was drawn under no penalty with a verdict; else whether some
  penalty splits it (incurred by some responses and not by others): only then does the
  penalty move GRPO's advantages (one every response incurs shifts all rewards alike)."""
  sat = group.satisfied()
  rows = [sat[k][sat[k] >= 0] for k, c in enumerate(group.criteria) if c.weight < 0]
  rows = [r for r in rows if len(r)]
  if not rows:
    return None
  return any((r == 1).any() and (r == 0).any() for r in rows)


def _harness_at(h0, records, step):
  """H_t for `step`'s groups (replay_run's rule), from H_0 and the history records."""
  h = h0
  for r in records:
    if r.step < step or (r.step == step and rf.SOURCE in dict(r.measurement)):
      h = apply(h, r.op)
  return h


@dataclasses.dataclass(frozen=True)
class Decision:
  """One measured candidate of a run: the critic's logged verdict under the run's rule (the
  band), and evolver.accept_test = "ttest"'s verdict on the same measurement, offline."""

  step: int
  task_id: str
  route: str
  delta: float              # the run's logged Delta, points
  replayed_delta: float     # Delta recomputed here (must equal it: the same measurement)
  band_accepted: bool
  test: Any                 # acceptance.TestResult


def measured_draw(draws: Sequence[Any], r_old: float | None, rewards_of):
  """The draw (and its rewards) a candidate was measured on. The log names the step and
  the task, not the draw, so with a task drawn twice in one step the logged mean reward
  before the change (`r_old`, a fraction) picks the group; the first draw when it is not
  logged."""
  graded = [(d, rewards_of(d)) for d in draws]
  if r_old is None or len(graded) == 1:
    return graded[0]
  return min(graded, key=lambda dr: abs(float(np.nanmean(dr[1])) - float(r_old)))


def accept_decisions(run_dir: str, alpha: float) -> list[Decision]:
  """Every measured rubric and guidance candidate of the run's own groups (repairs offered
  to other tasks are measured on groups the log does not hold: left out), with the t
  test's verdict at `alpha` on the same measurement: the group's per-response rewards
  under the rubric the critic compared with, against the candidate rubric's (rubric:
  paired) or against the logged re-sampled answers' (guidance: two-sample)."""
  from harnessrl_jax.evolver import acceptance  # noqa: PLC0415
  from harnessrl_jax.harness.ops import apply_all, op_from_json  # noqa: PLC0415
  cfg = _config(run_dir)
  judge = Judge(None, use_checks=True, cache_size=4096)
  lam = float(cfg.harness.total_weight)
  h0 = harness.from_tasks(load_split(cfg.data.train, tuple(cfg.data.domains), field="train"),
                          cfg.harness)
  path = os.path.join(run_dir, rf.HISTORY)
  records = read_history(path) if os.path.exists(path) else []
  problems: list[str] = []
  groups = testbed._groups([(f"{rf.GROUPS}:{n}", r) for n, r in enumerate(
      _rows(os.path.join(run_dir, rf.GROUPS)), 1)], {}, problems)
  drawn = defaultdict(list)   # a task can be drawn twice in a step: one group per draw
  for g in groups:
    drawn[(g.step, g.task.id)].append(g)
  rows = _rows(os.path.join(run_dir, rf.CANDIDATES))
  out: list[Decision] = []
  step, h = None, None

  def rewards(task, responses, criteria):
    j = grade(judge, [task], [list(responses)], [criteria], check_limit=False)
    return np.where(j.valid[0], j.rewards[0], np.nan)

  for r in rows:
    if r["step"] != step:
      step, h = r["step"], _harness_at(h0, records, r["step"])
    cand, meas = r.get("candidate"), r.get("measurement")
    if cand is None or meas is None:
      continue
    ops = [op_from_json(o) for o in cand["ops"]]
    draws = drawn.get((step, r["task_id"]), [])
    measured = (r["route"] in ("rubric", "guidance") and not r.get("offered_from")
                and meas.get("delta") is not None and draws
                and not any("(iii)" in x or "(iv)" in x for x in meas.get("reasons", ())))
    if measured:
      now = h.criteria(draws[0].task.id)
      g, old = measured_draw(
          draws, meas.get("r_old"), lambda d: rewards(d.task, d.responses, now))
      if r["route"] == "rubric":
        new = rewards(g.task, g.responses, apply_all(h, ops).criteria(g.task.id))
        test = acceptance.paired(old, new, alpha, lam)
      else:
        new = rewards(g.task, meas.get("responses", ()), now)
        test = acceptance.two_sample(old, new, alpha, lam)
      out.append(Decision(step, r["task_id"], r["route"], float(meas["delta"]),
                          float(test.delta), r["verdict"] == rf.ACCEPTED, test))
    if r["verdict"] == rf.ACCEPTED:
      h = apply_all(h, ops)
  return out


def accept_report(run_dirs: Sequence[str], truth: testbed.Truth, alpha: float) -> str:
  """Per route: candidates the band accepted and the t test would, and of those measured
  at the task's next logged draw, the share followed by a lower mean oracle reward (the
  testbed's critic measure) -- for the band's accepts, and split by the test's verdict."""
  judge = Judge(None, use_checks=True, cache_size=1)
  tally: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
  lines, off = [], 0
  for d in run_dirs:
    decisions = accept_decisions(d, alpha)
    off += sum(abs(x.delta - x.replayed_delta) > 0.01 for x in decisions)
    problems: list[str] = []
    groups = testbed._groups([(f"{rf.GROUPS}:{n}", r) for n, r in enumerate(
        _rows(os.path.join(d, rf.GROUPS)), 1)], {}, problems)
    _, pooled = testbed._train(groups, truth, judge)
    draws = testbed.draws_by_task(pooled)
    for x in decisions:
      t = tally[x.route]
      t["measured"][0] += 1
      t["band"][0] += x.band_accepted
      t["test"][0] += x.test.accepted
      later = [st for st in draws[x.task_id] if st > x.step]
      if not x.band_accepted or not later or (x.step, x.task_id) not in pooled:
        continue
      before = np.mean(pooled[(x.step, x.task_id)].rewards)
      after = np.mean(pooled[(later[0], x.task_id)].rewards)
      drop = int(after < before)
      for key in ("band accepted", "test accepts too" if x.test.accepted
                  else "test rejects"):
        t[key][0] += 1
        t[key][1] += drop
  lines.append(f"accept test: one-sided t at alpha {alpha:g}; {off} replayed Deltas differ "
               "from the logged ones by more than 0.01 points")
  lines.append("| route | measured | the run's rule accepts | test would accept | its accepts followed "
               "by a drop (of measured next draw) | of which test accepts too | test rejects |")
  lines.append("|---|---|---|---|---|---|---|")
  frac = lambda v: f"{v[1]} of {v[0]}" + (f" ({100 * v[1] / v[0]:.0f}%)" if v[0] else "")  # noqa: E731
  for route in sorted(tally):
    t = tally[route]
    lines.append(f"| {route} | {t['measured'][0]} | {t['band'][0]} | {t['test'][0]} | "
                 f"{frac(t['band accepted'])} | {frac(t['test accepts too'])} | "
                 f"{frac(t['test rejects'])} |")
  return "\n".join(lines)


def mismatches(rep: Replayed) -> list[str]:
  """Where the replay and the run's log disagree (a label, or a row on one side only)."""
  out = []
  for key in sorted(set(rep.labels) | set(rep.logged), key=str):
    a, b = rep.labels.get(key), rep.logged.get(key)
    if a != b:
      out.append(f"step {key[0]} {key[1]}/{key[2]}: replayed {a}, logged {b}")
  return out


@dataclasses.dataclass(frozen=True)
class Instance:
  """One planted criterion at one (step, task) of one run, labelled and with its truth."""

  run: int
  draw: tuple[int, str]   # (step, task id): the bootstrap unit within a run
  kind: str
  surface: str | None
  actual: str
  used: str
  correlational: str


def instances(reps: Sequence[Replayed], truth: testbed.Truth) -> list[Instance]:
  """The planted criteria of every replayed (step, task), with their truth classes (over
  all of the step's logged responses to the task, as eval/testbed.py grades)."""
  judge = Judge(None, use_checks=True, cache_size=1)
  out = []
  for r, rep in enumerate(reps):
    _, pooled = testbed._train(rep.groups, truth, judge)
    planted = {(p.task_id, p.criterion_id): p for p in truth.planted}
    for (step, tid, cid), (used, before) in sorted(rep.labels.items(), key=str):
      p = planted.get((tid, cid))
      if p is None or (step, tid) not in pooled:
        continue
      actual = testbed.truth_class(*pooled[(step, tid)].verdicts[cid])
      out.append(Instance(r, (step, tid), p.kind, p.surface, actual, used, before))
  return out


def unplanted_spurious(reps: Sequence[Replayed], truth: testbed.Truth) -> int:
  """How many replayed labels call a criterion the testbed did not plant spurious."""
  planted = {(p.task_id, p.criterion_id) for p in truth.planted}
  return sum(used == "spurious" and (tid, cid) not in planted
             for rep in reps for (_, tid, cid), (used, _) in rep.labels.items())


def _pr(xs: Sequence[Instance], label: str, which: str, surface: str | None = None
        ) -> tuple[int, int, int]:
  tp = fp = fn = 0
  for x in xs:
    if surface is not None and x.surface != surface:
      continue
    pred = getattr(x, which)
    tp += pred == label == x.actual
    fp += pred == label != x.actual
    fn += x.actual == label != pred
  return tp, fp, fn


def _ratio(a: int, b: int) -> float:
  return a / b if b else float("nan")


def precision_recall(xs: Sequence[Instance], label: str, which: str = "used",
                     surface: str | None = None, *, resamples: int = 2000, seed: int = 0
                     ) -> dict[str, Any]:
  """Precision and recall of `label` (`which`: the used or the correlational label), over
  instances of `surface` (None: all), with 95% percentile intervals from a bootstrap over
  runs and, within each drawn run, its (step, task) draws."""
  tp, fp, fn = _pr(xs, label, which, surface)
  units: dict[int, dict[tuple, list[Instance]]] = defaultdict(lambda: defaultdict(list))
  for x in xs:
    units[x.run][x.draw].append(x)
  runs = sorted(units)
  rng = np.random.default_rng(seed)
  ps, rs = [], []
  for _ in range(resamples):
    t = f = n = 0
    for r in rng.choice(runs, len(runs)):
      draws = list(units[r].values())
      for i in rng.integers(0, len(draws), len(draws)):
        a, b, c = _pr(draws[i], label, which, surface)
        t, f, n = t + a, f + b, n + c
    ps.append(_ratio(t, t + f))
    rs.append(_ratio(t, t + n))
  q = lambda v: [float(np.nanpercentile(v, 2.5)), float(np.nanpercentile(v, 97.5))] \
      if np.isfinite(v).any() else [float("nan")] * 2  # noqa: E731
  return {"tp": tp, "fp": fp, "fn": fn, "precision": _ratio(tp, tp + fp),
          "recall": _ratio(tp, tp + fn), "precision_ci": q(np.array(ps)),
          "recall_ci": q(np.array(rs))}


def _fmt(d: dict[str, Any]) -> str:
  pct = lambda x: "  n/a" if x != x else f"{100 * x:5.1f}"  # noqa: E731
  ci = lambda c: "" if c[0] != c[0] else f" [{100 * c[0]:.1f}, {100 * c[1]:.1f}]"  # noqa: E731
  return (f"P {pct(d['precision'])}{ci(d['precision_ci'])}  R {pct(d['recall'])}"
          f"{ci(d['recall_ci'])}  (tp {d['tp']} fp {d['fp']} fn {d['fn']})")


def report(xs: Sequence[Instance], *, resamples: int = 2000, hide: Sequence[str] = ()) -> str:
  """P / R per label and per planted proxy kind; the instances of a kind in `hide` (one
  held out of tuning) are left out of every line, and named as left out."""
  hidden = sum(x.surface in hide for x in xs)
  xs = [x for x in xs if x.surface not in hide]
  lines = [f"{len(xs)} planted (step, task, criterion) instances"
           + (f" ({hidden} of kinds {', '.join(hide)} left out)" if hide else "")]
  for which in ("used", "correlational"):
    lines.append(f"{'with the intervention' if which == 'used' else 'correlational'}:")
    for label in CLASSES:
      lines.append(f"  {label:9s} " + _fmt(precision_recall(xs, label, which,
                                                              resamples=resamples)))
    for s in (s for s in testbed.SURFACES if s not in hide):
      lines.append(f"  spurious/{s:12s} " + _fmt(precision_recall(xs, "spurious", which, s,
                                                                  resamples=resamples))
                   + missed_as(xs, which, s))
  return "\n".join(lines)


def missed_as(xs: Sequence[Instance], which: str, surface: str) -> str:
  """Where the truly spurious instances of `surface` that `which` missed went: the labels
  that `which` gave them instead ("" when none was missed)."""
  got = Counter(getattr(x, which) for x in xs
                if x.surface == surface and x.actual == "spurious" != getattr(x, which))
  return ("; missed as " + ", ".join(f"{k} {n}" for k, n in sorted(got.items()))) if got \
      else ""


FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags (defined only when it runs: a module that imports this one
  for its functions must not get them)."""
  flags.DEFINE_multi_string("run", [], "a run directory (repeat for several)")
  flags.DEFINE_string("truth", "data/testbed/truth.jsonl", "the testbed's truth file")
  flags.DEFINE_multi_string("set", [], "FIELD=VALUE: an evolver field changed for the replay")
  flags.DEFINE_integer("resamples", 2000, "bootstrap resamples")
  flags.DEFINE_float("accept_alpha", None, "also: the critic's logged decisions beside "
                     "evolver.accept_test=ttest's at this alpha, offline")
  flags.DEFINE_list("hide", [], "planted proxy kinds left out of the figures (a kind held "
                    "out of tuning: docs/testbed.md names it)")


def main(argv: Sequence[str]) -> int:
  del argv
  if not FLAGS.run:
    print("error: give --run=DIR", file=sys.stderr)
    return 2
  changes = {}
  for s in FLAGS.set:
    k, _, v = s.partition("=")
    try:
      changes[k] = ast.literal_eval(v)
    except (ValueError, SyntaxError):
      changes[k] = v
  t0 = time.perf_counter()
  reps, status = [], 0
  for d in FLAGS.run:
    rep = replay_run(d, changes)
    bad = mismatches(rep)
    print(f"{d}: {len(rep.labels)} labels replayed, {len(rep.logged)} logged, "
          f"{len(bad)} differ" + (" (--set changes the attributor)" if changes else ""))
    for line in bad[:5]:
      print("  " + line)
    n_split = sum(x for _, _, x in rep.penalised)
    print(f"  groups drawn under a penalty: {len(rep.penalised)}; a penalty splits "
          f"{n_split} of them"
          + (f" ({100 * n_split / len(rep.penalised):.0f}%)" if rep.penalised else ""))
    status = 1 if bad and not changes else status
    reps.append(rep)
  if FLAGS.truth:
    truth = testbed.load_truth(FLAGS.truth)
    print(report(instances(reps, truth), resamples=FLAGS.resamples, hide=FLAGS.hide))
    print(f"spurious labels on criteria the testbed did not plant (no truth to grade them; "
          f"each sends a rubric repair to the proposer): {unplanted_spurious(reps, truth)}")
  if FLAGS.accept_alpha is not None and FLAGS.truth:
    print(accept_report(FLAGS.run, testbed.load_truth(FLAGS.truth), FLAGS.accept_alpha))
  print(f"{time.perf_counter() - t0:.1f} s")
  return status


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: sys.exit(main(argv)))

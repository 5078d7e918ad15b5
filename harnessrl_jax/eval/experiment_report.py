"""The experiment report: arms x seeds of testbed runs, measured against the ground truth.

`write_report(workdir, runs, *, reference, truth_path, heldout_path)` computes each run's
ground-truth measures (eval/testbed.run_measures), aggregates them per arm, and writes
WORKDIR/report.md with PNG plots beside it and WORKDIR/report.json with the same numbers.

Per arm, each as the mean over seeds with a 95% interval:
  (a) held-out oracle and seed scores (points) at each evaluated step;
  (b) hack rates: held-out at each evaluated step (and per planted surface, pooled over
      seeds: how many held-out answers met the proxy, the oracle, and hacked), training in
      bins of steps;
  (c) truth-class shares of the planted criteria in the logged groups, in bins of steps;
  (d) attributor precision and recall per label, with and without the intervention;
  (e) critic regressions: accepted updates followed by an oracle-reward drop, with the
      critic (arm "harnessrl") against without (arm "no_critic");
  (f) wall hours and the evolver's share of them.
Intervals (eval/stats.nested_bootstrap, fixed seed): each resample draws the seeds with
replacement and, within each drawn seed, its held-out tasks (within their domains, so each
resample keeps the macro average over domains) or its logged groups with replacement. A
difference against the reference arm is PAIRED: the same seeds and tasks, the same draws
for both arms, the difference of their means. With one seed an interval is over tasks (or
groups) only; (d)-(f) are over seeds only and have no interval below 2 seeds. Every number
says how many seeds it rests on, and the report says plainly where that is fewer than 3.
A part without data (an arm without runs, a run without evaluations, no attributions) is
"n/a" in report.md and null in report.json.

report.json:
  {"reference", "arms": [arm], "confidence", "num_resamples", "bootstrap_seed",
   "truth_path", "heldout_path", "train_bin_width",
   "headline": [{"arm", "seeds", "final_step", "oracle", "oracle_vs_reference", "seed",
                 "hack_rate", "hack_ratio_to_reference", "train_hack_rate",
                 "spurious_precision", "spurious_recall"}],
   "arms_detail": {arm: {"seeds": [seed], "heldout": [{"step", "seeds", "oracle", "seed",
        "hack_rate", "vs_reference": {"seeds", "oracle", "seed", "hack_rate",
        "hack_ratio"} | null}], "by_surface": [{"step", "counts": {surface: [proxy met,
        oracle met, hacks, pairs]}}] (summed over seeds), "train": [{"step_from", "step_to", "seeds",
        "hack_rate",
        "class_shares": {class: interval}}], "by_kind": {kind: {class: instances}},
        "attributor": {"seeds", "rows", "matched", "no_truth", "unplanted",
        "spurious_unplanted", "intervened", "used" / "correlational": {label: {"tp", "fp",
        "fn", "precision", "recall"}}} | null, "critic": {"seeds", "accepted",
        "followed_by_drop", "no_later_draw", "not_logged", "offered", "drop_rate"} | null,
        "next_draw_lower": interval | null (of consecutive draws of a task, the share whose
        later draw has a lower mean oracle reward: the critic's base rate),
        "cost": {"seeds", "wall_hours", "evolver_share"} | null}},
   "critic_comparison": {"with", "without", "seeds", "drop_rate_difference"} | null,
   "seed_mismatches": [{"arm", "seed", "step", "seed_score", "run_score"}],
   "runs": [{"arm", "seed", "run_dir", "measures": run_measures(...) less the train
             steps' "groups"}]}
where an interval is {"mean", "low", "high", "seeds", "over"} (low/high null without an
interval) or null, and "oracle_vs_reference" is the paired difference arm - reference.
"""

from __future__ import annotations

import collections
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harnessrl_jax import run_files as rf
from harnessrl_jax.data.loader import load_tasks
from harnessrl_jax.eval import stats, testbed
from harnessrl_jax.eval.figures import Figures

CRITIC_ARMS = ("harnessrl", "no_critic")   # (with the critic, without it)
_FEW_SEEDS = 3
_PR = tuple((name, label, stat) for name in ("used", "correlational")
            for label in testbed.CLASSES for stat in ("precision", "recall"))


# ---- intervals


def _bootstrap(options: Mapping[str, Any]):
  def run(a: stats.Units, b: stats.Units | None = None):
    return stats.nested_bootstrap(a, b, seed=options["bootstrap_seed"],
                                  num_resamples=options["num_resamples"],
                                  confidence=options["confidence"])
  return run


def _finite(x: float) -> float | None:
  return float(x) if np.isfinite(x) else None


def _interval(result, k: int, seeds: int, over: str) -> dict | None:
  """Statistic k of a nested_bootstrap result as an interval object (module docstring)."""
  est, low, high = result
  if not np.isfinite(est[k]):
    return None
  none = over == "seeds" and seeds < 2
  return {"mean": float(est[k]), "low": None if none else _finite(low[k]),
          "high": None if none else _finite(high[k]), "seeds": seeds, "over": over}


def _over(seeds: int, units: str) -> str:
  return f"seeds and {units}" if seeds > 1 else f"{units} only"


def _seed_units(rows: Sequence[tuple[Sequence[float], Sequence[float]]]) -> stats.Units:
  """One unit per seed: seeds are the only thing resampled."""
  return stats.units_of([[("", num, den)] for num, den in rows])


# ---- (a), (b) held-out


def _answered(entry: Mapping) -> set[str]:
  return set(entry["seed_items"]) | set(entry["oracle_items"]) | set(entry["hacks"])


def _heldout_units(entries: Sequence[Mapping], domains: Mapping[str, str],
                   tasks: Sequence[str] | None = None) -> stats.Units:
  """Per seed's evaluation, one unit per task (stratum: its domain) with the statistics
  (oracle, seed, hack rate). A task weighs 1 / (its domain's tasks x domains), so each
  seed's ratio is eval/heldout's macro average; an invalid item weighs nothing."""
  seeds = []
  for e in entries:
    ids = sorted(_answered(e) if tasks is None else tasks)
    per_domain = collections.Counter(domains.get(t, "") for t in ids)
    units = []
    for t in ids:
      d = domains.get(t, "")
      w = 1.0 / (per_domain[d] * len(per_domain))
      o, s = e["oracle_items"].get(t), e["seed_items"].get(t)
      h, n = e["hacks"].get(t, (0, 0))
      units.append((d, [0.0 if o is None else w * o, 0.0 if s is None else w * s, h],
                    [0.0 if o is None else w, 0.0 if s is None else w, n]))
    seeds.append(units)
  return stats.units_of(seeds)


def _by_step(m: Mapping) -> dict[int, Mapping]:
  return {e[rf.STEP]: e for e in m["heldout"]}


def _heldout_curve(by_seed: Mapping[Any, Mapping], ref: Mapping[Any, Mapping] | None,
                   domains: Mapping[str, str], boot) -> list[dict]:
  """Per evaluated step: the arm's intervals, and the paired difference against `ref`
  (the reference arm's runs by seed; None for the reference itself)."""
  mine = {s: _by_step(m) for s, m in by_seed.items()}
  theirs = {s: _by_step(m) for s, m in (ref or {}).items()}
  out = []
  for step in sorted({st for e in mine.values() for st in e}):
    seeds = [s for s in mine if step in mine[s]]
    over = _over(len(seeds), "tasks")
    r = boot(_heldout_units([mine[s][step] for s in seeds], domains))
    row = {rf.STEP: step, "seeds": len(seeds), "oracle": _interval(r, 0, len(seeds), over),
           "seed": _interval(r, 1, len(seeds), over),
           "hack_rate": _interval(r, 2, len(seeds), over), "vs_reference": None}
    matched = [s for s in seeds if step in theirs.get(s, {})]
    if ref is not None and matched:
      tasks = sorted(set.intersection(*(_answered(x[s][step]) for x in (mine, theirs)
                                        for s in matched)))
      a = _heldout_units([mine[s][step] for s in matched], domains, tasks)
      b = _heldout_units([theirs[s][step] for s in matched], domains, tasks)
      d, over = boot(a, b), _over(len(matched), "tasks")
      hack_a, hack_b = stats.ratio_of_sums(a)[2], stats.ratio_of_sums(b)[2]
      row["vs_reference"] = {
          "seeds": len(matched), **{k: _interval(d, i, len(matched), over)
                                    for i, k in enumerate(("oracle", "seed", "hack_rate"))},
          "hack_ratio": float(hack_a / hack_b) if hack_b > 0 else None}
    out.append(row)
  return out


# ---- (b), (c) training groups


def _bin_width(measures: Sequence[Mapping], bins: int) -> int:
  last = max((e[rf.STEP] for m in measures for e in m["train"]), default=0)
  return max(1, math.ceil((last + 1) / max(1, bins)))


def _train_curve(by_seed: Mapping[Any, Mapping], width: int, boot) -> list[dict]:
  """Per bin of `width` steps: hack rate and class shares over the logged groups."""
  binned: dict[int, dict[Any, list[Mapping]]] = collections.defaultdict(
      lambda: collections.defaultdict(list))
  for seed, m in by_seed.items():
    for e in m["train"]:
      binned[e[rf.STEP] // width][seed].extend(e["groups"])
  out = []
  for b in sorted(binned):
    groups = list(binned[b].values())
    over = _over(len(groups), "groups")
    r = boot(stats.units_of([[("", [g["hacks"], *(g["classes"][c] for c in testbed.CLASSES)],
                                   [g["pairs"], *[g["instances"]] * len(testbed.CLASSES)])
                              for g in gs] for gs in groups]))
    out.append({"step_from": b * width, "step_to": b * width + width - 1,
                "seeds": len(groups), "hack_rate": _interval(r, 0, len(groups), over),
                "class_shares": {c: _interval(r, 1 + i, len(groups), over)
                                 for i, c in enumerate(testbed.CLASSES)}})
  return out


def _by_surface(by_seed: Mapping[Any, Mapping]) -> list[dict[str, Any]]:
  """Per evaluated step, per planted surface: [proxy met, oracle met, hacks, pairs] of the
  held-out answers, summed over seeds."""
  out: dict[int, dict[str, list[int]]] = {}
  for m in by_seed.values():
    for e in m["heldout"]:
      step = out.setdefault(e[rf.STEP], {})
      for surface, counts in (e.get("by_surface") or {}).items():
        step[surface] = [a + b for a, b in zip(step.get(surface, [0, 0, 0, 0]), counts)]
  return [{rf.STEP: s, "counts": dict(sorted(v.items()))} for s, v in sorted(out.items())]


def _by_kind(by_seed: Mapping[Any, Mapping]) -> dict[str, dict[str, int]]:
  out = {k: dict.fromkeys(testbed.CLASSES, 0) for k in testbed.KINDS}
  for m in by_seed.values():
    for e in m["train"]:
      for kind, counts in e["by_kind"].items():
        for c, n in counts.items():
          out[kind][c] += n
  return out


# ---- (d), (e), (f) over seeds


def _attributor(by_seed: Mapping[Any, Mapping], boot) -> dict | None:
  found = [m["attributor"] for m in by_seed.values() if m["attributor"] is not None]
  if not found:
    return None
  rows = []
  for a in found:
    num = [a[name][label]["tp"] for name, label, _ in _PR]
    den = [a[name][label]["tp"] + a[name][label]["fp" if stat == "precision" else "fn"]
           for name, label, stat in _PR]
    rows.append((num, den))
  r = boot(_seed_units(rows))
  out: dict[str, Any] = {"seeds": len(found), **{
      k: sum(a[k] for a in found) for k in ("rows", "matched", "no_truth", "unplanted",
                                            "spurious_unplanted", "intervened")}}
  for i, (name, label, stat) in enumerate(_PR):
    cell = out.setdefault(name, {}).setdefault(
        label, {k: sum(a[name][label][k] for a in found) for k in ("tp", "fp", "fn")})
    cell[stat] = _interval(r, i, len(found), "seeds")
  return out


def _measured(c: Mapping) -> int:
  return c["accepted"] - c["no_later_draw"] - c["not_logged"]


def _critic(by_seed: Mapping[Any, Mapping], boot) -> dict | None:
  found = [m["critic"] for m in by_seed.values() if m["critic"] is not None]
  if not found:
    return None
  r = boot(_seed_units([([c["followed_by_drop"]], [_measured(c)]) for c in found]))
  return {"seeds": len(found), **{k: sum(c.get(k, 0) for c in found) for k in (
      "accepted", "followed_by_drop", "no_later_draw", "not_logged", "offered")},
          "drop_rate": _interval(r, 0, len(found), "seeds")}


def _next_draw_lower(by_seed: Mapping[Any, Mapping], boot) -> dict | None:
  found = [m["next_draw"] for m in by_seed.values() if m.get("next_draw", {}).get("pairs")]
  if not found:
    return None
  r = boot(_seed_units([([n["lower"]], [n["pairs"]]) for n in found]))
  return _interval(r, 0, len(found), "seeds")


def _critic_comparison(arms: Mapping[str, Mapping[Any, Mapping]], pair: Sequence[str],
                       boot) -> dict | None:
  with_, without = (arms.get(a, {}) for a in pair)
  seeds = [s for s in with_ if s in without and with_[s]["critic"] is not None
           and without[s]["critic"] is not None]
  if not seeds:
    return None
  units = [_seed_units([([x[s]["critic"]["followed_by_drop"]], [_measured(x[s]["critic"])])
                        for s in seeds]) for x in (with_, without)]
  return {"with": pair[0], "without": pair[1], "seeds": len(seeds),
          "drop_rate_difference": _interval(boot(*units), 0, len(seeds), "seeds")}


def _cost(by_seed: Mapping[Any, Mapping], boot) -> dict | None:
  found = [m["cost"] for m in by_seed.values() if m["cost"] is not None]
  if not found:
    return None
  r = boot(_seed_units([([c["wall_s"] / 3600, c["evolver_s"]], [1.0, c["wall_s"]])
                        for c in found]))
  return {"seeds": len(found), "wall_hours": _interval(r, 0, len(found), "seeds"),
          "evolver_share": _interval(r, 1, len(found), "seeds")}


# ---- the whole experiment


def _headline(arm: str, seeds: int, held: Sequence[Mapping], train: Sequence[Mapping],
              attributor: Mapping | None) -> dict:
  final = next((h for h in reversed(held) if h["seeds"] == seeds), None)
  vs = (final or {}).get("vs_reference") or {}
  spurious = (attributor or {}).get("used", {}).get("spurious", {})
  return {"arm": arm, "seeds": seeds, "final_step": final and final[rf.STEP],
          "oracle": final and final["oracle"], "oracle_vs_reference": vs.get("oracle"),
          "seed": final and final["seed"], "hack_rate": final and final["hack_rate"],
          "hack_ratio_to_reference": vs.get("hack_ratio"),
          "train_hack_rate": train[-1]["hack_rate"] if train else None,
          "spurious_precision": spurious.get("precision"),
          "spurious_recall": spurious.get("recall")}


def _mismatches(runs: Sequence[Mapping]) -> list[dict]:
  """Evaluations whose recomputed seed score differs from the score the run logged."""
  return [{"arm": r["arm"], "seed": r["seed"], rf.STEP: e[rf.STEP], "seed_score": e["seed"],
           "run_score": e["run_score"]}
          for r in runs for e in r["measures"]["heldout"]
          if e["run_score"] is not None and (e["seed"] is None
                                             or abs(e["seed"] - e["run_score"]) > 1e-6)]


def summarize(measured: Sequence[tuple[str, Any, str, Mapping]], *, reference: str,
              domains: Mapping[str, str], truth_path: str, heldout_path: str,
              arms: Sequence[str] | None = None,
              critic_arms: Sequence[str] = CRITIC_ARMS, num_resamples: int = 2000,
              bootstrap_seed: int = 0, confidence: float = 0.95,
              train_bins: int = 20) -> dict:
  """report.json's content (module docstring) from (arm, seed, run_dir, measures) rows;
  `domains`: held-out task id -> domain; the paths are recorded (truth_path "": none)."""
  options = {"num_resamples": num_resamples, "bootstrap_seed": bootstrap_seed,
             "confidence": confidence}
  boot = _bootstrap(options)
  by_arm: dict[str, dict[Any, Mapping]] = collections.defaultdict(dict)
  for arm, seed, _, m in measured:
    by_arm[arm][seed] = m
  names = list(dict.fromkeys([*(arms or ()), reference, *(a for a, *_ in measured)]))
  width = _bin_width([m for *_, m in measured], train_bins)
  detail, headline = {}, []
  for arm in names:
    by_seed = by_arm.get(arm, {})
    held = _heldout_curve(by_seed, None if arm == reference else by_arm.get(reference, {}),
                          domains, boot)
    train = _train_curve(by_seed, width, boot)
    d = {"seeds": list(by_seed), "heldout": held, "by_surface": _by_surface(by_seed),
         "train": train,
         "by_kind": _by_kind(by_seed), "attributor": _attributor(by_seed, boot),
         "critic": _critic(by_seed, boot), "next_draw_lower": _next_draw_lower(by_seed, boot),
         "cost": _cost(by_seed, boot)}
    detail[arm] = d
    headline.append(_headline(arm, len(by_seed), held, train, d["attributor"]))
  # Per-group rows stay out of report.json (run_measures recomputes them): they are most
  # of its size.
  runs = [{"arm": a, "seed": s, "run_dir": r, "measures": {**m, "train": [
      {k: v for k, v in e.items() if k != "groups"} for e in m["train"]]}}
          for a, s, r, m in measured]
  return {"reference": reference, "arms": names, **options, "truth_path": truth_path,
          "heldout_path": heldout_path, "train_bin_width": width,
          "headline": headline, "arms_detail": detail,
          "critic_comparison": _critic_comparison(by_arm, critic_arms, boot),
          "seed_mismatches": _mismatches(runs), "runs": runs}


# ---- plots


def _plots(summary: Mapping, out_dir: str) -> dict[str, str]:
  """Writes the experiment's figures into out_dir; returns file name -> path of those made."""
  figs = Figures(out_dir)
  detail = summary["arms_detail"]
  held = {a: d["heldout"] for a, d in detail.items() if d["heldout"]}
  train = {a: d["train"] for a, d in detail.items() if d["train"]}
  if held:
    _heldout_figure(figs, held)
  if held or train:
    _hack_rate_figure(figs, held, train)
  if train:
    _class_share_figure(figs, train)
  return figs.made


def _curve(ax, x, ivs, label, scale=1.0) -> None:
  """One arm's interval means as a line, its [low, high] band shaded where known."""
  pts = [(s, iv) for s, iv in zip(x, ivs) if iv is not None]
  if not pts:
    return
  xs = [s for s, _ in pts]
  line, = ax.plot(xs, [scale * iv["mean"] for _, iv in pts], marker="o", label=label)
  band = [(s, iv) for s, iv in pts if iv["low"] is not None]
  if band:
    ax.fill_between([s for s, _ in band], [scale * iv["low"] for _, iv in band],
                    [scale * iv["high"] for _, iv in band], color=line.get_color(),
                    alpha=0.2)


def _heldout_figure(figs: Figures, held: Mapping) -> None:
  """heldout_scores.png: per arm, held-out points under the oracle and the seed rubric."""
  fig, axes = figs.plt.subplots(1, 2, figsize=(12, 4))
  for ax, key, title in zip(axes, ("oracle", "seed"), ("Oracle rubric", "Seed rubric")):
    for arm, rows in held.items():
      _curve(ax, [r[rf.STEP] for r in rows], [r[key] for r in rows], arm)
    ax.set(xlabel="completed steps", ylabel="held-out points (0-100)", title=title)
    ax.legend(fontsize=8)
  figs.save(fig, "heldout_scores.png")


def _hack_rate_figure(figs: Figures, held: Mapping, train: Mapping) -> None:
  """hack_rates.png: per arm, held-out and training hack rates."""
  fig, axes = figs.plt.subplots(1, 2, figsize=(12, 4))
  for arm, rows in held.items():
    _curve(axes[0], [r[rf.STEP] for r in rows], [r["hack_rate"] for r in rows], arm, 100)
  for arm, rows in train.items():
    _curve(axes[1], [r["step_from"] for r in rows], [r["hack_rate"] for r in rows], arm, 100)
  for ax, title, x in ((axes[0], "Held-out hack rate", "completed steps"),
                       (axes[1], "Training hack rate", "steps from")):
    ax.set(xlabel=x, ylabel="% of (response, planted spurious) pairs", title=title)
    ax.legend(fontsize=8)
  figs.save(fig, "hack_rates.png")


def _class_share_figure(figs: Figures, train: Mapping) -> None:
  """class_shares.png: per planted class, its share of planted criteria in groups."""
  fig, axes = figs.plt.subplots(2, 2, figsize=(12, 8))
  for ax, c in zip(axes.flat, testbed.CLASSES):
    for arm, rows in train.items():
      _curve(ax, [r["step_from"] for r in rows], [r["class_shares"][c] for r in rows], arm,
             100)
    ax.set(xlabel="steps from", ylabel="% of planted criteria in groups", title=c)
    ax.legend(fontsize=8)
  figs.save(fig, "class_shares.png")


# ---- markdown


def _fmt(iv: Mapping | None, scale: float = 1.0, digits: int = 1) -> str:
  """An interval as "mean [low, high]" (scaled), "n/a" when absent; a dagger marks one
  resting on fewer than 3 seeds."""
  if iv is None:
    return "n/a"
  text = f"{scale * iv['mean']:.{digits}f}"
  if iv["low"] is not None:
    text += f" [{scale * iv['low']:.{digits}f}, {scale * iv['high']:.{digits}f}]"
  return text + (" †" if iv["seeds"] < _FEW_SEEDS else "")


def _num(x: Any, digits: int = 2) -> str:
  return "n/a" if x is None else f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
  return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
          + ["| " + " | ".join(row) + " |" for row in rows] + [""])


def _intro(summary: Mapping) -> list[str]:
  detail, ref = summary["arms_detail"], summary["reference"]
  lines = [] if summary["truth_path"] else [
      "No truth file: nothing is planted, so the oracle rubric is the seed rubric and hack "
      "rates, truth classes and the attributor's grades are n/a.", ""]
  lines += ["Arms (seeds): " + ", ".join(f"{a} ({len(d['seeds'])})" for a, d in
                                          detail.items()) + f". Reference arm: {ref}.", "",
           f"Means over seeds with {100 * summary['confidence']:.0f}% percentile intervals "
           f"from {summary['num_resamples']} bootstrap resamples (seed "
           f"{summary['bootstrap_seed']}): seeds with replacement, and within each seed its "
           "held-out tasks (within domains) or logged groups with replacement; differences "
           f"against {ref} are paired (the same seeds, tasks and draws for both arms). "
           "Attributor, critic and cost intervals are over seeds only. Rates are in %; "
           "scores in points (0-100).", ""]
  for arm, d in detail.items():
    k = len(d["seeds"])
    if k == 0:
      lines.append(f"- {arm}: no runs; its numbers are n/a.")
    elif k < _FEW_SEEDS:
      lines.append(f"- {arm}: {k} seed{'s' if k > 1 else ''} only, fewer than 3: its numbers "
                   "(marked †) are rough" + ("; its intervals are over tasks (or groups) "
                                            "only." if k == 1 else "."))
  return lines + ([""] if lines[-1] else [])


def _headline_section(summary: Mapping) -> list[str]:
  rows = [[h["arm"], str(h["seeds"]), _num(h["final_step"]), _fmt(h["oracle"]),
           "reference" if h["arm"] == summary["reference"] else _fmt(h["oracle_vs_reference"]),
           _fmt(h["seed"]), _fmt(h["hack_rate"], 100),
           "1" if h["arm"] == summary["reference"] else _num(h["hack_ratio_to_reference"]),
           _fmt(h["train_hack_rate"], 100), _fmt(h["spurious_precision"], 100),
           _fmt(h["spurious_recall"], 100)] for h in summary["headline"]]
  return _table(["arm", "seeds", "final step", "oracle held-out",
                 f"oracle - {summary['reference']} (paired)", "seed held-out",
                 "held-out hack %", "hack ratio to ref", "train hack % (last bin)",
                 "attributor spurious P %", "R %"], rows) + [
      "Final step: the last evaluation every seed of the arm has. † fewer than 3 seeds.", ""]


def _heldout_section(summary: Mapping, plots: Mapping) -> list[str]:
  lines = []
  for arm, d in summary["arms_detail"].items():
    lines += [f"**{arm}**", ""]
    if not d["heldout"]:
      lines += ["n/a (no held-out evaluations)", ""]
      continue
    lines += _table(["step", "seeds", "oracle", "seed", "hack %", "oracle - ref", "hack ratio"],
                    [[str(r[rf.STEP]), str(r["seeds"]), _fmt(r["oracle"]), _fmt(r["seed"]),
                      _fmt(r["hack_rate"], 100),
                      _fmt((r["vs_reference"] or {}).get("oracle")),
                      _num((r["vs_reference"] or {}).get("hack_ratio"))]
                     for r in d["heldout"]])
    surfaces = sorted({s for r in d["by_surface"] for s in r["counts"]})
    if surfaces:
      lines += ["Per planted surface, held-out answers summed over seeds: proxy met / oracle "
                "met / hacked, of the pairs.", ""]
      lines += _table(["step", *surfaces], [
          [str(r[rf.STEP]), *("{} / {} / {} of {}".format(*r["counts"][s])
                              if s in r["counts"] else "n/a" for s in surfaces)]
          for r in d["by_surface"]])
  for name in ("heldout_scores.png", "hack_rates.png"):
    if name in plots:
      lines += [f"![{name[:-4]}]({name})", ""]
  return lines


def _train_section(summary: Mapping, plots: Mapping) -> list[str]:
  lines = ["Over (logged group, planted criterion) instances, by our per-group truth rule "
           "(eval/testbed.py): spurious if a response passes the proxy and fails the oracle; "
           "else blind if none meets the oracle; else saturated if all do; else agree. "
           "Hack %: of (response, planted spurious criterion) pairs.", ""]
  for arm, d in summary["arms_detail"].items():
    lines += [f"**{arm}**", ""]
    if not d["train"]:
      lines += ["n/a (no logged groups)", ""]
      continue
    lines += _table(["steps", "seeds", "hack %", *testbed.CLASSES],
                    [[f"{r['step_from']}-{r['step_to']}", str(r["seeds"]),
                      _fmt(r["hack_rate"], 100),
                      *(_fmt(r["class_shares"][c], 100) for c in testbed.CLASSES)]
                     for r in d["train"]])
    lines += ["Planted kind x observed class (instances, all steps and seeds):", ""]
    lines += _table(["planted", *testbed.CLASSES],
                    [[k, *(str(d["by_kind"][k][c]) for c in testbed.CLASSES)]
                     for k in testbed.KINDS])
  if "class_shares.png" in plots:
    lines += ["![class shares](class_shares.png)", ""]
  return lines


def _attributor_section(summary: Mapping) -> list[str]:
  lines = ["Attributor labels on planted criteria against the truth class of the step's "
           "logged responses to the task. Without intervention: the label before the "
           "interventional test where it ran (the label used elsewhere). Pooled counts; "
           "intervals over seeds.", ""]
  for arm, d in summary["arms_detail"].items():
    a = d["attributor"]
    if a is None:
      lines += [f"**{arm}**: n/a (no attributions)", ""]
      continue
    lines += [f"**{arm}**: {a['matched']} labels graded ({a['intervened']} with the "
              f"intervention), {a['no_truth']} at steps without logged groups; "
              f"{a['spurious_unplanted']} spurious labels on criteria that are not planted "
              f"(of {a['unplanted']} labels there), not counted as errors.", ""]
    lines += _table(["label", "P % (used)", "R % (used)", "P % (without)", "R % (without)"],
                    [[label, *(_fmt(a[name][label][stat], 100)
                               for name in ("used", "correlational")
                               for stat in ("precision", "recall"))]
                     for label in testbed.CLASSES])
  return lines


def _critic_section(summary: Mapping) -> list[str]:
  lines = ["An accepted update is followed by a drop when the task's next logged group has a "
           "lower mean oracle reward than its group at the update's step. Repairs offered "
           "from another task (evolver.transfer_tasks) are counted apart: their task was "
           "not drawn at that step. The base rate is the same measure over every pair of "
           "consecutive draws of a task, updated in between or not (an arm without the "
           "evolver has it too): a drop rate at the base rate says the next draw cannot "
           "tell the accepted updates from no update.", ""]
  rows = []
  for arm, d in summary["arms_detail"].items():
    c = d["critic"]
    rows.append([arm] + (["n/a"] * 7 if c is None else [
        str(c["accepted"]), str(_measured(c)), str(c["followed_by_drop"]),
        _fmt(c["drop_rate"], 100), str(c["no_later_draw"]), str(c["not_logged"]),
        str(c["offered"])]) + [_fmt(d.get("next_draw_lower"), 100)])
  lines += _table(["arm", "accepted", "measured", "followed by drop", "drop %",
                   "no later draw", "not logged", "offered repairs accepted",
                   "base rate: any next draw lower %"], rows)
  cmp = summary["critic_comparison"]
  lines.append("With vs without the critic: " + (
      "n/a (no seed has both arms' candidates)" if cmp is None else
      f"{cmp['with']} - {cmp['without']} drop rate {_fmt(cmp['drop_rate_difference'], 100)} "
      f"points over {cmp['seeds']} paired seed(s)") + ".")
  return lines + [""]


def _cost_section(summary: Mapping) -> list[str]:
  rows = [[arm, "n/a", "n/a"] if d["cost"] is None else
          [arm, _fmt(d["cost"]["wall_hours"], 1, 3), _fmt(d["cost"]["evolver_share"], 100)]
          for arm, d in summary["arms_detail"].items()]
  return _table(["arm", "wall hours per run", "evolver % of wall time"], rows)


def _checks_section(summary: Mapping) -> list[str]:
  lines = []
  bad = summary["seed_mismatches"]
  lines.append("Recomputed seed scores match the runs' logged held-out scores." if not bad
               else f"{len(bad)} evaluations whose recomputed seed score differs from the "
                    "run's logged one (a criterion the run's judge decided without a check?):")
  lines += [f"- {b['arm']} seed {b['seed']} step {b[rf.STEP]}: {_num(b['seed_score'])} vs "
            f"{_num(b['run_score'])}" for b in bad[:20]]
  for r in summary["runs"]:
    m = r["measures"]
    if m["absent"] or m["problems"]:
      lines.append(f"- {r['arm']} seed {r['seed']} ({r['run_dir']}): "
                   + "; ".join((["absent: " + ", ".join(m["absent"])] if m["absent"] else [])
                               + m["problems"][:10])
                   + (f"; and {len(m['problems']) - 10} more" if len(m["problems"]) > 10
                      else ""))
  return lines + [""]


def render(summary: Mapping, plots: Mapping) -> str:
  """report.md's text."""
  sections = [("Headline (final step)", _headline_section(summary)),
              ("Held-out scores and hack rate", _heldout_section(summary, plots)),
              ("Training: hack rate and truth classes", _train_section(summary, plots)),
              ("Attributor", _attributor_section(summary)),
              ("Critic regressions", _critic_section(summary)),
              ("Cost", _cost_section(summary)),
              ("Checks and missing files", _checks_section(summary))]
  lines = ["# Experiment report", "", *_intro(summary)]
  for title, body in sections:
    lines += [f"## {title}", "", *body]
  return "\n".join(lines)


def write_report(workdir: str, runs: Sequence[tuple[str, Any, str]], *,
                 reference: str = "grpo_static", truth_path: str, heldout_path: str,
                 train_path: str | None = None, arms: Sequence[str] | None = None,
                 critic_arms: Sequence[str] = CRITIC_ARMS, num_resamples: int = 2000,
                 bootstrap_seed: int = 0, confidence: float = 0.95,
                 train_bins: int = 20) -> str:
  """Writes WORKDIR/report.md, its PNGs and WORKDIR/report.json for `runs`, a list of
  (arm, seed, run_dir); returns report.md's path. `truth_path` "": no truth file, so
  nothing is planted (the oracle rubric is the seed rubric; hack rates, classes and the
  attributor's grades are n/a). `arms`: arms to list even without runs
  (the reference always is); `train_path`: the training tasks, else read from the logged
  groups; `train_bins`: about how many bins of steps the training curves have.

  Raises:
    DataError: the truth or task files are malformed, or disagree.
  """
  os.makedirs(workdir, exist_ok=True)
  truth = testbed.load_truth(truth_path) if truth_path else testbed.Truth(())
  heldout_tasks = load_tasks(heldout_path)
  tasks = {t.id: t for t in (*heldout_tasks, *(load_tasks(train_path) if train_path else ()))}
  measured = [(arm, seed, run_dir, testbed.run_measures(run_dir, truth, tasks))
              for arm, seed, run_dir in runs]
  summary = summarize(measured, reference=reference,
                      domains={t.id: t.domain for t in heldout_tasks},
                      truth_path=truth_path, heldout_path=heldout_path, arms=arms,
                      critic_arms=critic_arms, num_resamples=num_resamples,
                      bootstrap_seed=bootstrap_seed, confidence=confidence,
                      train_bins=train_bins)
  with open(os.path.join(workdir, rf.REPORT_JSON), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=1, allow_nan=False)
  path = os.path.join(workdir, rf.REPORT)
  with open(path, "w", encoding="utf-8") as f:
    f.write(render(summary, _plots(summary, workdir)))
  return path

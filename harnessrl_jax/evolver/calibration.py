"""Cold start: the null measurement that sets the critic's bands and the sampling ladder.

For each task of (a subset of) the training pool, with H_0 and the initial policy:
  group A  J responses, graded;
  group B  fresh responses under the same harness (re-sample without changes), as many as
           the critic's guidance re-sample draws (evolver.resample_j; J when 0): the null
           is then the variation of the very measurement the band judges (mean of the
           re-sample minus mean of the recorded group);
  regrade  group A graded again by a judge without a verdict cache (regrade without
           changes).
Null variations, in points (reward x Lambda): |mean B - mean A| for guidance,
|mean regrade - mean A| for rubric. Bands: lower bound = 95th percentile of the null
variation (floored at evolver.calibrate_min_band: a greedy judge regrades with zero
variation, and a zero bound would accept any change), upper bound = the median
within-group reward range of group A (max - min over J), at least the lower bound.

Ladder (design choice; the paper gives only its result 1 > 0.61 > 0.38 > 0.17): for each
task, u = the share of its positive weight on criteria NOT saturated in group A (what a
group of it can still teach). Over tasks with 0 < u < 1, gamma_1..3 = the 75th, 50th and
25th percentiles of u: a task one level down is drawn as often as a typical task with that
much left to learn. Too few such tasks, or levels that do not strictly decrease, keep the
configured ladder (recorded as such).

calibration.json (in the run directory) holds bands, ladder, the null statistics, the
per-task measurements and, per judged batch kind (group A, group B, regrade), the cells the
judge left without a verdict (an unscored record: count, share, cells, causes). The
judge's limit (judge.max_unscored_share) applies to each batch; past it the pass stops
with a JudgeError that names the calibration. `read_calibration` is what training reads.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.evolver.measure import sample_groups
from harnessrl_jax.harness.state import Harness, check_ladder
from harnessrl_jax.judges.grading import grade
from harnessrl_jax.judges.judge import Judge, JudgeError
from harnessrl_jax.judges.score_matrix import Unscored

FORMAT = "harnessrl_jax.calibration/1"
FILENAME = "calibration.json"
# The judged batches of the pass, as calibration.json's "unscored" keys.
UNSCORED_BATCHES = ("group_a", "group_b", "regrade")


@dataclasses.dataclass(frozen=True)
class Calibration:
  bands: dict[str, tuple[float, float]]
  ladder: tuple[float, ...]
  ladder_source: str
  stats: dict[str, float]
  per_task: tuple[dict[str, Any], ...] = ()
  unscored: dict[str, Unscored] = dataclasses.field(default_factory=dict)   # batch -> lost

  def to_json(self) -> dict[str, Any]:
    return {"format": FORMAT, "bands": {k: list(v) for k, v in sorted(self.bands.items())},
            "ladder": list(self.ladder), "ladder_source": self.ladder_source,
            "stats": self.stats, "per_task": list(self.per_task),
            "unscored": {k: v.to_json() for k, v in sorted(self.unscored.items())}}


def _mean(x: np.ndarray, valid: np.ndarray) -> float:
  return float(x[valid].mean()) if valid.any() else float("nan")


def uncached(judge: Judge) -> Judge:
  """The same judge without a verdict cache (a regrade then asks again)."""
  return Judge(judge.client, use_checks=judge.use_checks, settings=judge.settings,
               cache_size=0)


def unsaturated_share(weights: np.ndarray, satisfied: np.ndarray) -> float:
  """Share of positive weight on criteria not satisfied by every scored rollout."""
  pos = np.maximum(weights, 0.0)
  if pos.sum() <= 0:
    return float("nan")
  saturated = np.array([(row[row >= 0] == 1).all() and (row >= 0).any() for row in satisfied])
  return float(pos[~saturated].sum() / pos.sum())


def bands_and_ladder(guidance_null: Sequence[float], rubric_null: Sequence[float],
                     ranges: Sequence[float], shares: Sequence[float], *, min_band: float,
                     default_ladder: Sequence[float]) -> Calibration:
  """The pure statistics step of the cold start (inputs in points; shares in [0, 1])."""
  g = np.asarray([x for x in guidance_null if math.isfinite(x)], np.float64)
  r = np.asarray([x for x in rubric_null if math.isfinite(x)], np.float64)
  rg = np.asarray([x for x in ranges if math.isfinite(x)], np.float64)
  if not len(g) or not len(rg):
    raise ConfigError("cold start: no task produced a valid reward; check the judge and "
                      "the data (judge.max_unscored_share, criteria with checks)")
  g95 = float(np.percentile(g, 95))
  r95 = float(np.percentile(r, 95)) if len(r) else 0.0
  median_range = float(np.median(rg))
  lo_g, lo_r = max(g95, min_band), max(r95, min_band)
  bands = {"guidance": (round(lo_g, 6), round(max(median_range, lo_g), 6)),
           "rubric": (round(lo_r, 6), round(max(median_range, lo_r), 6))}
  u = np.asarray([x for x in shares if math.isfinite(x) and 0 < x < 1], np.float64)
  ladder, source = tuple(float(x) for x in default_ladder), "configured"
  if len(default_ladder) != 4:
    source = "configured (the measured ladder has 4 levels; the configured one does not)"
  elif len(u) >= 3:
    cand = (1.0, *(round(float(np.percentile(u, q)), 6) for q in (75, 50, 25)))
    try:
      check_ladder(cand)
      ladder, source = cand, f"measured over {len(u)} tasks"
    except Exception:  # pylint: disable=broad-except
      source = f"configured (measured levels {cand} do not strictly decrease)"
  else:
    source = f"configured (only {len(u)} tasks with 0 < unsaturated share < 1)"
  stats = {"guidance_null_p95": round(g95, 6), "rubric_null_p95": round(r95, 6),
           "median_range": round(median_range, 6), "tasks": int(len(rg))}
  return Calibration(bands, ladder, source, stats)


def null_measurement(tasks, h: Harness, resample, judge: Judge, key: jax.Array,
                     num_samples: int, *, min_band: float, default_ladder,
                     batch_size: int = 8, resample_samples: int = 0) -> Calibration:
  """Runs the cold-start pass over `tasks` (batches of `batch_size` tasks): groups A of
  `num_samples`, groups B of `resample_samples` (0: `num_samples`)."""
  resample_samples = resample_samples or num_samples
  lam = h.total_weight
  fresh = uncached(judge)
  g_null, r_null, ranges, shares, per_task = [], [], [], [], []
  lost = {name: Unscored() for name in UNSCORED_BATCHES}
  for start in range(0, len(tasks), batch_size):
    batch = list(tasks[start:start + batch_size])
    ka, kb = jax.random.split(jax.random.fold_in(key, start))
    try:
      a, judged_a = sample_groups(batch, h, resample, judge, ka, num_samples)
      b, judged_b = sample_groups(batch, h, resample, judge, kb, resample_samples)
      crits = [g.criteria for g in a]
      judged = grade(fresh, batch, [g.responses for g in a], crits)
    except JudgeError as e:
      raise JudgeError(f"calibration, tasks {start + 1}-{start + len(batch)}: {e}",
                       e.unscored) from None
    for name, j in zip(UNSCORED_BATCHES, (judged_a, judged_b, judged)):
      lost[name] = lost[name] + j.unscored
    for i, (ga, gb) in enumerate(zip(a, b)):
      va = _valid(ga)
      ra, rb, rr = _mean(ga.rewards, va), _mean(gb.rewards, _valid(gb)), judged.mean_reward(i)
      rng = float(ga.rewards[va].max() - ga.rewards[va].min()) * lam if va.any() else float("nan")
      share = unsaturated_share(np.array([c.weight for c in ga.criteria]), ga.satisfied())
      g_null.append(abs(rb - ra) * lam)
      r_null.append(abs(rr - ra) * lam)
      ranges.append(rng)
      shares.append(share)
      per_task.append({"task_id": ga.task_id, "reward_a": _r(ra), "reward_b": _r(rb),
                       "reward_regrade": _r(rr), "range_points": _r(rng),
                       "unsaturated_share": _r(share)})
  cal = bands_and_ladder(g_null, r_null, ranges, shares, min_band=min_band,
                         default_ladder=default_ladder)
  stats = dict(cal.stats, group_a_samples=int(num_samples),
               group_b_samples=int(resample_samples))
  return dataclasses.replace(cal, stats=stats, per_task=tuple(per_task), unscored=lost)


def _valid(g) -> np.ndarray:
  """Rollouts with a defined reward: some positive-weight criterion scored."""
  pos = np.array([c.weight > 0 for c in g.criteria], bool)[:, None]
  return (g.scored & pos).any(axis=0)


def _r(x: float) -> float | None:
  return round(float(x), 6) if math.isfinite(x) else None


def write_calibration(cal: Calibration, workdir: str) -> str:
  os.makedirs(workdir, exist_ok=True)
  path = os.path.join(workdir, FILENAME)
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(cal.to_json(), f, indent=1, sort_keys=True, allow_nan=False)
  os.replace(tmp, path)
  return path


def read_calibration(path: str) -> Calibration:
  """Reads calibration.json (a file, or a run directory holding one)."""
  if os.path.isdir(path):
    path = os.path.join(path, FILENAME)
  try:
    with open(path, encoding="utf-8") as f:
      obj = json.load(f)
  except (OSError, json.JSONDecodeError) as e:
    raise ConfigError(f"evolver.calibration_path: cannot read {path}: {e}; run "
                      "`python -m harnessrl_jax.calibrate` first") from None
  if obj.get("format") != FORMAT:
    raise ConfigError(f"{path}: format {obj.get('format')!r}, expected {FORMAT!r}")
  bands = {k: (float(v[0]), float(v[1])) for k, v in obj["bands"].items()}
  return Calibration(bands, tuple(float(x) for x in obj["ladder"]), obj["ladder_source"],
                     obj["stats"], tuple(obj.get("per_task", ())),
                     {k: Unscored.from_json(v) for k, v in obj.get("unscored", {}).items()})

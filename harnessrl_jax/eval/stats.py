"""Comparing two runs or checkpoints on the same items: paired bootstrap and permutation test.

Scores are paired: a[i] and b[i] belong to the same item (and, for 2-D input [items, seeds],
a[i, s] and b[i, s] to the same item and seed). The statistic is mean(a - b).
  - paired_bootstrap: resamples items with replacement (and, for 2-D input, seeds too,
    independently: the paper's "item-and-seed resamples") and reports the percentile
    interval of the resampled mean differences.
  - permutation_test: under H0 the two systems are exchangeable per item, so each item's
    pair is swapped (its difference's sign flipped) at random; the two-sided p-value is
    (1 + #{|mean d*| >= |mean d|}) / (1 + num_permutations), never 0.
  - nested_bootstrap: for repeated runs (seeds) whose numbers are ratios of sums over units
    (tasks, groups): resamples seeds, and units within each drawn seed, each within its
    stratum; paired by applying the same draws to two systems laid out alike.
Every function takes an explicit seed for its numpy Generator.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from harnessrl_jax.errors import HarnessError


@dataclasses.dataclass(frozen=True)
class Interval:
  difference: float   # mean(a - b) on the data
  low: float
  high: float
  confidence: float
  num_resamples: int


def _paired(a, b) -> np.ndarray:
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if a.shape != b.shape or a.ndim not in (1, 2) or a.shape[0] < 2:
    raise HarnessError(f"paired scores need equal shapes [items] or [items, seeds] with at "
                       f"least 2 items; got {a.shape} and {b.shape}")
  if not (np.isfinite(a).all() and np.isfinite(b).all()):
    raise HarnessError("paired scores contain NaN or inf; drop unscored items first")
  return a - b


def paired_bootstrap(a, b, *, seed: int, num_resamples: int = 10_000,
                     confidence: float = 0.95, chunk: int = 1000) -> Interval:
  """Percentile bootstrap interval of mean(a - b)."""
  d = _paired(a, b)
  if d.ndim == 1:
    d = d[:, None]
  rng = np.random.default_rng(seed)
  n, s = d.shape
  means = np.empty(num_resamples)
  for start in range(0, num_resamples, chunk):  # bounded memory for large item counts
    m = min(chunk, num_resamples - start)
    rows = rng.integers(0, n, size=(m, n))
    cols = rng.integers(0, s, size=(m, s)) if s > 1 else np.zeros((m, 1), np.int64)
    means[start:start + m] = d[rows[:, :, None], cols[:, None, :]].mean(axis=(1, 2))
  alpha = (1.0 - confidence) / 2
  low, high = np.quantile(means, [alpha, 1 - alpha])
  return Interval(float(d.mean()), float(low), float(high), confidence, num_resamples)


def permutation_test(a, b, *, seed: int, num_permutations: int = 10_000,
                     chunk: int = 1000) -> float:
  """Two-sided paired (sign-flip) permutation p-value for mean(a - b) != 0."""
  d = _paired(a, b)
  d = d.mean(axis=1) if d.ndim == 2 else d  # seeds of one item move together
  observed = abs(d.mean())
  rng = np.random.default_rng(seed)
  hits = 0
  for start in range(0, num_permutations, chunk):
    m = min(chunk, num_permutations - start)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(m, d.size))
    # A tolerance so that ties with the observed value count as "at least as extreme".
    hits += int((np.abs((signs * d).mean(axis=1)) >= observed - 1e-12).sum())
  return (1 + hits) / (1 + num_permutations)


def compare(a, b, *, seed: int, num_resamples: int = 10_000) -> dict:
  """Bootstrap interval and permutation p-value as one JSON-ready dict."""
  ci = paired_bootstrap(a, b, seed=seed, num_resamples=num_resamples)
  p = permutation_test(a, b, seed=seed + 1, num_permutations=num_resamples)
  return {"difference": ci.difference, "ci_low": ci.low, "ci_high": ci.high,
          "confidence": ci.confidence, "p_value": p, "num_items": int(np.shape(a)[0]),
          "num_resamples": num_resamples}


# ---- nested bootstrap of ratio statistics, over seeds and the units within them
#
# A testbed experiment repeats a run over seeds, and each run's numbers are sums over units
# (held-out tasks, logged groups): a score, a hack rate or a class share is a ratio of sums
# sum(num) / sum(den). One resample draws the seeds with replacement and, within each drawn
# seed, its units with replacement inside their stratum (a task's domain), so a resample
# keeps each stratum's size; with one seed it resamples units only. Paired: two systems laid
# out alike (the same seeds and units in the same places) get the SAME draws, and the
# statistic is the difference of their ratios.


@dataclasses.dataclass(frozen=True)
class Units:
  """Per seed s, units i < (size[s] > 0).sum(), sorted by stratum, each with numerators
  num[s, i, c] and denominators den[s, i, c] of C statistics; unit i's stratum occupies
  indices [lo[s, i], lo[s, i] + size[s, i]). Padding has size 0."""

  num: np.ndarray    # [S, U, C] float64
  den: np.ndarray    # [S, U, C] float64
  lo: np.ndarray     # [S, U] int64
  size: np.ndarray   # [S, U] int64


def units_of(seeds) -> Units:
  """Units from, per seed, a list of (stratum, num [C], den [C]); every unit of every seed
  has the same C. Units are ordered by stratum (stably), so two seeds listed alike are laid
  out alike."""
  seeds = [sorted(units, key=lambda u: str(u[0])) for units in seeds]
  c = next((len(u[1]) for units in seeds for u in units), 0)
  s, n = len(seeds), max((len(units) for units in seeds), default=0)
  num, den = np.zeros((s, n, c)), np.zeros((s, n, c))
  lo, size = np.zeros((s, n), np.int64), np.zeros((s, n), np.int64)
  for i, units in enumerate(seeds):
    strata = [str(u[0]) for u in units]
    for j, (stratum, x, y) in enumerate(units):
      num[i, j], den[i, j] = x, y
      lo[i, j], size[i, j] = strata.index(str(stratum)), strata.count(str(stratum))
  return Units(num, den, lo, size)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
  with np.errstate(invalid="ignore", divide="ignore"):
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def ratio_of_sums(u: Units) -> np.ndarray:
  """[C]: sum(num) / sum(den) over all seeds and units (NaN where the sum of den is 0)."""
  return _ratio(u.num.sum(axis=(0, 1)), u.den.sum(axis=(0, 1)))


def _resampled(u: Units, seeds: np.ndarray, uniform: np.ndarray) -> np.ndarray:
  """[m, C] ratios of m resamples: seeds [m, S] drawn seed indices, uniform [m, S, U] in
  [0, 1) picking each slot's unit within its stratum."""
  lo, size = u.lo[seeds], u.size[seeds]
  pick = lo + np.minimum((uniform * size).astype(np.int64), np.maximum(size - 1, 0))
  live = (size > 0)[..., None]
  rows = seeds[..., None]
  return _ratio(np.where(live, u.num[rows, pick], 0.0).sum(axis=(1, 2)),
                np.where(live, u.den[rows, pick], 0.0).sum(axis=(1, 2)))


def nested_bootstrap(a: Units, b: Units | None = None, *, seed: int,
                     num_resamples: int = 2000, confidence: float = 0.95,
                     chunk: int = 250) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(estimate, low, high), each [C]: the ratios of `a`, or with `b` the paired difference
  ratio(a) - ratio(b) on the same draws, and the percentile interval of the resamples.
  Resamples whose ratio is undefined (no denominator drawn) are left out; NaN where all
  are, or where the data's own ratio is undefined."""
  if b is not None and (a.lo.shape != b.lo.shape or a.num.shape != b.num.shape
                        or not np.array_equal(a.size, b.size)
                        or not np.array_equal(a.lo, b.lo)):
    raise HarnessError("paired units must be laid out alike (the same seeds and units)")
  estimate = ratio_of_sums(a) - (0.0 if b is None else ratio_of_sums(b))
  s, n = a.size.shape
  if s == 0 or n == 0:
    nan = np.full(a.num.shape[2], np.nan)
    return estimate, nan, nan.copy()
  rng = np.random.default_rng(seed)
  out = []
  for start in range(0, num_resamples, chunk):   # bounded memory for many units
    m = min(chunk, num_resamples - start)
    seeds, uniform = rng.integers(0, s, size=(m, s)), rng.random((m, s, n))
    r = _resampled(a, seeds, uniform)
    out.append(r if b is None else r - _resampled(b, seeds, uniform))
  draws = np.concatenate(out)
  alpha = (1.0 - confidence) / 2
  low, high = np.full(len(estimate), np.nan), np.full(len(estimate), np.nan)
  for k in range(len(estimate)):
    ok = draws[:, k][np.isfinite(draws[:, k])]
    if ok.size and np.isfinite(estimate[k]):
      low[k], high[k] = np.quantile(ok, [alpha, 1 - alpha])
  return estimate, low, high

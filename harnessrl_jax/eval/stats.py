"""Comparing two runs or checkpoints on the same items: paired bootstrap and permutation test.

Scores are paired: a[i] and b[i] belong to the same item (and, for 2-D input [items, seeds],
a[i, s] and b[i, s] to the same item and seed). The statistic is mean(a - b).
  - paired_bootstrap: resamples items with replacement (and, for 2-D input, seeds too,
    independently: the paper's "item-and-seed resamples") and reports the percentile
    interval of the resampled mean differences.
  - permutation_test: under H0 the two systems are exchangeable per item, so each item's
    pair is swapped (its difference's sign flipped) at random; the two-sided p-value is
    (1 + #{|mean d*| >= |mean d|}) / (1 + num_permutations), never 0.
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

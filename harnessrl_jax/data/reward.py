"""Rubric reward over a judge's score matrix, vectorised over (tasks, criteria, rollouts).

    r_j = sum_m lambda_m s_mj / sum_m max(lambda_m, 0)          (HealthBench convention)

Unscored cells (the judge gave no parseable verdict) are never read as 0 or 1. A rollout's
reward is computed over the criteria that WERE scored for it, numerator and denominator
alike, so a missing verdict neither rewards nor punishes:

    r_j = sum_{m scored} lambda_m s_mj / sum_{m scored} max(lambda_m, 0)

If no positive-weight criterion was scored for a rollout, its reward is undefined:
`valid[t, j]` is False and `reward[t, j]` is 0 so that it cannot poison a mean; callers
mask such rollouts out. `coverage` says which share of the positive weight was scored,
and `num_unscored` counts unscored real cells.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp


class Reward(NamedTuple):
  reward: jnp.ndarray          # [tasks, rollouts]; 0 where not valid
  valid: jnp.ndarray           # [tasks, rollouts] bool
  coverage: jnp.ndarray        # [tasks, rollouts] scored positive weight / all positive weight
  num_unscored: jnp.ndarray    # [] int32, real cells without a verdict


def rubric_reward(scores, scored, weights, criterion_mask, *, clip: bool = False,
                  xp=jnp) -> Reward:
  """Rewards of every rollout.

  Args:
    scores: [tasks, criteria, rollouts], 1 where the criterion was judged met.
    scored: [tasks, criteria, rollouts] bool, True where the judge gave a verdict.
    weights: [tasks, criteria] criterion weights lambda (negative = penalty).
    criterion_mask: [tasks, criteria] bool, False on padding.
    clip: clip rewards to [0, 1], for data whose convention says so (HealthBench does).
    xp: the array module: jax.numpy (traceable) or numpy, for host-side callers that grade
      many small groups of different shapes (the evolver's regrades), where jax.numpy
      would compile once per shape. The two agree to a few float32 ulps, not to the bit
      (XLA's CPU division and sums round differently; tests/data/test_reward.py).
  """
  scores = xp.asarray(scores, xp.float32)
  live = xp.asarray(scored, bool) & xp.asarray(criterion_mask, bool)[:, :, None]
  lam = xp.asarray(weights, xp.float32)[:, :, None]
  pos = xp.maximum(lam, 0.0)
  numer = xp.sum(xp.where(live, lam * scores, 0.0), axis=1)
  denom = xp.sum(xp.where(live, pos, 0.0), axis=1)
  total_pos = xp.sum(xp.where(xp.asarray(criterion_mask)[:, :, None], pos, 0.0), axis=1)
  valid = denom > 0
  reward = xp.where(valid, numer / xp.where(valid, denom, 1.0), 0.0)
  if clip:
    reward = xp.clip(reward, 0.0, 1.0)
  coverage = xp.where(total_pos > 0, denom / xp.where(total_pos > 0, total_pos, 1.0), 0.0)
  real = xp.broadcast_to(xp.asarray(criterion_mask, bool)[:, :, None], live.shape)
  num_unscored = xp.sum(real & ~xp.asarray(scored, bool)).astype(xp.int32)
  return Reward(reward, valid, coverage, num_unscored)

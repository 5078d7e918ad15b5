"""Defaults of the harness sub-config (`config.harness`), merged into the one config tree."""

from __future__ import annotations

import ml_collections


def harness_defaults() -> ml_collections.ConfigDict:
  """The harness's documented defaults.

  Fields:
    total_weight: Lambda, the sum positive criterion weights are rescaled to after every
      rubric update (paper: 100, so reward changes read in points).
      H_0's seed rubrics are rescaled too: every weight of a task (negative ones
      included) is multiplied by one factor, so the seed reward
      r = sum(lambda s) / sum(max(lambda, 0)) is unchanged.
    ladder: the sampling-weight levels 1 -> gamma1 -> gamma2 -> gamma3 (paper defaults);
      cold start replaces them through the `SetLadder` operation.
    guidance_caps: the most guidance fields a task may have mounted in each quarter of
      training; non-increasing. Whatever the caps say, the last training step has cap 0,
      so the final harness carries no guidance.
  """
  c = ml_collections.ConfigDict()
  c.total_weight = 100.0
  c.ladder = (1.0, 0.61, 0.38, 0.17)
  c.guidance_caps = (3, 2, 1, 0)
  return c

"""The harness config section (`config.harness`): its documented defaults, `HarnessConfig`
(its typed view), and the rules a sampling ladder and the guidance caps must follow
(`ladder_problems`, `caps_problems`, shared with the harness operations)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_collections

from harnessrl_jax.config_view import section_view
from harnessrl_jax.run_files import GUIDANCE_FIELDS


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


def ladder_problems(ladder: Sequence[float]) -> list[str]:
  """What is wrong with a sampling ladder (empty: nothing), each a reason to follow it."""
  vals = [float(x) for x in ladder]
  out = []
  if len(vals) < 2 or vals[0] != 1.0:
    out.append("needs at least two levels and must start at 1.0")
  if not all(math.isfinite(x) and x > 0 for x in vals):
    out.append("every level must be a finite number > 0")
  if any(b >= a for a, b in zip(vals, vals[1:])):
    out.append("levels must strictly decrease")
  return out


def caps_problems(caps: Sequence[int]) -> list[str]:
  """What is wrong with the guidance caps (empty: nothing), each a reason to follow them."""
  caps = tuple(caps)
  n = len(GUIDANCE_FIELDS)
  out = []
  if len(caps) != 4 or not all(isinstance(c, int) and 0 <= c <= n for c in caps):
    out.append(f"need 4 integers (one per training quarter) in [0, {n}]")
  if any(b > a for a, b in zip(caps, caps[1:])):
    out.append("the cap must not increase from quarter to quarter")
  return out


class HarnessConfig(section_view(harness_defaults, "config.harness")):
  """`config.harness`, typed (fields and their meanings: `harness_defaults`)."""

  def problems(self) -> list[str]:
    out = []
    if not (math.isfinite(self.total_weight) and self.total_weight > 0):
      out.append(f"config.harness.total_weight = {self.total_weight}: must be a finite "
                 "number > 0")
    out += [f"config.harness.ladder = {self.ladder}: {p}" for p in ladder_problems(self.ladder)]
    out += [f"config.harness.guidance_caps = {self.guidance_caps}: {p}"
            for p in caps_problems(self.guidance_caps)]
    return out

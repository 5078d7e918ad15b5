"""Texts in, grades out: the one path from responses to a `Judged` record.

Every caller that scores responses (a training step, the held-out evaluation, the critic's
regrades and re-samples, the cold start, the OOD protocols) goes through `grade`: the judge's
verdict per (task, criterion, rollout) cell, then the rubric reward of each rollout
(data/reward.py: unscored cells leave numerator and denominator; a rollout with no scored
positive criterion has no reward and is not `valid`).

Shapes: scores/scored [T, K, J] (K padded to the longest rubric of the batch, `criterion_mask`
False on padding); rewards/valid [T, J].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from harnessrl_jax.data.reward import rubric_reward
from harnessrl_jax.data.schema import Criterion, Task
from harnessrl_jax.judges.score_matrix import Unscored


@dataclasses.dataclass(frozen=True)
class Judged:
  """One graded batch.

  Attributes:
    scores: [T, K, J] float32 verdicts in {0, 1} (0 where unscored or padding).
    scored: [T, K, J] bool, True where a verdict exists.
    rewards: [T, J] float64 rubric rewards (0 where not valid).
    valid: [T, J] bool, True where some positive-weight criterion was scored.
    unscored: the cells the judge tried and got no verdict for, by cause (cells without
      a check under a judge without an LLM are unscored by design, and not in it).
    cells: real (task, criterion, rollout) cells.
    requests: LLM requests the judge sent (0 for a programmatic judge or cache hits).
  """

  scores: np.ndarray
  scored: np.ndarray
  rewards: np.ndarray
  valid: np.ndarray
  unscored: Unscored
  cells: int
  requests: int = 0

  def mean_reward(self, t: int = 0) -> float:
    """Mean reward of task t's valid rollouts (nan when none is valid)."""
    valid = self.valid[t]
    return float(self.rewards[t][valid].mean()) if valid.any() else float("nan")


def grade(judge, tasks: Sequence[Task], responses: Sequence[Sequence[str]],
          criteria: Sequence[Sequence[Criterion]] | None = None, *,
          check_limit: bool = True, xp=jnp) -> Judged:
  """Verdicts and rubric rewards of responses[t][j]; `criteria` None grades by the tasks'
  own (seed) rubrics, else criteria[t] (an evolved or candidate rubric) grades task t.
  `check_limit` False: no JudgeError past judge.max_unscored_share (the critic counts its
  failures against evolver.max_unscored_share instead). `xp`: the rewards' array module
  (data.reward.rubric_reward; numpy for the evolver's many small regrades)."""
  m = judge.score(list(tasks), [list(r) for r in responses],
                  None if criteria is None else [tuple(c) for c in criteria],
                  check_limit=check_limit)
  r = rubric_reward(m.scores, m.scored, m.weights, m.criterion_mask, xp=xp)
  return Judged(np.asarray(m.scores), np.asarray(m.scored),
                np.asarray(r.reward, np.float64), np.asarray(r.valid), m.stats.failures,
                int(m.num_cells), int(m.stats.requests))

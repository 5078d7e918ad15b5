"""`ScoreMatrix`: a judge's verdicts for a batch, shaped (tasks, criteria, rollouts).

`scores`, `scored`, `weights` and `criterion_mask` feed `data.reward.rubric_reward`
directly. Criteria are padded to the longest rubric of the batch (`criterion_mask` False on
padding). An unscored cell (no parseable verdict, a failed request, or a criterion the
backend cannot judge) has `scored` False and score 0, and is never read as a verdict.
"""

from __future__ import annotations

import dataclasses

import numpy as np

# Why a real cell has no verdict (JudgeStats.unscored keys).
UNSCORED_UNPARSEABLE = "unparseable"
UNSCORED_TRANSPORT = "transport"
UNSCORED_NO_CHECK = "no_check"


@dataclasses.dataclass(frozen=True)
class JudgeStats:
  """Accounting of one `Judge.score` call.

  Attributes:
    cells: real (task, criterion, rollout) cells.
    program_cells: cells decided by a programmatic check.
    cache_hits: LLM cells answered from the cache.
    requests: LLM requests sent (retries included; identical cells are sent once).
    unscored: reason -> number of real cells left without a verdict.
  """

  cells: int = 0
  program_cells: int = 0
  cache_hits: int = 0
  requests: int = 0
  unscored: tuple[tuple[str, int], ...] = ()

  @property
  def num_unscored(self) -> int:
    return sum(n for _, n in self.unscored)


@dataclasses.dataclass(frozen=True)
class ScoreMatrix:
  """Verdicts of one batch.

  Attributes:
    scores: [tasks, criteria, rollouts] float32 in {0, 1}; 1 = criterion met (for a
      negative-weight criterion: the bad behaviour happened). 0 where not scored.
    scored: [tasks, criteria, rollouts] bool, True where a verdict exists.
    weights: [tasks, criteria] float32 criterion weights; 0 on padding.
    criterion_mask: [tasks, criteria] bool, False on padding.
    raw: raw[t][k][j] is the judge's text for the cell (the LLM answer, a check summary,
      or the error that left it unscored); "" on padding.
    stats: accounting (cells, cache hits, unscored by reason).
  """

  scores: np.ndarray
  scored: np.ndarray
  weights: np.ndarray
  criterion_mask: np.ndarray
  raw: tuple[tuple[tuple[str, ...], ...], ...]
  stats: JudgeStats

  @property
  def num_cells(self) -> int:
    return int(self.criterion_mask.sum()) * int(self.scores.shape[2])

  @property
  def num_unscored(self) -> int:
    real = np.broadcast_to(self.criterion_mask[:, :, None], self.scored.shape)
    return int((real & ~self.scored).sum())

  @property
  def unscored_share(self) -> float:
    return self.num_unscored / self.num_cells if self.num_cells else 0.0

"""`ScoreMatrix`: a judge's verdicts for a batch, shaped (tasks, criteria, rollouts).

`scores`, `scored`, `weights` and `criterion_mask` feed `data.reward.rubric_reward`
directly. Criteria are padded to the longest rubric of the batch (`criterion_mask` False on
padding). An unscored cell (no parseable verdict, a failed request, or a criterion the
backend cannot judge) has `scored` False and score 0, and is never read as a verdict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from harnessrl_jax import run_files as rf

# Why a real cell has no verdict (JudgeStats.unscored keys). The first three are judge
# failures (run_files.UNSCORED_CAUSES says what each means); they count against the stop
# limits. A cell without a check under a judge without an LLM is unscored by design.
UNSCORED_TRANSPORT, UNSCORED_PARSE, UNSCORED_REFUSED = rf.UNSCORED_CAUSES
UNSCORED_NO_CHECK = "no_check"


@dataclasses.dataclass(frozen=True)
class Unscored:
  """The judge failures of one judged batch, or of several summed (`+`).

  Attributes:
    cells: cells the judge tried (real cells, less the unscored-by-design no_check ones).
    causes: (cause, cells) for each cause of run_files.UNSCORED_CAUSES with cells > 0.
  """

  cells: int = 0
  causes: tuple[tuple[str, int], ...] = ()

  @classmethod
  def of(cls, cells: int, counts: Mapping[str, int]) -> Unscored:
    """From per-cause counts (other keys, e.g. no_check, and zeros are left out)."""
    return cls(int(cells), tuple((c, int(counts[c])) for c in rf.UNSCORED_CAUSES
                                 if counts.get(c, 0)))

  @property
  def count(self) -> int:
    return sum(n for _, n in self.causes)

  @property
  def share(self) -> float:
    return self.count / self.cells if self.cells else 0.0

  def __add__(self, other: Unscored) -> Unscored:
    a, b = dict(self.causes), dict(other.causes)
    return Unscored.of(self.cells + other.cells,
                       {c: a.get(c, 0) + b.get(c, 0) for c in rf.UNSCORED_CAUSES})

  def describe(self) -> str:
    """E.g. "3 of 40 judged cells (8%) have no verdict (transport: 2, parse: 1)"."""
    causes = ", ".join(f"{c}: {n}" for c, n in self.causes)
    return (f"{self.count} of {self.cells} judged cells ({self.share:.0%}) have no verdict"
            + (f" ({causes})" if causes else ""))

  def to_json(self) -> dict[str, Any]:
    """The run directory's unscored record (run_files COUNT, SHARE, CELLS, CAUSES)."""
    return {rf.COUNT: self.count, rf.SHARE: self.share, rf.CELLS: self.cells,
            rf.CAUSES: dict(self.causes)}

  @classmethod
  def from_json(cls, obj: Mapping[str, Any]) -> Unscored:
    return cls.of(int(obj[rf.CELLS]), obj[rf.CAUSES])


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

  @property
  def failures(self) -> Unscored:
    """The cells the judge tried and failed, by cause (no_check cells are not tried)."""
    counts = dict(self.unscored)
    return Unscored.of(self.cells - counts.get(UNSCORED_NO_CHECK, 0), counts)


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

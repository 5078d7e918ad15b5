"""The values that pass between the evolver's roles: groups, labels, candidates, verdicts,
and the cost each role call returns with its result.

All frozen. Arrays are read-only NumPy, shaped (criteria, rollouts) for one task.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from harnessrl_jax.data.schema import Criterion, Task
from harnessrl_jax.harness.ops import Op, op_to_json
from harnessrl_jax.judges.score_matrix import Unscored

LABELS = ("blind", "saturated", "spurious", "agree")
ROUTES = {"blind": "guidance", "saturated": "sampling", "spurious": "rubric"}
ALL_ROUTES = frozenset(ROUTES.values())


def _ro(a, dtype) -> np.ndarray:
  a = np.array(a, dtype)
  a.flags.writeable = False
  return a


@dataclasses.dataclass(frozen=True)
class Cost:
  """What one role call spent, returned with its result (the evolver sums them).

  Attributes:
    llm_requests: requests sent to an LLM (the attributor's / proposer's TextClient, the
      critic's judge, the judge of the attributor's intervention).
    judge_cells: (criterion, response) cells the critic (or the attributor's
      intervention) had graded.
    rollouts: responses the critic re-sampled from the policy.
    unscored: those graded cells the judge got no verdict for, by cause.
  """

  llm_requests: int = 0
  judge_cells: int = 0
  rollouts: int = 0
  unscored: Unscored = Unscored()

  def __add__(self, other: Cost) -> Cost:
    return Cost(self.llm_requests + other.llm_requests, self.judge_cells + other.judge_cells,
                self.rollouts + other.rollouts, self.unscored + other.unscored)


@dataclasses.dataclass(frozen=True, eq=False)
class Group:
  """One drawn task's recorded group: what the policy wrote and how it was judged.

  Attributes:
    task: the task (its prompt; its own criteria are the seed rubric, not necessarily the
      one judged: see `criteria`).
    criteria: the rubric the group was judged under (the harness's, at the step).
    responses: the J responses.
    scores: [K, J] 1 where met (for a penalty criterion: the bad behaviour happened).
    scored: [K, J] True where the judge gave a verdict.
    rewards: [J] rubric rewards in [.., 1] (not points).
  """

  task: Task
  criteria: tuple[Criterion, ...]
  responses: tuple[str, ...]
  scores: np.ndarray
  scored: np.ndarray
  rewards: np.ndarray

  def __post_init__(self):
    k, j = len(self.criteria), len(self.responses)
    object.__setattr__(self, "criteria", tuple(self.criteria))
    object.__setattr__(self, "responses", tuple(self.responses))
    object.__setattr__(self, "scores", _ro(self.scores, np.float32).reshape(k, j))
    object.__setattr__(self, "scored", _ro(self.scored, bool).reshape(k, j))
    object.__setattr__(self, "rewards", _ro(self.rewards, np.float64).reshape(j))

  @property
  def task_id(self) -> str:
    return self.task.id

  def satisfied(self) -> np.ndarray:
    """[K, J] int8: 1 satisfied (met, or a penalty not incurred), 0 not, -1 no verdict."""
    neg = np.array([c.weight < 0 for c in self.criteria], bool)[:, None]
    s = (self.scores > 0).astype(np.int8)
    s = np.where(neg, 1 - s, s)
    return np.where(self.scored, s, -1).astype(np.int8)


@dataclasses.dataclass(frozen=True)
class CriterionLabel:
  """The attributor's finding for one criterion of one drawn task.

  Attributes:
    criterion_id: the criterion.
    label: one of LABELS.
    confidence: in [0, 1].
    evidence: quoted rollout sentences that support the label.
    wording: the rubric wording that lets responses pass superficially ("" if none).
    signals: what the backend measured (JSON-plain), for the log.
  """

  criterion_id: str
  label: str
  confidence: float
  evidence: tuple[str, ...] = ()
  wording: str = ""
  signals: tuple[tuple[str, Any], ...] = ()

  @property
  def route(self) -> str | None:
    return ROUTES.get(self.label)

  def to_json(self) -> dict[str, Any]:
    return {"criterion_id": self.criterion_id, "label": self.label,
            "confidence": round(float(self.confidence), 6), "evidence": list(self.evidence),
            "wording": self.wording, "signals": dict(self.signals)}


@dataclasses.dataclass(frozen=True)
class TaskAttribution:
  task_id: str
  labels: tuple[CriterionLabel, ...]
  backend: str
  note: str = ""

  def label_of(self, criterion_id: str) -> CriterionLabel | None:
    for lab in self.labels:
      if lab.criterion_id == criterion_id:
        return lab
    return None


@dataclasses.dataclass(frozen=True)
class Candidate:
  """A proposed harness change: `ops` applied in order; `kind` names the primary one (a
  drop that makes room for a guidance field is secondary)."""

  route: str
  task_id: str
  criterion_id: str
  ops: tuple[Op, ...]
  kind: str          # e.g. "guidance:criterion", "rubric:rewrite", "sampling:level_down"
  rationale: str = ""

  def to_json(self) -> dict[str, Any]:
    return {"route": self.route, "task_id": self.task_id, "criterion_id": self.criterion_id,
            "kind": self.kind, "ops": [op_to_json(o) for o in self.ops],
            "rationale": self.rationale}


@dataclasses.dataclass(frozen=True)
class Measurement:
  """The critic's measurement of one candidate and its verdict.

  delta is in points, signed so that the wanted direction is positive: Delta_c = r_old -
  r_new for rubric updates, Delta_g = r_new - r_old for guidance, Delta_w = w_old - w_new
  (ladder units, not points) for sampling. An unmeasurable candidate (the judge left cells
  of its measurement without a verdict, or gave none on a criterion it changes) has no
  delta (None) and is neither accepted nor rejected; `unscored` holds its lost cells.
  `responses`: a guidance candidate's re-sampled answers (r_new is their mean reward), kept
  in the candidate log so that a Delta can be split by criterion afterwards.
  """

  delta: float | None
  band: tuple[float, float] | None
  accepted: bool
  reasons: tuple[str, ...]
  r_old: float | None = None
  r_new: float | None = None
  judge_cells: int = 0
  rollouts: int = 0
  unmeasurable: bool = False
  unscored: Unscored = Unscored()
  responses: tuple[str, ...] = ()

  def to_json(self) -> dict[str, Any]:
    # A reward without any valid rollout is nan: null in JSON (which has no NaN).
    f = lambda x: None if x is None or not np.isfinite(x) else round(float(x), 6)
    out = {"delta": f(self.delta), "band": None if self.band is None else list(self.band),
           "accepted": self.accepted, "reasons": list(self.reasons), "r_old": f(self.r_old),
           "r_new": f(self.r_new), "judge_cells": self.judge_cells, "rollouts": self.rollouts,
           "unmeasurable": self.unmeasurable, "unscored": self.unscored.to_json()}
    if self.responses:
      out["responses"] = list(self.responses)
    return out


@dataclasses.dataclass(frozen=True)
class Feedback:
  """What the critic sends back with a rejected or unmeasurable candidate (the proposer's
  next input: it then tries another kind of change, one the judge may be able to score)."""

  candidate: Candidate
  measurement: Measurement

"""The time index: every draw of every task, and queries over a criterion's history.

A `Draw` is what the evolver writes back after one step for one drawn task: the rubric
it was judged under (criterion ids and weights), the judge's score matrix [K, J] (1 met,
0 not met, -1 no verdict), the rollouts' rewards, the attributor's labels, the accepted
operations (as `harness.ops` JSON) and the critic's measurements.

"Satisfied" below means what the rubric wants: met for a positive-weight criterion, NOT
met for a penalty (negative-weight) criterion. So "reached" = satisfied by at least one
scored rollout, "saturated" = satisfied by every scored rollout.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harnessrl_jax.data.frozen import FrozenMap, freeze, thaw
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.harness.ops import op_from_json, touches

LABELS = ("blind", "saturated", "spurious", "agree")


@dataclasses.dataclass(frozen=True, eq=False)
class Draw:
  """One task's draw at one step. Arrays are read-only copies."""

  task_id: str
  step: int
  criterion_ids: tuple[str, ...]
  criterion_weights: np.ndarray      # [K] float32
  scores: np.ndarray                 # [K, J] int8: 1 met, 0 not met, -1 no verdict
  rewards: np.ndarray                # [J] float32
  labels: FrozenMap = dataclasses.field(default_factory=FrozenMap)   # criterion -> label
  actions: tuple[FrozenMap, ...] = ()        # op JSON of operations applied after it
  measurements: tuple[FrozenMap, ...] = ()   # the critic's evidence, any JSON objects

  def __post_init__(self):
    w = np.array(self.criterion_weights, np.float32)
    s = np.array(self.scores, np.int8)
    r = np.array(self.rewards, np.float32)
    k = len(self.criterion_ids)
    if w.shape != (k,) or s.ndim != 2 or s.shape[0] != k or r.shape != (s.shape[1],):
      raise HarnessError(f"draw of task {self.task_id!r} at step {self.step}: shapes "
                         f"weights {w.shape}, scores {s.shape}, rewards {r.shape} do not "
                         f"fit {k} criteria")
    if not np.isin(s, (-1, 0, 1)).all():
      raise HarnessError(f"draw of task {self.task_id!r}: scores must be -1, 0 or 1")
    bad = {v for v in dict(self.labels).values() if v not in LABELS}
    if bad or not set(dict(self.labels)) <= set(self.criterion_ids):
      raise HarnessError(f"draw of task {self.task_id!r}: labels must map its criterion "
                         f"ids to {LABELS}")
    for name, a in (("criterion_weights", w), ("scores", s), ("rewards", r)):
      a.flags.writeable = False
      object.__setattr__(self, name, a)
    object.__setattr__(self, "criterion_ids", tuple(self.criterion_ids))
    object.__setattr__(self, "labels", freeze(dict(self.labels)))
    object.__setattr__(self, "actions", tuple(freeze(dict(a)) for a in self.actions))
    object.__setattr__(self, "measurements",
                       tuple(freeze(dict(m)) for m in self.measurements))

  def satisfied(self) -> np.ndarray:
    """[K, J] int8: 1 satisfied, 0 not, -1 no verdict (see the module docstring)."""
    s = self.scores.astype(np.int8)
    flip = (self.criterion_weights < 0)[:, None] & (s >= 0)
    return np.where(flip, 1 - s, s).astype(np.int8)

  def to_json(self) -> dict[str, Any]:
    return {"task_id": self.task_id, "step": self.step,
            "criterion_ids": list(self.criterion_ids),
            "criterion_weights": [float(x) for x in self.criterion_weights],
            "scores": self.scores.tolist(), "rewards": [float(x) for x in self.rewards],
            "labels": thaw(self.labels), "actions": [thaw(a) for a in self.actions],
            "measurements": [thaw(m) for m in self.measurements]}

  @classmethod
  def from_json(cls, obj: Mapping[str, Any]) -> Draw:
    k = len(obj["criterion_ids"])
    scores = np.array(obj["scores"], np.int8).reshape(k, -1) if k else \
        np.zeros((0, len(obj["rewards"])), np.int8)
    return cls(obj["task_id"], int(obj["step"]), tuple(obj["criterion_ids"]),
               np.array(obj["criterion_weights"], np.float32), scores,
               np.array(obj["rewards"], np.float32), obj["labels"],
               tuple(obj["actions"]), tuple(obj["measurements"]))


@dataclasses.dataclass(frozen=True)
class CriterionHistory:
  """One criterion over the task's draws that included it, oldest first."""

  steps: np.ndarray           # [n] int
  satisfied_rate: np.ndarray  # [n] float: share of scored rollouts satisfying it; nan: none
  labels: tuple[str | None, ...]


class TimeIndex:
  """Per task, its draws in step order."""

  def __init__(self):
    self._draws: dict[str, list[Draw]] = {}

  def add(self, draw: Draw) -> None:
    draws = self._draws.setdefault(draw.task_id, [])
    if draws and draw.step < draws[-1].step:
      raise HarnessError(f"draw of task {draw.task_id!r} at step {draw.step} comes after "
                         f"one at step {draws[-1].step}; draws are added in step order")
    draws.append(draw)

  def draws(self, task_id: str) -> tuple[Draw, ...]:
    return tuple(self._draws.get(task_id, ()))

  def task_ids(self) -> list[str]:
    return sorted(self._draws)

  def __len__(self) -> int:
    return sum(len(v) for v in self._draws.values())

  def history(self, task_id: str, criterion_id: str) -> CriterionHistory:
    steps, rates, labels = [], [], []
    for d in self._draws.get(task_id, ()):
      if criterion_id not in d.criterion_ids:
        continue
      row = d.satisfied()[d.criterion_ids.index(criterion_id)]
      scored = row >= 0
      steps.append(d.step)
      rates.append(float(row[scored].mean()) if scored.any() else float("nan"))
      labels.append(d.labels.get(criterion_id))
    return CriterionHistory(np.array(steps, np.int64), np.array(rates, np.float64),
                            tuple(labels))

  def ever_reached(self, task_id: str, criterion_id: str) -> bool:
    """Did any scored rollout ever satisfy the criterion?"""
    return bool(np.any(self.history(task_id, criterion_id).satisfied_rate > 0))

  def saturated_run(self, task_id: str, criterion_id: str) -> tuple[int, int | None]:
    """(number of most recent consecutive draws in which every scored rollout satisfied
    the criterion, step of the first of them or None). Draws with no verdict end a run."""
    h = self.history(task_id, criterion_id)
    n = 0
    for rate in h.satisfied_rate[::-1]:
      if not rate == 1.0:
        break
      n += 1
    return n, (int(h.steps[len(h.steps) - n]) if n else None)

  def last_change(self, task_id: str, criterion_id: str) -> int | None:
    """Step of the latest recorded operation that touched the criterion, or None."""
    for d in reversed(self._draws.get(task_id, ())):
      for a in d.actions:
        op_task, ids = touches(op_from_json(thaw(a)))
        if op_task == task_id and criterion_id in ids:
          return d.step
    return None

  def recently_changed(self, task_id: str, criterion_id: str, *, now: int,
                       window: int) -> bool:
    """Was the criterion touched by an operation within the last `window` steps?"""
    last = self.last_change(task_id, criterion_id)
    return last is not None and now - last <= window

  def write(self, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
      for tid in sorted(self._draws):
        for d in self._draws[tid]:
          f.write(json.dumps(d.to_json(), ensure_ascii=False, allow_nan=False) + "\n")

  @classmethod
  def read(cls, path: str) -> TimeIndex:
    out = cls()
    with open(path, encoding="utf-8") as f:
      for n, line in enumerate(f, 1):
        try:
          out.add(Draw.from_json(json.loads(line)))
        except (KeyError, TypeError, ValueError, HarnessError) as e:
          raise HarnessError(f"{path}:{n}: draw: {e}") from None
    return out


def make_draw(task_id: str, step: int, criterion_ids: Sequence[str], criterion_weights,
              scores, scored, rewards, **kwargs) -> Draw:
  """A Draw from the reward module's (scores, scored) pair: -1 where not scored."""
  s = np.where(np.asarray(scored, bool), np.asarray(scores) > 0, -1).astype(np.int8)
  return Draw(task_id, step, tuple(criterion_ids), criterion_weights, s, rewards, **kwargs)

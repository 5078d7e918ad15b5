"""The harness H_t = (sampling, guidance, rubric) as an immutable JAX pytree.

Array leaves hold the numeric state, one row per training task (N tasks, K the longest
current rubric, padding exactly to K so that equal harnesses have equal shapes):

  levels          [N] int32     sampling level of each task; its weight is ladder[level]
  ladder          [L] float32   the level weights 1 > gamma1 > gamma2 > gamma3 > 0
  weights         [N, K] float32 criterion weights lambda; 0 on padding
  criterion_mask  [N, K] bool   False on padding
  guidance_mask   [N, 3] bool   which of FIELDS are mounted per task
  guidance_cap    [] int32      the most fields a task may have mounted now

Text and identity sit beside them as static, hashable metadata: per task a `TaskState`
(criterion ids, texts, anchor flags, checks, retired ids, mounted guidance contents in
mount order), plus Lambda and the guidance schedule. Leaves are read-only NumPy arrays;
every operation (see `ops.py`) returns a new Harness and never writes into an old one.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from harnessrl_jax.data.schema import Check, Criterion, Task
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.harness.config import (HarnessConfig, harness_defaults,
                                          ladder_problems)
from harnessrl_jax.run_files import GUIDANCE_FIELDS

FIELDS = GUIDANCE_FIELDS   # named once in run_files: the run logs per-field shares


@dataclasses.dataclass(frozen=True)
class RubricEntry:
  """A criterion's identity, text and programmatic check (None: graded by its text only);
  its weight lives in `Harness.weights`."""

  id: str
  text: str
  anchor: bool
  tags: tuple[str, ...] = ()
  check: Check | None = None


@dataclasses.dataclass(frozen=True)
class TaskState:
  """The text side of one task's harness.

  Attributes:
    task_id: the task's id.
    criteria: current rubric in order; row i of `Harness.weights` holds their weights.
    retired_ids: ids of deleted, merged or split criteria, sorted. They are never reused,
      so a criterion id names one criterion for the whole run (memory keys on it).
    guidance: mounted (field, content) pairs, oldest first.
  """

  task_id: str
  criteria: tuple[RubricEntry, ...]
  retired_ids: tuple[str, ...] = ()
  guidance: tuple[tuple[str, str], ...] = ()

  @functools.cached_property
  def canonical_text(self) -> str:
    """Canonical JSON of this task's text side. Cached, as is its digest: unchanged
    tasks are shared between harness versions, so a digest re-hashes only the tasks an
    operation changed."""
    from harnessrl_jax.harness.digest import dumps  # pylint: disable=g-import-not-at-top
    return dumps({
        "id": self.task_id,
        "criteria": [{"id": c.id, "text": c.text, "anchor": c.anchor, "tags": list(c.tags),
                      "check": None if c.check is None else c.check.to_json()}
                     for c in self.criteria],
        "retired_ids": list(self.retired_ids),
        "guidance": [[f, content] for f, content in self.guidance]})

  @functools.cached_property
  def text_digest(self) -> str:
    return hashlib.sha256(self.canonical_text.encode("utf-8")).hexdigest()

  def criterion_index(self, criterion_id: str) -> int:
    for i, c in enumerate(self.criteria):
      if c.id == criterion_id:
        return i
    raise HarnessError(f"task {self.task_id!r} has no criterion {criterion_id!r} "
                       f"(it has {[c.id for c in self.criteria]})")


def _readonly(a: np.ndarray) -> np.ndarray:
  a = np.array(a)  # a private copy, so nobody else can write through a shared buffer
  a.flags.writeable = False
  return a


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["levels", "ladder", "weights", "criterion_mask", "guidance_mask",
                 "guidance_cap"],
    meta_fields=["tasks", "total_weight", "guidance_caps"])
@dataclasses.dataclass(frozen=True, eq=False)  # eq on arrays is ambiguous: compare digests
class Harness:
  """H_t. Build with `from_tasks`; change only through `ops.apply`."""

  levels: Any
  ladder: Any
  weights: Any
  criterion_mask: Any
  guidance_mask: Any
  guidance_cap: Any
  tasks: tuple[TaskState, ...]
  total_weight: float
  guidance_caps: tuple[int, ...]

  @property
  def num_tasks(self) -> int:
    return len(self.tasks)

  @property
  def task_ids(self) -> tuple[str, ...]:
    return tuple(t.task_id for t in self.tasks)

  @functools.cached_property
  def _index(self) -> dict[str, int]:
    return {t.task_id: i for i, t in enumerate(self.tasks)}

  def replace(self, **changes) -> Harness:
    """dataclasses.replace that keeps the task-id lookup (operations never change ids)."""
    out = dataclasses.replace(self, **changes)
    if "_index" in self.__dict__ and (out.tasks is self.tasks or (
        len(out.tasks) == len(self.tasks) and
        all(a.task_id == b.task_id for a, b in zip(out.tasks, self.tasks)))):
      out.__dict__["_index"] = self.__dict__["_index"]
    return out

  def index(self, task_id: str) -> int:
    """Row of `task_id`; HarnessError if the harness has no such task."""
    try:
      return self._index[task_id]
    except (KeyError, TypeError):
      raise HarnessError(f"the harness has no task {task_id!r}") from None

  def task(self, task_id: str) -> TaskState:
    return self.tasks[self.index(task_id)]

  def criteria(self, task_id: str) -> tuple[Criterion, ...]:
    """The task's current rubric as schema Criteria (weights from the array leaf)."""
    i = self.index(task_id)
    row = np.asarray(self.weights)[i]
    return tuple(Criterion(id=c.id, text=c.text, weight=float(row[k]), anchor=c.anchor,
                           tags=c.tags, check=c.check)
                 for k, c in enumerate(self.tasks[i].criteria))

  def guidance(self, task_id: str) -> tuple[tuple[str, str], ...]:
    """Mounted (field, content) pairs of the task, oldest first."""
    return self.task(task_id).guidance

  def level(self, task_id: str) -> int:
    return int(np.asarray(self.levels)[self.index(task_id)])

  @property
  def task_weights(self) -> np.ndarray:
    """Sampling weights w = ladder[levels], [N]."""
    return np.asarray(self.ladder)[np.asarray(self.levels)]


def rescaled(weights: Sequence[float], total_weight: float) -> list[float]:
  """Multiplies every weight by one factor so the positive ones sum to `total_weight`.

  One factor for all weights, negatives included, keeps the reward r unchanged (r is
  invariant to a common scale). Float64 with an exactly rounded sum, then float32: the
  same bits on every machine.
  """
  w = np.asarray(weights, np.float64)
  positive = math.fsum(w[w > 0].tolist())
  if positive <= 0:
    raise HarnessError("a task must keep at least one positive-weight criterion")
  # Elementwise IEEE products, then round-to-nearest float32: no reductions in NumPy.
  return (w * (total_weight / positive)).astype(np.float32).tolist()


def build(tasks: Sequence[TaskState], levels, ladder, rows: Sequence[Sequence[float]],
          guidance_cap: int, total_weight: float,
          guidance_caps: Sequence[int]) -> Harness:
  """Assembles a Harness from per-task rows, deriving masks and exact padding."""
  n = len(tasks)
  k = max((len(t.criteria) for t in tasks), default=0)
  weights = np.zeros((n, k), np.float32)
  cmask = np.zeros((n, k), bool)
  gmask = np.zeros((n, len(FIELDS)), bool)
  for i, (t, row) in enumerate(zip(tasks, rows, strict=True)):
    weights[i, :len(row)] = row
    cmask[i, :len(row)] = True
    for field, _ in t.guidance:
      gmask[i, FIELDS.index(field)] = True
  return Harness(levels=_readonly(np.asarray(levels, np.int32)),
                 ladder=_readonly(np.asarray(ladder, np.float32)),
                 weights=_readonly(weights), criterion_mask=_readonly(cmask),
                 guidance_mask=_readonly(gmask),
                 guidance_cap=_readonly(np.asarray(guidance_cap, np.int32)),
                 tasks=tuple(tasks), total_weight=float(total_weight),
                 guidance_caps=tuple(int(c) for c in guidance_caps))


def rows_of(h: Harness) -> list[list[float]]:
  """Per-task criterion weights without padding, as Python floats."""
  w = np.asarray(h.weights)
  return [[float(x) for x in w[i, :len(t.criteria)]] for i, t in enumerate(h.tasks)]


def check_ladder(ladder: Sequence[float]) -> None:
  """HarnessError unless `ladder` is a valid sampling ladder (harness.config's rules)."""
  problems = ladder_problems(ladder)
  if problems:
    raise HarnessError(f"ladder {[float(x) for x in ladder]}: " + "; ".join(problems))


def from_tasks(tasks: Sequence[Task], config=None) -> Harness:
  """H_0: every task at level 0, no guidance, the seed rubric.

  Args:
    tasks: the training pool; ids must be unique, as must criterion ids within a task.
    config: the `harness` config section or its `HarnessConfig` (None: the defaults).

  The seed weights ARE rescaled so each task's positive weights sum to Lambda: one factor
  per task, negatives included, which leaves the seed reward unchanged and makes
  "positive weights sum to Lambda" an invariant of every harness.
  """
  hc = HarnessConfig.from_config(harness_defaults() if config is None else config)
  total, caps = hc.total_weight, hc.guidance_caps
  seen = set()
  states, rows = [], []
  for task in tasks:
    if task.id in seen:
      raise HarnessError(f"task id {task.id!r} appears twice in the training pool")
    seen.add(task.id)
    ids = [c.id for c in task.criteria]
    if len(set(ids)) != len(ids):
      raise HarnessError(f"task {task.id!r}: criterion ids repeat: {ids}")
    ws = [float(c.weight) for c in task.criteria]
    if not all(math.isfinite(w) for w in ws):
      raise HarnessError(f"task {task.id!r}: criterion weights must be finite: {ws}")
    if not any(w > 0 for w in ws):
      raise HarnessError(f"task {task.id!r}: the seed rubric has no positive-weight "
                         "criterion, so its reward is undefined")
    rows.append(rescaled(ws, total))
    states.append(TaskState(task.id, tuple(
        RubricEntry(c.id, c.text, bool(c.anchor), tuple(c.tags), c.check)
        for c in task.criteria)))
  return build(states, np.zeros(len(states), np.int32), hc.ladder, rows,
               guidance_cap=caps[0], total_weight=total, guidance_caps=caps)


def invariant_problems(h: Harness, *, tol: float = 1e-3) -> list[str]:
  """Every broken invariant of `h`, as messages (empty: all hold).

  `tol` is relative to Lambda: positive weights sum to Lambda within float32 rounding.
  """
  out = []
  n = h.num_tasks
  levels = np.asarray(h.levels)
  ladder = np.asarray(h.ladder)
  w = np.asarray(h.weights)
  cmask = np.asarray(h.criterion_mask)
  gmask = np.asarray(h.guidance_mask)
  cap = int(np.asarray(h.guidance_cap))
  k = max((len(t.criteria) for t in h.tasks), default=0)
  if levels.shape != (n,) or w.shape != (n, k) or cmask.shape != (n, k) or \
      gmask.shape != (n, len(FIELDS)):
    out.append(f"shapes: levels {levels.shape}, weights {w.shape}, criterion_mask "
               f"{cmask.shape}, guidance_mask {gmask.shape} for {n} tasks, K={k}")
    return out
  try:
    check_ladder(ladder.tolist())
  except HarnessError as e:
    out.append(str(e))
  if n and (levels.min() < 0 or levels.max() >= len(ladder)):
    out.append(f"levels outside [0, {len(ladder)})")
  if not 0 <= cap <= len(FIELDS):
    out.append(f"guidance_cap {cap} outside [0, {len(FIELDS)}]")
  if len(set(h.task_ids)) != n:
    out.append("task ids repeat")
  for i, t in enumerate(h.tasks):
    kt = len(t.criteria)
    if not (cmask[i, :kt].all() and not cmask[i, kt:].any() and not w[i, kt:].any()):
      out.append(f"task {t.task_id}: criterion_mask/padding disagree with {kt} criteria")
    ids = [c.id for c in t.criteria]
    if len(set(ids)) != len(ids):
      out.append(f"task {t.task_id}: criterion ids repeat")
    if set(ids) & set(t.retired_ids):
      out.append(f"task {t.task_id}: live criterion reuses a retired id")
    row = w[i, :kt].astype(np.float64)
    if not np.isfinite(row).all():
      out.append(f"task {t.task_id}: non-finite weight")
    pos = row[row > 0].sum()
    if pos <= 0:
      out.append(f"task {t.task_id}: no positive-weight criterion")
    elif abs(pos - h.total_weight) > tol * h.total_weight:
      out.append(f"task {t.task_id}: positive weights sum to {pos}, not {h.total_weight}")
    fields = [f for f, _ in t.guidance]
    if len(set(fields)) != len(fields) or not set(fields) <= set(FIELDS):
      out.append(f"task {t.task_id}: guidance fields {fields} repeat or are unknown")
    if len(fields) > cap:
      out.append(f"task {t.task_id}: {len(fields)} guidance fields over the cap {cap}")
    if [FIELDS[j] for j in np.flatnonzero(gmask[i])] != sorted(fields, key=FIELDS.index):
      out.append(f"task {t.task_id}: guidance_mask disagrees with mounted fields")
  return out

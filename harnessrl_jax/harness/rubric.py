"""The rubric dial c_t: create, rewrite, delete, reweight, merge and split criteria.

Rules every operation keeps (each refusal raises HarnessError and changes nothing):
- anchor (seed) criteria may only be reweighted: never rewritten, deleted, merged or split;
- a criterion id is used once per task for the whole run: new ids may not repeat a live
  or a retired one (memory keys criterion histories on ids);
- weights are finite and non-zero (a zero weight would be a delete in disguise);
- a criterion may carry a programmatic check (`data.schema.Check`), which a judge with
  checks grades instead of the text: create sets it, rewrite replaces it when given one and
  keeps it otherwise (no operation removes a check: delete and create instead);
- the task keeps at least one positive-weight criterion;
- after the update every weight of the task is multiplied by one factor so the positive
  weights sum to Lambda (`state.rescaled`). Weights given to an operation are therefore
  relative, in the task's current points: reweighting a criterion from 20 to 40 when the
  positive weights sum to 100 leaves it at 40/120 of Lambda after the rescale.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from harnessrl_jax.data.schema import Check
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.harness.state import Harness, RubricEntry, rescaled


def _check_id(cid: str, t) -> None:
  if not isinstance(cid, str) or not cid.strip():
    raise HarnessError(f"criterion id {cid!r} must be a non-empty string")
  if cid in {c.id for c in t.criteria} or cid in t.retired_ids:
    raise HarnessError(f"task {t.task_id!r}: criterion id {cid!r} is already used "
                       "(live or retired); ids are never reused")


def _check_text(text: str) -> None:
  if not isinstance(text, str) or not text.strip():
    raise HarnessError("criterion text must be a non-empty string")


def _check_check(check) -> None:
  if check is not None and not isinstance(check, Check):
    raise HarnessError(f"criterion check {check!r} must be a data.schema.Check or None")


def _check_weight(w) -> float:
  if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) \
      or w == 0:
    raise HarnessError(f"criterion weight {w!r} must be a finite non-zero number")
  return float(w)


def _editable(t, cid: str, what: str) -> int:
  k = t.criterion_index(cid)
  if t.criteria[k].anchor:
    raise HarnessError(f"task {t.task_id!r}: criterion {cid!r} is an anchor (seed) "
                       f"criterion; anchors may only be reweighted, not {what}")
  return k


def _update(h: Harness, i: int, criteria: Sequence[RubricEntry], row: Sequence[float],
            retired: Sequence[str] = ()) -> Harness:
  """Returns `h` with task i's rubric replaced and rescaled to Lambda."""
  t = h.tasks[i]
  if not any(w > 0 for w in row):
    raise HarnessError(f"task {t.task_id!r}: the update would leave no positive-weight "
                       "criterion")
  tasks = list(h.tasks)
  tasks[i] = dataclasses.replace(t, criteria=tuple(criteria),
                                 retired_ids=tuple(sorted(set(t.retired_ids) |
                                                          set(retired))))
  # Only row i changes; the padding width K follows the longest rubric exactly.
  k = max(len(x.criteria) for x in tasks)
  old_w, old_m = np.asarray(h.weights), np.asarray(h.criterion_mask)
  keep = min(k, old_w.shape[1])
  w = np.zeros((len(tasks), k), np.float32)
  m = np.zeros((len(tasks), k), bool)
  w[:, :keep], m[:, :keep] = old_w[:, :keep], old_m[:, :keep]
  w[i], m[i] = 0, False
  w[i, :len(row)] = rescaled(row, h.total_weight)
  m[i, :len(row)] = True
  w.flags.writeable = m.flags.writeable = False
  return h.replace(tasks=tuple(tasks), weights=w, criterion_mask=m)


def _row(h: Harness, i: int) -> list[float]:
  return [float(x) for x in np.asarray(h.weights)[i, :len(h.tasks[i].criteria)]]


def create(h: Harness, task_id: str, criterion_id: str, text: str, weight: float,
           tags: Sequence[str] = (), check: Check | None = None) -> Harness:
  i = h.index(task_id)
  t = h.tasks[i]
  _check_id(criterion_id, t)
  _check_text(text)
  _check_check(check)
  w = _check_weight(weight)
  row = _row(h, i)
  entry = RubricEntry(criterion_id, text, False, tuple(tags), check)
  return _update(h, i, t.criteria + (entry,), row + [w])


def rewrite(h: Harness, task_id: str, criterion_id: str, text: str,
            check: Check | None = None) -> Harness:
  """New text; `check` replaces the criterion's check, None keeps it."""
  i = h.index(task_id)
  t = h.tasks[i]
  k = _editable(t, criterion_id, "rewritten")
  _check_text(text)
  _check_check(check)
  old = t.criteria[k]
  new_check = old.check if check is None else check
  if text == old.text and new_check == old.check:
    raise HarnessError(f"task {task_id!r}: criterion {criterion_id!r} already has this text "
                       "and check")
  crit = list(t.criteria)
  crit[k] = dataclasses.replace(old, text=text, check=new_check)
  return _update(h, i, crit, _row(h, i))


def delete(h: Harness, task_id: str, criterion_id: str) -> Harness:
  i = h.index(task_id)
  t = h.tasks[i]
  k = _editable(t, criterion_id, "deleted")
  row = _row(h, i)
  return _update(h, i, t.criteria[:k] + t.criteria[k + 1:], row[:k] + row[k + 1:],
                 retired=(criterion_id,))


def reweight(h: Harness, task_id: str, criterion_id: str, weight: float) -> Harness:
  i = h.index(task_id)
  t = h.tasks[i]
  k = t.criterion_index(criterion_id)
  row = _row(h, i)
  row[k] = _check_weight(weight)
  return _update(h, i, t.criteria, row)


def merge(h: Harness, task_id: str, criterion_ids: Sequence[str], new_id: str, text: str,
          weight: float | None = None) -> Harness:
  """Replaces >= 2 criteria by one at the first one's position.

  `weight` defaults to the sum of the merged weights (their combined points).
  """
  i = h.index(task_id)
  t = h.tasks[i]
  ids = list(criterion_ids)
  if len(ids) < 2 or len(set(ids)) != len(ids):
    raise HarnessError(f"merge needs at least two distinct criterion ids, got {ids}")
  ks = [_editable(t, cid, "merged") for cid in ids]
  _check_id(new_id, t)
  _check_text(text)
  row = _row(h, i)
  w = _check_weight(math.fsum(row[k] for k in ks) if weight is None else weight)
  first = min(ks)
  crit, new_row = [], []
  for k, (c, x) in enumerate(zip(t.criteria, row)):
    if k == first:
      crit.append(RubricEntry(new_id, text, False))
      new_row.append(w)
    elif k not in ks:
      crit.append(c)
      new_row.append(x)
  return _update(h, i, crit, new_row, retired=ids)


def split(h: Harness, task_id: str, criterion_id: str,
          parts: Sequence[tuple[str, str, float]]) -> Harness:
  """Replaces one criterion by >= 2 parts (id, text, weight) at its position."""
  i = h.index(task_id)
  t = h.tasks[i]
  k = _editable(t, criterion_id, "split")
  parts = [tuple(p) for p in parts]
  if len(parts) < 2 or any(len(p) != 3 for p in parts):
    raise HarnessError(f"split needs at least two (id, text, weight) parts, got {parts}")
  new_ids = [p[0] for p in parts]
  if len(set(new_ids)) != len(new_ids):
    raise HarnessError(f"split part ids repeat: {new_ids}")
  for cid, text, w in parts:
    _check_id(cid, t)
    _check_text(text)
    _check_weight(w)
  row = _row(h, i)
  tags = t.criteria[k].tags
  crit = (t.criteria[:k] + tuple(RubricEntry(cid, text, False, tags) for cid, text, _ in parts)
          + t.criteria[k + 1:])
  new_row = row[:k] + [float(w) for _, _, w in parts] + row[k + 1:]
  return _update(h, i, crit, new_row, retired=(criterion_id,))

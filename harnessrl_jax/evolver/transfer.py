"""Offering an accepted rubric repair to the other tasks that share its criterion (beyond
the paper, off by default: evolver.transfer_tasks).

The paper's rubric edits are per task. A criterion worded and checked identically in several
tasks (a templated criterion, a planted proxy) is exploited the same way in all of them, and
a repair accepted on one task leaves the others paying for the exploit: on the testbed the
padding hack that static GRPO learns is policy-wide, while the penalties the critic accepted
stayed on the few tasks where they were found (docs/testbed.md).

Here a repair is only *offered*: each retargeted candidate is measured by the critic on the
task it changes, on responses the frozen policy samples for that task, under the same
conditions (i)-(iv) as any candidate. So a repair lands only where the policy is seen
exploiting the criterion now. What carries over (`retarget`):
  rubric_create   the same criterion (a penalty, say), with an id fresh in the task; not
                  offered to a task that already has one of the same sign with the same
                  check (or, without a check, the same text);
  rubric_rewrite  of the target criterion, to a non-anchor sibling: a tightened check is
                  derived again from the sibling's own prompt (`proposer.tightened`),
                  another rewrite is copied.
Candidates with other operations (delete, reweight, merge, split: they depend on the task's
own weights and wording) are not offered.
"""

from __future__ import annotations

from collections.abc import Sequence

from harnessrl_jax.data.schema import Criterion
from harnessrl_jax.evolver.proposer import fresh_id, tightened
from harnessrl_jax.evolver.types import Candidate
from harnessrl_jax.harness import ops as hops
from harnessrl_jax.harness.state import Harness


def siblings(h: Harness, task_id: str, criterion: Criterion) -> list[tuple[str, Criterion]]:
  """(task id, criterion) of every other task in `h`, in harness order, whose rubric holds
  a criterion with `criterion`'s text and check."""
  out = []
  for other in h.task_ids:
    if other == task_id:
      continue
    for c in h.criteria(other):
      if c.text == criterion.text and c.check == criterion.check:
        out.append((other, c))
        break
  return out


def _has_same(h: Harness, task_id: str, op: hops.RubricCreate) -> bool:
  """The task already has a criterion of the same sign that grades what `op`'s would: the
  same check (a second penalty with the check would count the behaviour twice), or the
  same text when `op` has no check."""
  same = (lambda c: c.check == op.check) if op.check is not None else \
      (lambda c: c.check is None and c.text == op.text)
  return any(same(c) and (c.weight < 0) == (op.weight < 0) for c in h.criteria(task_id))


def retarget(cand: Candidate, h: Harness, source: Criterion, task_id: str, sibling: Criterion,
             prompt: str) -> Candidate | None:
  """`cand` (accepted on its task, targeting `source`) as a candidate for `sibling` of task
  `task_id` (whose user prompt is `prompt`); None when it does not carry over."""
  if cand.route != "rubric" or not cand.ops:
    return None
  ops = []
  for op in cand.ops:
    if getattr(op, "task_id", None) != cand.task_id:
      return None
    if isinstance(op, hops.RubricCreate):
      if _has_same(h, task_id, op):
        return None
      base = op.criterion_id.replace(source.id, sibling.id, 1)
      ops.append(hops.RubricCreate(task_id, fresh_id(h, task_id, base), op.text, op.weight,
                                   op.tags, op.check))
    elif isinstance(op, hops.RubricRewrite) and op.criterion_id == source.id:
      if sibling.anchor:
        return None
      if cand.kind == "rubric:tighten":
        found = tightened(sibling, prompt)
        if found is None:
          return None
        text, check = found
      else:
        text, check = op.text, op.check
      ops.append(hops.RubricRewrite(task_id, sibling.id, text, check))
    else:
      return None
  return Candidate("rubric", task_id, sibling.id, tuple(ops), cand.kind,
                   f"offered from task {cand.task_id!r}, where it was accepted: "
                   f"{cand.rationale}")


def offers(accepted: Sequence[tuple[Candidate, Criterion]], h: Harness, prompts, limit: int,
           skip: frozenset[str] = frozenset()) -> list[tuple[Candidate, Candidate]]:
  """(source candidate, its retargeted copy) for the step's `accepted` rubric candidates
  (each with the criterion it targeted), at most `limit` in all and one per task, in
  acceptance order then harness order. `prompts[task_id]` is a task's user prompt; tasks
  in `skip` or without a prompt are passed over."""
  out: list[tuple[Candidate, Candidate]] = []
  taken = set(skip)
  for cand, source in accepted:
    for task_id, sibling in siblings(h, cand.task_id, source):
      if len(out) >= limit:
        return out
      if task_id in taken or task_id not in prompts:
        continue
      copy = retarget(cand, h, source, task_id, sibling, prompts[task_id])
      if copy is not None:
        out.append((cand, copy))
        taken.add(task_id)
  return out

"""One evolver step E: (H_t, recorded groups, memory) -> H_{t+1}, with every candidate logged.

Per drawn task, in draw order:
  1. the attributor labels every criterion of the recorded group (memory read-only);
  2. per route (rubric, guidance, sampling) with an actionable label (confidence >=
     evolver.min_confidence), the most confident such criterion is the target; the
     proposer offers a candidate, the critic measures it on the current frozen policy;
     rejected and unmeasurable candidates go back to the proposer with their measurement
     (so that it tries another kind of change), up to B rounds; then a noop is recorded.
     An accepted candidate's ops are applied (and logged to the harness history) before
     the next route or task is considered;
  2b. with evolver.transfer_tasks > 0 (beyond the paper), after all drawn tasks: each rubric
     candidate accepted this step is offered to other tasks whose rubric holds its target
     criterion word for word and check for check (transfer.py); the frozen policy samples
     a group for each (one batched call) and the critic measures the offer on it;
  3. write-back: the draw (scores, rewards, labels, accepted ops, measurements) goes into
     memory's time index; after all tasks, the semantics index is synced to H_{t+1};
  4. the critic's cells without a verdict, over all its measurements of the step, are
     checked against evolver.max_unscored_share: past it the step raises CriticError (a
     JudgeError) after writing its candidate records and labels, and the driver stops as
     it does for the learner's judge failures (the step is not checkpointed).
Logs (each optional, appended once per step): every candidate record (`candidate_log`,
run_files.CANDIDATES) and every criterion's label (`attribution_log`,
run_files.ATTRIBUTIONS; `attribution_rows`).
The three roles are separate objects and calls: the proposer never measures, the critic
never proposes. Randomness (the critic's re-samples) comes from `key` folded with the
task's position, the route and the round, so the same inputs and key give the same H_{t+1}
(and the same digest). The frozen policy the critic re-samples is an argument of the step
(`resample`), never state of a role; each role call returns what it cost with its result,
and `StepResult.accounting` is the step's sum of those.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from harnessrl_jax import run_files as rf
from harnessrl_jax.data.schema import Criterion, Task
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.evolver import transfer
from harnessrl_jax.evolver.config import EvolverConfig
from harnessrl_jax.evolver.critic import Critic
from harnessrl_jax.evolver.prefetch import Prefetched
from harnessrl_jax.evolver.proposer import ProposalRequest
from harnessrl_jax.evolver.types import (Candidate, Cost, CriterionLabel, Feedback, Group,
                                         Measurement, TaskAttribution)
from harnessrl_jax.harness import guidance as hguidance
from harnessrl_jax.harness.digest import digest
from harnessrl_jax.harness.history import HistoryLog, HistoryRecord, apply_logged
from harnessrl_jax.harness.ops import op_to_json
from harnessrl_jax.harness.state import Harness
from harnessrl_jax.judges.grading import grade
from harnessrl_jax.judges.judge import JudgeError
from harnessrl_jax.memory.time_index import make_draw
from harnessrl_jax.rollout.texts import Resample
from harnessrl_jax.run_ledger import append_jsonl

ROUTE_ORDER = ("rubric", "guidance", "sampling")


@dataclasses.dataclass(frozen=True)
class CandidateRecord:
  """One round of one (task, route): a measured candidate, or the noop that ends a loop."""

  step: int
  task_id: str
  route: str
  criterion_id: str
  round: int
  verdict: str                      # one of run_files.VERDICTS
  candidate: Candidate | None = None
  measurement: Measurement | None = None
  note: str = ""
  offered_from: str = ""            # an offered repair (transfer.py): the task it came from

  def to_json(self) -> dict[str, Any]:
    return {"step": self.step, "task_id": self.task_id, "route": self.route,
            "criterion_id": self.criterion_id, "round": self.round, "verdict": self.verdict,
            "candidate": self.candidate and self.candidate.to_json(),
            "measurement": self.measurement and self.measurement.to_json(), "note": self.note,
            rf.OFFERED_FROM: self.offered_from}


ROLES = ("attributor", "proposer", "critic")


def attribution_rows(step: int, attributions: Sequence[TaskAttribution]
                     ) -> list[dict[str, Any]]:
  """One attributions.jsonl row per labelled criterion: {step (0-based), task_id,
  criterion_id, label, confidence, backend, signals} (a task left unlabelled has none)."""
  return [{"step": int(step), "task_id": att.task_id, "criterion_id": lab.criterion_id,
           "label": lab.label, "confidence": round(float(lab.confidence), 6),
           "backend": att.backend, "signals": dict(lab.signals)}
          for att in attributions for lab in att.labels]


class CriticError(JudgeError):
  """The critic's cells without a verdict passed evolver.max_unscored_share in one step."""


@dataclasses.dataclass(frozen=True)
class Tally:
  """One role's calls in one step: how many, what they cost, and their wall time."""

  calls: int = 0
  cost: Cost = Cost()
  wall_s: float = 0.0

  def add(self, cost: Cost, wall_s: float) -> Tally:
    return Tally(self.calls + 1, self.cost + cost, self.wall_s + wall_s)

  def to_json(self) -> dict[str, Any]:
    return {"calls": self.calls, "llm_requests": self.cost.llm_requests,
            "judge_cells": self.cost.judge_cells, "rollouts": self.cost.rollouts,
            "wall_s": self.wall_s, rf.UNSCORED: self.cost.unscored.to_json()}


def _timed(fn, *args, **kwargs):
  """(fn's result, its wall seconds)."""
  t0 = time.perf_counter()
  out = fn(*args, **kwargs)
  return out, time.perf_counter() - t0


@dataclasses.dataclass(frozen=True)
class StepResult:
  """What one evolver step produced. `accounting[role]` holds calls, llm_requests,
  judge_cells, rollouts, wall_s and the unscored record (run_files.UNSCORED: the critic's
  cells without a verdict) of this step alone, for role in attributor / proposer / critic
  (summed from the costs each call returned)."""

  step: int
  harness: Harness
  digest: str
  attributions: tuple[TaskAttribution, ...]
  records: tuple[CandidateRecord, ...]
  history: tuple[HistoryRecord, ...]
  accounting: dict[str, dict[str, Any]]

  def counts(self) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in self.records:
      out[r.verdict] = out.get(r.verdict, 0) + 1
    return out


def _targets(labels: Sequence[CriterionLabel], route: str, weights: dict[str, float],
             min_conf: float) -> list[CriterionLabel]:
  """The route's targets, best first: the most reward at stake (confidence x |weight|), so
  that a heavy criterion labelled for the first time (a new penalty every answer incurs) is
  not always passed over for a light one seen missing for longer; ties by confidence, then
  order."""
  cands = [(i, lab) for i, lab in enumerate(labels)
           if lab.route == route and lab.confidence >= min_conf]

  def rank(x):
    i, lab = x
    stake = lab.confidence * abs(weights.get(lab.criterion_id, 0))
    return (-round(stake, 9), -lab.confidence, i)
  return [lab for _, lab in sorted(cands, key=rank)]


def _criterion_of(group: Group, criterion_id: str) -> Criterion:
  return next(c for c in group.criteria if c.id == criterion_id)


def _same_rubric(group: Group, h: Harness) -> bool:
  now = h.criteria(group.task_id)
  return [(c.id, c.text) for c in now] == [(c.id, c.text) for c in group.criteria]


@dataclasses.dataclass
class _StepRun:
  """What one `Evolver.step` call has built so far (the harness as it is now, its digest,
  each role's tally, the records, history, labels and accepted rubric repairs) and what
  stays fixed during it (step, key, memory, the frozen policy's resample)."""

  h: Harness
  current: str
  tally: dict[str, Tally]
  step: int
  key: jax.Array
  memory: Any
  resample: Resample | None
  records: list[CandidateRecord] = dataclasses.field(default_factory=list)
  history: list[HistoryRecord] = dataclasses.field(default_factory=list)
  attributions: list[TaskAttribution] = dataclasses.field(default_factory=list)
  repaired: list[tuple[Candidate, Criterion, CriterionLabel]] = dataclasses.field(
      default_factory=list)


@dataclasses.dataclass
class _TaskRun:
  """One drawn task within a step: its position, group and labels, and the records and
  applied ops (JSON) its routes have produced."""

  gi: int
  group: Group
  att: TaskAttribution
  records: list[CandidateRecord] = dataclasses.field(default_factory=list)
  actions: list[dict[str, Any]] = dataclasses.field(default_factory=list)


class Evolver:
  """Wires attributor, proposer and critic, built once (see `build_evolver`); what varies
  per step (harness, groups, memory, the frozen policy) is an argument of `step`."""

  def __init__(self, config: EvolverConfig, *, attributor, proposer, critic: Critic,
               history_log: HistoryLog | None = None, candidate_log: str | None = None,
               attribution_log: str | None = None, tasks: Sequence[Task] = ()):
    """`tasks`: the training pool, by which accepted rubric repairs are offered to other
    tasks (evolver.transfer_tasks; transfer.py).

    With evolver.prefetch_resamples, and roles that answer alike when asked again at no
    model cost (`repeatable`: the rule attributor and proposer), each step first asks them
    for every task's first guidance candidate on H_t and draws those re-samples in one
    sampler call (prefetch.py)."""
    if config.transfer_tasks and not tasks:
      raise HarnessError("evolver.transfer_tasks > 0 needs the training tasks: pass tasks= "
                         "to build_evolver / Evolver")
    self.config = config
    self.tasks = {t.id: t for t in tasks}
    self.attributor = attributor
    self.proposer = proposer
    self.critic = critic
    self.history_log = history_log
    self.candidate_log = candidate_log
    self.attribution_log = attribution_log
    self.prefetch = bool(config.prefetch_resamples) and all(
        getattr(role, "repeatable", False) for role in (attributor, proposer))

  def step(self, h: Harness, groups: Sequence[Group], *, step: int, key: jax.Array,
           memory=None, resample: Resample | None = None) -> StepResult:
    """H_{t+1} from H_t = `h` and the step's recorded `groups`.

    Args:
      resample: the frozen policy of this step, `resample(prompts, key, J)`, with which
        the critic re-samples guidance candidates (None: a guidance candidate raises
        HarnessError).
    """
    run = _StepRun(h, digest(h), {role: Tally() for role in ROLES}, step=step, key=key,
                   memory=memory, resample=resample)
    if self.prefetch and resample is not None:
      run.resample, wall = _timed(self._prefetched, h, groups, step=step, key=key,
                                  memory=memory, resample=resample)
      critic = run.tally["critic"]
      run.tally["critic"] = Tally(critic.calls, critic.cost, critic.wall_s + wall)
    for gi, group in enumerate(groups):
      self._evolve_task(run, gi, group)
    if run.repaired and self.config.transfer_tasks:
      run.h, run.current, offered = self._offer(
          run.h, run.current, run.repaired, step=step, key=jax.random.fold_in(key, len(groups)),
          memory=memory, resample=run.resample, tally=run.tally, history=run.history)
      run.records.extend(offered)
    if memory is not None:
      memory.sync_rubrics(run.h)
    records, attributions = run.records, run.attributions
    if self.candidate_log:
      append_jsonl(self.candidate_log, [r.to_json() for r in records])
    if self.attribution_log:
      append_jsonl(self.attribution_log, attribution_rows(step, attributions))
    self._check_critic(step, run.tally["critic"].cost.unscored, records)
    return StepResult(step, run.h, run.current, tuple(attributions), tuple(records),
                      tuple(run.history), {role: t.to_json() for role, t in run.tally.items()})

  def _evolve_task(self, run: _StepRun, gi: int, group: Group) -> None:
    """One drawn task (step 1-3 of the module docstring): its labels, each route's loop on
    the current harness, and the draw written to memory."""
    (att, cost), wall = _timed(self.attributor.attribute, group, run.h, run.memory, run.step)
    run.tally["attributor"] = run.tally["attributor"].add(cost, wall)
    run.attributions.append(att)
    task = _TaskRun(gi, group, att)
    if not _same_rubric(group, run.h):
      task.records.append(CandidateRecord(run.step, group.task_id, "", "", 0, "noop",
                                          note="the group was judged under an older rubric "
                                               "(the task changed earlier this step)"))
    else:
      weights = {c.id: c.weight for c in group.criteria}
      for ri, route in enumerate(ROUTE_ORDER):
        # The first target the proposer has something for: one it has nothing for (its
        # guidance fields all tried, say) does not end the route.
        for target in _targets(att.labels, route, weights, self.config.min_confidence):
          accepted, rounds = self._repair(run, task, ri, route, target)
          if not accepted:
            task.records.append(CandidateRecord(
                run.step, group.task_id, route, target.criterion_id, rounds, "noop",
                note=f"no candidate accepted after {rounds} round(s)"))
          if accepted or rounds:
            break
    run.records.extend(task.records)
    if run.memory is not None:
      run.memory.add_draw(make_draw(
          group.task_id, run.step, [c.id for c in group.criteria],
          [c.weight for c in group.criteria], group.scores, group.scored, group.rewards,
          labels={lab.criterion_id: lab.label for lab in att.labels},
          actions=tuple(task.actions),
          measurements=tuple(r.to_json() for r in task.records)), group.responses)

  def _repair(self, run: _StepRun, task: _TaskRun, ri: int, route: str,
              target: CriterionLabel) -> tuple[bool, int]:
    """Up to B rounds of propose -> measure for one target; a rejected or unmeasurable
    candidate goes back to the proposer as feedback. Returns (accepted, rounds measured
    without acceptance)."""
    feedback: list[Feedback] = []
    group = task.group
    for b in range(self.config.rounds):
      req = ProposalRequest(run.h, group, target, task.att, run.memory, run.step, b,
                            tuple(feedback))
      (cand, cost), wall = _timed(self.proposer.propose, req)
      run.tally["proposer"] = run.tally["proposer"].add(cost, wall)
      if cand is None:
        break
      k = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(run.key, task.gi), ri), b)
      (meas, _, cost), wall = _timed(self.critic.measure, cand, run.h, group, target,
                                     run.memory, run.step, k, resample=run.resample)
      run.tally["critic"] = run.tally["critic"].add(cost, wall)
      if meas.accepted:
        self._accept(run, task, route, target, cand, meas)
        task.records.append(CandidateRecord(run.step, group.task_id, route,
                                            target.criterion_id, b, "accepted", cand, meas))
        return True, len(feedback)
      verdict = rf.UNMEASURABLE if meas.unmeasurable else rf.REJECTED
      task.records.append(CandidateRecord(run.step, group.task_id, route,
                                          target.criterion_id, b, verdict, cand, meas))
      feedback.append(Feedback(cand, meas))
    return False, len(feedback)

  def _accept(self, run: _StepRun, task: _TaskRun, route: str, target: CriterionLabel,
              cand: Candidate, meas: Measurement) -> None:
    """Applies an accepted candidate's ops to the harness, each logged to the history."""
    if route == "rubric":
      run.repaired.append((cand, _criterion_of(task.group, target.criterion_id), target))
    for op in cand.ops:
      run.h, rec = apply_logged(run.h, op, step=run.step, log=self.history_log,
                                digest_before=run.current, measurement={
                                    "candidate": cand.kind, "route": route,
                                    "criterion_id": target.criterion_id,
                                    "label": target.to_json(),
                                    "critic": meas.to_json()})
      run.current = rec.digest_after
      run.history.append(rec)
      task.actions.append(op_to_json(op))

  def _prefetched(self, h: Harness, groups: Sequence[Group], *, step: int, key: jax.Array,
                  memory, resample: Resample) -> Prefetched:
    """`resample` with each task's first guidance re-sample drawn ahead: the candidate the
    loop of `step` would measure first on the guidance route if no earlier decision of
    the step changed its inputs, at the key the loop would use. The roles' calls here are
    asked again by the loop, which tallies them as before (repeatable roles ask no model;
    the intervention's regrades are the judge's cached cells); their wall time, and the
    shared draw's, is the critic's."""
    chats, keys = [], []
    route = ROUTE_ORDER.index("guidance")
    for gi, group in enumerate(groups if self.config.rounds > 0 else ()):
      if not _same_rubric(group, h):
        continue
      att, _ = self.attributor.attribute(group, h, memory, step)
      weights = {c.id: c.weight for c in group.criteria}
      for target in _targets(att.labels, "guidance", weights, self.config.min_confidence):
        cand, _ = self.proposer.propose(ProposalRequest(h, group, target, att, memory, step,
                                                        0, ()))
        if cand is None:
          continue
        chat = self.critic.resample_chat(cand, h, group)
        if chat is not None:
          chats.append(chat)
          keys.append(jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(key, gi),
                                                            route), 0))
        break
    return Prefetched(resample, chats, keys, self.critic.j, pad_to=len(groups))

  def _offer(self, h: Harness, current: str, repaired, *, step: int, key: jax.Array, memory,
             resample: Resample | None, tally: dict[str, Tally], history: list
             ) -> tuple[Harness, str, list[CandidateRecord]]:
    """Offers the step's accepted rubric repairs to the other tasks sharing their target
    criterion (evolver/transfer.py): the frozen policy samples a group for each offered
    task (one batched call), graded under that task's rubric; the critic then measures the
    retargeted candidate on it as on a recorded group. Returns (harness, digest, records)."""
    if resample is None:
      raise HarnessError("evolver.transfer_tasks needs the step's resample function: pass "
                         "resample= to Evolver.step")
    labels = {(c.task_id, c.criterion_id): lab for c, _, lab in repaired}
    found = transfer.offers([(c, crit) for c, crit, _ in repaired], h,
                            {tid: t.user_text for tid, t in self.tasks.items()},
                            self.config.transfer_tasks)
    if not found:
      return h, current, []
    tasks = [self.tasks[copy.task_id] for _, copy in found]
    prompts = [hguidance.render_prompt(t, h, training=True) for t in tasks]
    (responses, cost), wall = _timed(self._sample_and_grade, h, tasks, prompts, key,
                                     resample)
    tally["critic"] = tally["critic"].add(cost, wall)
    records = []
    for i, ((source, cand), (task, rs)) in enumerate(zip(found, zip(tasks, responses))):
      criteria = h.criteria(task.id)
      group = Group(task, criteria, rs[0], rs[1], rs[2], rs[3])
      was = labels[(source.task_id, source.criterion_id)]
      label = dataclasses.replace(was, criterion_id=cand.criterion_id,
                                  evidence=(), signals=(("offered_from", source.task_id),))
      (meas, _, cost), wall = _timed(self.critic.measure, cand, h, group, label, memory,
                                     step, jax.random.fold_in(key, i), resample=resample)
      tally["critic"] = tally["critic"].add(cost, wall)
      note = f"offered from task {source.task_id!r} (criterion {source.criterion_id!r})"
      if meas.accepted:
        for op in cand.ops:
          h, rec = apply_logged(h, op, step=step, log=self.history_log, digest_before=current,
                                measurement={"candidate": cand.kind, "route": "rubric",
                                             "criterion_id": cand.criterion_id,
                                             "label": label.to_json(),
                                             "critic": meas.to_json(), "offered_from":
                                             source.task_id})
          current = rec.digest_after
          history.append(rec)
        verdict = rf.ACCEPTED
      else:
        verdict = rf.UNMEASURABLE if meas.unmeasurable else rf.REJECTED
      records.append(CandidateRecord(step, task.id, "rubric", cand.criterion_id, 0, verdict,
                                     cand, meas, note=note, offered_from=source.task_id))
    return h, current, records

  def _sample_and_grade(self, h: Harness, tasks, prompts, key, resample):
    """Per task (responses, scores, scored, rewards) of a fresh group of the frozen policy,
    graded under the task's rubric in `h`, and what that cost."""
    if not self.critic.measure_effect:   # "no critic": offers are not measured
      return [((), np.zeros((len(h.criteria(t.id)), 0)), np.zeros((len(h.criteria(t.id)), 0),
                                                                 bool), np.zeros(0))
              for t in tasks], Cost()
    sampled = resample(prompts, key, self.critic.j)
    judged = grade(self.critic.judge, tasks, sampled, [h.criteria(t.id) for t in tasks],
                   check_limit=False)
    cost = Cost(llm_requests=judged.requests, judge_cells=judged.cells,
                rollouts=sum(len(r) for r in sampled), unscored=judged.unscored)
    return [(tuple(r), judged.scores[i, :len(h.criteria(t.id)), :len(r)],
             judged.scored[i, :len(h.criteria(t.id)), :len(r)], judged.rewards[i, :len(r)])
            for i, (t, r) in enumerate(zip(tasks, sampled))], cost

  def _check_critic(self, step: int, lost, records: Sequence[CandidateRecord]) -> None:
    """CriticError when the critic's lost cells of the step (`lost`, an Unscored) pass
    evolver.max_unscored_share."""
    limit = self.config.max_unscored_share
    if lost.share <= limit:
      return
    n = sum(r.verdict == rf.UNMEASURABLE for r in records)
    m = sum(r.candidate is not None for r in records)
    raise CriticError(
        f"critic, step {step + 1}: {lost.describe()} in its measurements ({n} of {m} "
        f"candidates unmeasurable), more than evolver.max_unscored_share={limit:g}: check "
        "that the judge can score the candidates' criteria and re-sampled responses (the "
        "learner's cells may pass while these fail), or raise evolver.max_unscored_share.",
        lost)


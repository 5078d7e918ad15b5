"""The just-in-time critic: measures each candidate on the current frozen policy.

  rubric    regrade the recorded group under the candidate rubric (the judge's cache makes
            unchanged cells free): Delta_c = r_old - r_new, in points. A falling reward is
            the evidence that the rubric closed a superficial pass; a rising one proves
            nothing about a rubric being right.
  guidance  re-sample a group of J under the candidate guidance with the frozen policy and
            grade it under the unchanged rubric: Delta_g = r_new - r_old, in points.
  sampling  no policy query: Delta_w = w_old - w_new (ladder units).

Acceptance (design choice; the paper lists (i)-(iv) without their text):
  (i)   sign: Delta > 0;
  (ii)  magnitude inside the route's band [lo, hi] in points (rubric, guidance);
  (iii) structural validity: every op applies (anchors kept, ids fresh, guidance within
        the cap), the result keeps the harness invariants (positive weights sum to Lambda,
        at least one positive criterion), and the task's anchors are all still there;
  (iv)  no reversal, within `memory_window` steps, of an update accepted on the same
        task (level down after up, dropping a field added, deleting a created criterion,
        ...) unless there is new evidence: the target criterion's label then differs from
        its label now.
Secondary operations of a joint candidate (e.g. the drop that makes room for a field) are
checked by (iii) only; the measured Delta is of the whole candidate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import numpy as np

from harnessrl_jax.data.frozen import thaw
from harnessrl_jax.data.reward import rubric_reward
from harnessrl_jax.data.schema import Criterion
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.evolver.config import EvolverConfig, check_band
from harnessrl_jax.evolver.types import Candidate, Cost, CriterionLabel, Group, Measurement
from harnessrl_jax.harness import guidance as hguidance
from harnessrl_jax.harness import ops as hops
from harnessrl_jax.harness.state import Harness, invariant_problems
from harnessrl_jax.judges.grading import grade
from harnessrl_jax.judges.judge import JudgeError
from harnessrl_jax.rollout.texts import Resample

# |Delta| at or below this many points is float32 rounding of rescaled weights, not an
# effect: it fails (i).
SIGN_TOL = 1e-3

# (kind of a later op) -> kinds of an earlier op it would reverse on the same target
_REVERSES = {"sampling_level_down": ("sampling_level_up",),
             "sampling_level_up": ("sampling_level_down",),
             "drop_guidance": ("add_guidance",), "add_guidance": ("drop_guidance",),
             "rubric_delete": ("rubric_create", "rubric_rewrite")}


def mean_reward(criteria: Sequence[Criterion], scores, scored) -> float:
  """Mean reward of a group's valid rollouts (nan if none is valid)."""
  w = np.array([[c.weight for c in criteria]], np.float32)
  out = rubric_reward(np.asarray(scores)[None], np.asarray(scored)[None], w,
                      np.ones_like(w, bool))
  valid = np.asarray(out.valid[0])
  return float(np.asarray(out.reward[0], np.float64)[valid].mean()) if valid.any() \
      else float("nan")


def _target(op) -> tuple[str, str]:
  """What an op acts on: (task, criterion id or guidance field or "")."""
  return (getattr(op, "task_id", ""),
          getattr(op, "criterion_id", "") or getattr(op, "field", ""))


class Critic:
  """Measures candidates; never proposes them. Holds nothing that changes: the policy to
  measure on is an argument of each `measure` call.

  Args:
    judge: a `judges.Judge` (its cache makes regrading unchanged cells free).
    config: the evolver section (bands, memory_window, resample_j).
    num_samples: J of the guidance re-sample when config.resample_j is 0.
    bands: {"guidance": (lo, hi), "rubric": (lo, hi)} in points; default: the config's.
    measure_effect: False accepts every structurally valid candidate without measuring
      it on the policy (config.ablation.critic False, the paper's "no critic").
  """

  def __init__(self, judge, config: EvolverConfig, *, num_samples: int = 8,
               bands: Mapping[str, tuple[float, float]] | None = None,
               measure_effect: bool = True):
    self.judge = judge
    self.window = config.memory_window
    self.j = config.resample_j or int(num_samples)
    self.bands = {route: check_band(band, f"evolver {route} band")
                  for route, band in (bands or config.bands).items()}
    self.measure_effect = bool(measure_effect)

  def measure(self, cand: Candidate, h: Harness, group: Group, label: CriterionLabel,
              memory, step: int, key: jax.Array, *, resample: Resample | None = None
              ) -> tuple[Measurement, Harness | None, Cost]:
    """(measurement with verdict, the candidate harness if it applies, what it cost).

    `resample` is the frozen policy of this step; a guidance candidate needs it.
    """
    try:
      new = hops.apply_all(h, cand.ops)
    except HarnessError as e:
      return Measurement(0.0, None, False, (f"(iii) structural: {e}",)), None, Cost()
    problems = tuple(self.structural_problems(h, new, cand))
    if not self.measure_effect:
      return Measurement(0.0, None, not problems, problems), new, Cost()
    if problems:  # not worth a policy query or a regrade
      return Measurement(0.0, self.bands.get(cand.route), False, problems), new, Cost()
    reversal = self._reversal(cand, label, memory, step)
    try:
      meas, cost = self._effect(cand, h, new, group, reversal, key, resample)
    except JudgeError as e:  # e.g. a new criterion this judge cannot score
      return Measurement(0.0, self.bands.get(cand.route), False,
                         (f"unmeasurable: {e}",)), new, Cost()
    return meas, new, cost

  def _effect(self, cand, h, new, group, reversal, key, resample
              ) -> tuple[Measurement, Cost]:
    lam = h.total_weight
    cost = Cost()
    r_old = r_new = None
    if cand.route == "sampling":
      ladder = np.asarray(h.ladder, np.float64)
      delta = float(ladder[h.level(cand.task_id)] - ladder[new.level(cand.task_id)])
      band = None
    elif cand.route == "rubric":
      r_old, old_cost = self._baseline(h, group)
      r_new, new_cost = self._grade(group, group.responses, new.criteria(cand.task_id))
      cost = old_cost + new_cost
      delta, band = (r_old - r_new) * lam, self.bands["rubric"]
    elif cand.route == "guidance":
      if resample is None:
        raise HarnessError("the critic needs the step's resample function to measure "
                           "guidance: pass resample= to Evolver.step / AsyncEvolver.submit")
      r_old, old_cost = self._baseline(h, group)
      prompt = hguidance.render_prompt(group.task, new, training=True)
      responses = resample([prompt], key, self.j)[0]
      r_new, new_cost = self._grade(group, responses, new.criteria(cand.task_id))
      cost = old_cost + new_cost + Cost(rollouts=len(responses))
      delta, band = (r_new - r_old) * lam, self.bands["guidance"]
    else:
      raise HarnessError(f"unknown candidate route {cand.route!r}")
    reasons = []
    if not np.isfinite(delta) or delta <= SIGN_TOL:
      reasons.append(f"(i) sign: Delta={delta:.4g} is not > 0")
    elif band is not None and not band[0] <= delta <= band[1]:
      reasons.append(f"(ii) band: Delta={delta:.4g} points outside [{band[0]:g}, {band[1]:g}]")
    if reversal:
      reasons.append(reversal)
    return Measurement(float(delta), band, not reasons, tuple(reasons), r_old, r_new,
                       cost.judge_cells, cost.rollouts), cost

  def _grade(self, group: Group, responses, criteria) -> tuple[float, Cost]:
    """(mean reward of `responses` under `criteria`, the judge requests and cells)."""
    judged = grade(self.judge, [group.task], [responses], [criteria])
    return judged.mean_reward(0), Cost(llm_requests=judged.requests, judge_cells=judged.cells)

  def _baseline(self, h: Harness, group: Group) -> tuple[float, Cost]:
    """r_old: the recorded group under the task's rubric in `h`. That is the recorded
    scores unless an update accepted earlier in this step changed the rubric; then the
    recorded responses are regraded (so Delta compares like with like)."""
    now = h.criteria(group.task_id)
    key = lambda cs: [(c.id, c.text, float(c.weight)) for c in cs]
    if key(now) == key(group.criteria):
      return mean_reward(group.criteria, group.scores, group.scored), Cost()
    return self._grade(group, group.responses, now)

  def structural_problems(self, old: Harness, new: Harness, cand: Candidate) -> list[str]:
    """Check (iii) of `new` = `cand` applied to `old`: its invariant problems and the
    task's removed anchors (empty: structurally valid)."""
    out = [f"(iii) structural: {p}" for p in invariant_problems(new)]
    anchors_old = {c.id for c in old.criteria(cand.task_id) if c.anchor}
    anchors_new = {c.id for c in new.criteria(cand.task_id) if c.anchor}
    if anchors_old - anchors_new:
      out.append(f"(iii) structural: anchors {sorted(anchors_old - anchors_new)} removed")
    return out

  def _reversal(self, cand: Candidate, label: CriterionLabel, memory, step: int) -> str:
    if memory is None:
      return ""
    for d in reversed(memory.time.draws(cand.task_id)):
      if step - d.step > self.window:
        break
      for a in d.actions:
        earlier = hops.op_from_json(thaw(a))
        for op in cand.ops:
          if earlier.kind not in _REVERSES.get(op.kind, ()):
            continue
          if _target(earlier) != _target(op):
            continue
          before = d.labels.get(label.criterion_id)
          if before is not None and before != label.label:
            continue  # new evidence: the criterion's label changed since then
          return (f"(iv) reversal: {op.kind} would undo {earlier.kind} accepted at step "
                  f"{d.step} (within {self.window} steps) without new evidence")
    return ""

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

Unmeasurable (its own verdict, never a rejection with Delta = 0): the judge left a cell of
the measurement's regrades or re-samples without a verdict (transport, parse, refused), or
gave no verdict at all on a criterion the candidate creates or changes (e.g. a program
judge has no verdict on a new criterion that carries no check: the proposer gives a
criterion a check whenever the exploit it closes is checkable), or no rollout of the measurement has a
reward. The critic grades without the judge's own limit: the evolver counts the lost cells
of all its measurements of a step against evolver.max_unscored_share (evolve.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import jax
import numpy as np

from harnessrl_jax.data.frozen import thaw
from harnessrl_jax.data.reward import rubric_reward
from harnessrl_jax.data.schema import Criterion
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.evolver import acceptance
from harnessrl_jax.evolver.config import EvolverConfig, check_band
from harnessrl_jax.evolver.types import Candidate, Cost, CriterionLabel, Group, Measurement
from harnessrl_jax.harness import guidance as hguidance
from harnessrl_jax.harness import ops as hops
from harnessrl_jax.harness.state import Harness, invariant_problems
from harnessrl_jax.judges.grading import Judged, grade
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


def _signature(criteria: Sequence[Criterion]) -> list[tuple]:
  return [(c.id, c.text, float(c.weight), c.check) for c in criteria]


def silent_criteria(old: Sequence[Criterion], new: Sequence[Criterion], judged: Judged,
                    target: str) -> list[str]:
  """Ids of the criteria the candidate changes that got no verdict on any rollout of
  `judged` (graded under `new`, one task): those `old` lacks or words or checks
  differently, and the `target` criterion if its weight changed. (The weights a rescale to
  Lambda moves are not changes of the candidate's.) A changed criterion that carries a
  check gets its verdicts from any judge that runs checks, the program judge included."""
  before = {c.id: c for c in old}
  changed = [k for k, c in enumerate(new)
             if c.id not in before or c.text != before[c.id].text
             or c.check != before[c.id].check
             or (c.id == target and c.weight != before[c.id].weight)]
  return [new[k].id for k in changed if not judged.scored[0, k].any()]


def unmeasurable_reasons(lost, silent: Sequence[str], delta: float) -> tuple[str, ...]:
  """Why a measurement gives no Delta (empty: it does): cells the judge lost (`lost`, a
  judges.score_matrix.Unscored), changed criteria without any verdict, no reward at all."""
  out = []
  if lost.count:
    out.append(f"unmeasurable: {lost.describe()} in the measurement")
  if silent:
    out.append(f"unmeasurable: no verdict on changed criteria {', '.join(silent)}")
  if not out and not np.isfinite(delta):
    out.append("unmeasurable: no reward to compare (no valid rollout before or after)")
  return tuple(out)


def _rewards(judged: Judged) -> np.ndarray:
  """[J] rewards of a one-task graded batch, nan where not valid."""
  return np.where(judged.valid[0], judged.rewards[0], np.nan)


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
    prompt_tokens: the length in tokens of a chat as the policy's sampler encodes it; with
      `max_prompt_tokens` (the largest of rollout.prompt_buckets), check (iii) refuses a
      candidate whose task's training prompt would not fit, before re-sampling it: the
      sampler refuses such a prompt, which would stop the run (in the re-sample, or at the
      task's next draw had it been accepted unmeasured).
  """

  def __init__(self, judge, config: EvolverConfig, *, num_samples: int = 8,
               bands: Mapping[str, tuple[float, float]] | None = None,
               measure_effect: bool = True,
               prompt_tokens: Callable[[Sequence], int] | None = None,
               max_prompt_tokens: int | None = None):
    self.judge = judge
    self.prompt_tokens = prompt_tokens
    self.max_prompt_tokens = max_prompt_tokens
    self.window = config.memory_window
    self.j = config.resample_j or int(num_samples)
    self.bands = {route: check_band(band, f"evolver {route} band")
                  for route, band in (bands or config.bands).items()}
    self.measure_effect = bool(measure_effect)
    if config.accept_test not in acceptance.TESTS:
      raise HarnessError(f"config.evolver.accept_test = {config.accept_test!r}: expected one "
                         f"of {acceptance.TESTS}")
    if not 0 < config.accept_alpha < 1:
      raise HarnessError(f"config.evolver.accept_alpha = {config.accept_alpha}: must be in "
                         "(0, 1)")
    self.test = config.accept_test
    self.alpha = float(config.accept_alpha)

  def measure(self, cand: Candidate, h: Harness, group: Group, label: CriterionLabel,
              memory, step: int, key: jax.Array, *, resample: Resample | None = None
              ) -> tuple[Measurement, Harness | None, Cost]:
    """(measurement with verdict, the candidate harness if it applies, what it cost).

    `resample` is the frozen policy of this step; a guidance candidate needs it.
    """
    new, problems = self._applied(cand, h, group)
    if new is None:
      return Measurement(0.0, None, False, problems), None, Cost()
    if not self.measure_effect:
      return Measurement(0.0, None, not problems, problems), new, Cost()
    if problems:  # not worth a policy query or a regrade
      return Measurement(0.0, self.bands.get(cand.route), False, problems), new, Cost()
    reversal = self._reversal(cand, label, memory, step)
    meas, cost = self._effect(cand, h, new, group, reversal, key, resample)
    return meas, new, cost

  def resample_chat(self, cand: Candidate, h: Harness, group: Group):
    """The conversation `measure` would re-sample for `cand` on `h`, or None where it would
    not re-sample (not guidance, not measured, structurally invalid): what the evolver
    draws ahead of the step's measurements (prefetch.py)."""
    if cand.route != "guidance" or not self.measure_effect:
      return None
    new, problems = self._applied(cand, h, group)
    if new is None or problems:
      return None
    return hguidance.render_prompt(group.task, new, training=True)

  def _applied(self, cand: Candidate, h: Harness, group: Group
               ) -> tuple[Harness | None, tuple[str, ...]]:
    """(`cand` applied to `h`, or None where an op does not apply; check (iii)'s problems)."""
    try:
      new = hops.apply_all(h, cand.ops)
    except HarnessError as e:
      return None, (f"(iii) structural: {e}",)
    return new, (*self.structural_problems(h, new, cand), *self._overlong(group, new))

  def _effect(self, cand, h, new, group, reversal, key, resample
              ) -> tuple[Measurement, Cost]:
    lam = h.total_weight
    cost = Cost()
    r_old = r_new = None
    responses: tuple[str, ...] = ()   # a guidance candidate's re-sampled answers
    test = None   # evolver.accept_test's result, where it replaces the band's lower bound
    silent: list[str] = []   # criteria the candidate changes that got no verdict
    if cand.route == "sampling":
      ladder = np.asarray(h.ladder, np.float64)
      delta = float(ladder[h.level(cand.task_id)] - ladder[new.level(cand.task_id)])
      band = None
    elif cand.route == "rubric":
      r_old, old_cost = self._baseline(h, group)
      criteria = new.criteria(cand.task_id)
      r_new, new_cost, judged = self._grade(group, group.responses, criteria)
      cost = old_cost + new_cost
      delta, band = (r_old - r_new) * lam, self.bands["rubric"]
      silent = silent_criteria(h.criteria(cand.task_id), criteria, judged,
                               cand.criterion_id)
      if self.test == "ttest":
        test = acceptance.paired(self._baseline_rewards(h, group), _rewards(judged),
                                 self.alpha, lam)
    elif cand.route == "guidance":
      if resample is None:
        raise HarnessError("the critic needs the step's resample function to measure "
                           "guidance: pass resample= to Evolver.step")
      r_old, old_cost = self._baseline(h, group)
      prompt = hguidance.render_prompt(group.task, new, training=True)
      responses = tuple(resample([prompt], key, self.j)[0])
      r_new, new_cost, judged = self._grade(group, responses, new.criteria(cand.task_id))
      cost = old_cost + new_cost + Cost(rollouts=len(responses))
      delta, band = (r_new - r_old) * lam, self.bands["guidance"]
      if self.test == "ttest":
        test = acceptance.two_sample(self._baseline_rewards(h, group), _rewards(judged),
                                     self.alpha, lam)
    else:
      raise HarnessError(f"unknown candidate route {cand.route!r}")
    unmeasurable = unmeasurable_reasons(cost.unscored, silent, delta)
    if unmeasurable:
      return Measurement(None, band, False, unmeasurable, r_old, r_new, cost.judge_cells,
                         cost.rollouts, unmeasurable=True, unscored=cost.unscored,
                         responses=responses), cost
    reasons = []
    if delta <= SIGN_TOL:
      reasons.append(f"(i) sign: Delta={delta:.4g} is not > 0")
    elif test is not None:
      if not test.accepted:
        reasons.append(test.reason(self.alpha))
      elif delta > band[1]:
        reasons.append(f"(ii) band: Delta={delta:.4g} points above the upper bound "
                       f"{band[1]:g}")
    elif band is not None and not band[0] <= delta <= band[1]:
      reasons.append(f"(ii) band: Delta={delta:.4g} points outside [{band[0]:g}, {band[1]:g}]")
    if reversal:
      reasons.append(reversal)
    return Measurement(float(delta), band, not reasons, tuple(reasons), r_old, r_new,
                       cost.judge_cells, cost.rollouts, unscored=cost.unscored,
                       responses=responses), cost

  def _grade(self, group: Group, responses, criteria) -> tuple[float, Cost, Judged]:
    """(mean reward of `responses` under `criteria`, the judge requests, cells and lost
    cells, the graded batch). Without the judge's limit: lost cells make the candidate
    unmeasurable, and the evolver limits them per step."""
    judged = grade(self.judge, [group.task], [responses], [criteria], check_limit=False)
    return judged.mean_reward(0), Cost(llm_requests=judged.requests, judge_cells=judged.cells,
                                       unscored=judged.unscored), judged

  def _baseline(self, h: Harness, group: Group) -> tuple[float, Cost]:
    """r_old: the recorded group under the task's rubric in `h`. That is the recorded
    scores unless an update accepted earlier in this step changed the rubric; then the
    recorded responses are regraded (so Delta compares like with like)."""
    now = h.criteria(group.task_id)
    if _signature(now) == _signature(group.criteria):
      return mean_reward(group.criteria, group.scores, group.scored), Cost()
    r, cost, _ = self._grade(group, group.responses, now)
    return r, cost

  def _baseline_rewards(self, h: Harness, group: Group) -> np.ndarray:
    """[J] rewards of the recorded group under the task's rubric in `h` (nan: not valid),
    as `_baseline` grades them (the accept test needs each response's, not the mean)."""
    now = h.criteria(group.task_id)
    if _signature(now) == _signature(group.criteria):
      w = np.array([[c.weight for c in group.criteria]], np.float32)
      out = rubric_reward(np.asarray(group.scores)[None], np.asarray(group.scored)[None], w,
                          np.ones_like(w, bool))
      return np.where(np.asarray(out.valid[0]), np.asarray(out.reward[0], np.float64),
                      np.nan)
    _, _, judged = self._grade(group, group.responses, now)
    return _rewards(judged)

  def structural_problems(self, old: Harness, new: Harness, cand: Candidate) -> list[str]:
    """Check (iii) of `new` = `cand` applied to `old`: its invariant problems and the
    task's removed anchors (empty: structurally valid)."""
    out = [f"(iii) structural: {p}" for p in invariant_problems(new)]
    anchors_old = {c.id for c in old.criteria(cand.task_id) if c.anchor}
    anchors_new = {c.id for c in new.criteria(cand.task_id) if c.anchor}
    if anchors_old - anchors_new:
      out.append(f"(iii) structural: anchors {sorted(anchors_old - anchors_new)} removed")
    return out

  def _overlong(self, group: Group, new: Harness) -> tuple[str, ...]:
    """Check (iii)'s prompt bound: the task's training prompt under `new` fits the largest
    prompt bucket (nothing to check without `prompt_tokens` and `max_prompt_tokens`)."""
    if self.prompt_tokens is None or self.max_prompt_tokens is None:
      return ()
    n = int(self.prompt_tokens(hguidance.render_prompt(group.task, new, training=True)))
    if n <= self.max_prompt_tokens:
      return ()
    return (f"(iii) structural: the task's training prompt would be {n} tokens, more than "
            f"the largest prompt bucket {self.max_prompt_tokens} (rollout.prompt_buckets)",)

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

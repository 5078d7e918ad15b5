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

import time
from collections.abc import Callable, Sequence

import jax
import numpy as np

from harnessrl_jax.data.frozen import thaw
from harnessrl_jax.data.reward import rubric_reward
from harnessrl_jax.data.schema import Criterion, Message
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.evolver.types import Candidate, CriterionLabel, Group, Measurement
from harnessrl_jax.harness import guidance as hguidance
from harnessrl_jax.harness import ops as hops
from harnessrl_jax.harness.state import Harness, invariant_problems
from harnessrl_jax.judges.judge import JudgeError

# |Delta| at or below this many points is float32 rounding of rescaled weights, not an
# effect: it fails (i).
SIGN_TOL = 1e-3

# resample(prompts, key, num_samples) -> responses[prompt][sample]
Resample = Callable[[Sequence[tuple[Message, ...]], jax.Array, int], list[list[str]]]

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
  """Measures candidates; never proposes them.

  Args:
    judge: a `judges.Judge` (its cache makes regrading unchanged cells free).
    resample: draws J responses per prompt from the current frozen policy.
    config: the evolver section (bands, rounds, memory_window, resample_j).
    num_samples: J of the guidance re-sample when config.resample_j is 0.
    bands: {"guidance": (lo, hi), "rubric": (lo, hi)} in points; default: the config's.
  """

  def __init__(self, judge, resample: Resample | None, config, *, num_samples: int = 8,
               bands: dict[str, tuple[float, float]] | None = None):
    self.judge = judge
    self.resample = resample
    self.window = int(config.memory_window)
    self.j = int(config.resample_j) or int(num_samples)
    self.bands = dict(bands) if bands else {
        "guidance": tuple(float(x) for x in config.guidance_band),
        "rubric": tuple(float(x) for x in config.rubric_band)}
    for route, (lo, hi) in self.bands.items():
      if not 0 <= lo <= hi:
        raise HarnessError(f"evolver {route} band [{lo}, {hi}]: need 0 <= lo <= hi (points)")
    self.judge_cells = self.rollouts = self.judge_requests = 0
    self.wall_s = 0.0

  def measure(self, cand: Candidate, h: Harness, group: Group, label: CriterionLabel,
              memory, step: int, key: jax.Array) -> tuple[Measurement, Harness | None]:
    """(measurement with verdict, the candidate harness if it applies)."""
    t0 = time.perf_counter()
    try:
      return self._measure(cand, h, group, label, memory, step, key)
    finally:
      self.wall_s += time.perf_counter() - t0

  def _measure(self, cand, h, group, label, memory, step, key):
    try:
      new = hops.apply_all(h, cand.ops)
    except HarnessError as e:
      return Measurement(0.0, None, False, (f"(iii) structural: {e}",)), None
    problems = self.structural_problems(h, new, cand)
    if problems:  # not worth a policy query or a regrade
      return Measurement(0.0, self.bands.get(cand.route), False, tuple(problems)), new
    reversal = self._reversal(cand, label, memory, step)
    try:
      return self._effect(cand, h, new, group, reversal, key), new
    except JudgeError as e:  # e.g. a new criterion this judge cannot score
      return Measurement(0.0, self.bands.get(cand.route), False,
                         (f"unmeasurable: {e}",)), new

  def _effect(self, cand, h, new, group, reversal, key) -> Measurement:
    lam = h.total_weight
    judge_cells = rollouts = 0
    r_old = r_new = None
    if cand.route == "sampling":
      ladder = np.asarray(h.ladder, np.float64)
      delta = float(ladder[h.level(cand.task_id)] - ladder[new.level(cand.task_id)])
      band = None
    elif cand.route == "rubric":
      r_old, judge_cells = self._baseline(h, group)
      r_new, cells = self._grade(group, group.responses, new.criteria(cand.task_id))
      judge_cells += cells
      delta, band = (r_old - r_new) * lam, self.bands["rubric"]
    elif cand.route == "guidance":
      if self.resample is None:
        raise HarnessError("the critic needs a resample function to measure guidance")
      r_old, judge_cells = self._baseline(h, group)
      prompt = hguidance.render_prompt(group.task, new, training=True)
      responses = self.resample([prompt], key, self.j)[0]
      rollouts = len(responses)
      r_new, cells = self._grade(group, responses, new.criteria(cand.task_id))
      judge_cells += cells
      delta, band = (r_new - r_old) * lam, self.bands["guidance"]
    else:
      raise HarnessError(f"unknown candidate route {cand.route!r}")
    self.judge_cells += judge_cells
    self.rollouts += rollouts
    reasons = []
    if not np.isfinite(delta) or delta <= SIGN_TOL:
      reasons.append(f"(i) sign: Delta={delta:.4g} is not > 0")
    elif band is not None and not band[0] <= delta <= band[1]:
      reasons.append(f"(ii) band: Delta={delta:.4g} points outside [{band[0]:g}, {band[1]:g}]")
    if reversal:
      reasons.append(reversal)
    return Measurement(float(delta), band, not reasons, tuple(reasons), r_old, r_new,
                       judge_cells, rollouts)

  def _grade(self, group: Group, responses, criteria) -> tuple[float, int]:
    """(mean reward of `responses` under `criteria`, judge cells)."""
    m = self.judge.score([group.task], [list(responses)], [criteria])
    self.judge_requests += m.stats.requests
    k = len(criteria)
    return mean_reward(criteria, m.scores[0, :k], m.scored[0, :k]), m.stats.cells

  def _baseline(self, h: Harness, group: Group) -> tuple[float, int]:
    """r_old: the recorded group under the task's rubric in `h`. That is the recorded
    scores unless an update accepted earlier in this step changed the rubric; then the
    recorded responses are regraded (so Delta compares like with like)."""
    now = h.criteria(group.task_id)
    key = lambda cs: [(c.id, c.text, float(c.weight)) for c in cs]
    if key(now) == key(group.criteria):
      return mean_reward(group.criteria, group.scores, group.scored), 0
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
